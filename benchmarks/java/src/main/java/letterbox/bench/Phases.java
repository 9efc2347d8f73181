package letterbox.bench;

import static java.nio.charset.StandardCharsets.US_ASCII;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerBuilder;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.TypedMessageBuilder;

/** The three timed phases. Payloads are 100 bytes that start with the message's index (10 digits). */
final class Phases {
    record Options(String adminUrl, int messages, int rounds, int maxRedeliveries, long nackDelayMs,
                   boolean clientDlq, boolean clientRedrive, long timeoutS) {}

    static final String SUB = "work";
    static final int SIZE = 100;
    static final int WARM_UP = 1000;

    private final PulsarClient client;
    private final Options o;

    Phases(PulsarClient client, Options o) {
        this.client = client;
        this.o = o;
    }

    static byte[] payload(int i) {
        byte[] b = new byte[SIZE];
        Arrays.fill(b, (byte) 'x');
        System.arraycopy(String.format("%010d", i).getBytes(US_ASCII), 0, b, 0, 10);
        return b;
    }

    static int index(Message<byte[]> m) {
        return Integer.parseInt(new String(m.getData(), 0, 10, US_ASCII));
    }

    static double since(long t0) {
        return (System.nanoTime() - t0) / 1e9;
    }

    long deadline() {
        return System.nanoTime() + o.timeoutS() * 1_000_000_000L;
    }

    /** n messages, unbatched (one message per entry on both brokers), every send confirmed. */
    void produce(String topic, int n) throws Exception {
        try (Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(false).maxPendingMessages(1000)
                .blockIfQueueFull(true).sendTimeout(60, SECONDS).create()) {
            List<CompletableFuture<MessageId>> sent = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                sent.add(p.sendAsync(payload(i)));
            }
            CompletableFuture.allOf(sent.toArray(new CompletableFuture[0])).get(o.timeoutS(), SECONDS);
        }
    }

    ConsumerBuilder<byte[]> worker(String topic) {
        return client.newConsumer().topic(topic).subscriptionName(SUB).subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .negativeAckRedeliveryDelay(o.nackDelayMs(), MILLISECONDS).receiverQueueSize(1000);
    }

    /** Untimed: the JIT and the connections warmed on both sides before the first timed phase. */
    void warmUp(String topic) throws Exception {
        nackRounds(topic, Math.min(WARM_UP, o.messages()), 1);
    }

    Map<String, Object> redeliver(String topic) throws Exception {
        return nackRounds(topic, o.messages(), o.rounds());
    }

    /** Each message nacked on its first `rounds` deliveries and acked on the next one. The clock runs
     *  from subscribe() returning until the last message is acked. */
    private Map<String, Object> nackRounds(String topic, int n, int rounds) throws Exception {
        produce(topic, n);
        int[] deliveries = new int[n];
        int acked = 0;
        long extra = 0;
        long total = 0;
        try (Consumer<byte[]> c = worker(topic).subscribe()) {
            long t0 = System.nanoTime();
            long end = deadline();
            while (acked < n && System.nanoTime() < end) {
                Message<byte[]> m = c.receive(1, SECONDS);
                if (m == null) {
                    continue;
                }
                total++;
                int d = ++deliveries[index(m)];
                if (d <= rounds) {
                    c.negativeAcknowledge(m);
                } else {
                    c.acknowledge(m);
                    if (d == rounds + 1) {
                        acked++;
                    } else {
                        extra++;
                    }
                }
            }
            double s = since(t0);
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("completed", acked == n);
            r.put("seconds", s);
            r.put("redeliveries", total - n);
            r.put("redeliveries_per_s", (double) n * rounds / s);
            r.put("deliveries_beyond_plan", extra);
            return r;
        }
    }

    /** Every message nacked on every delivery until it is dead-lettered; the clock runs from
     *  subscribe() returning until a consumer on the DLQ has received each of the n. Then, once the
     *  source subscription's backlog is 0, a Reader counts the DLQ from its start. */
    Map<String, Object> deadLetter(String topic) throws Exception {
        int n = o.messages();
        produce(topic, n);
        String dlq = topic + "-" + SUB + "-DLQ";
        Admin admin = new Admin(o.adminUrl());
        Map<String, Object> r = new LinkedHashMap<>();
        try (Arrivals arrived = new Arrivals(client, dlq, "count", n)) {
            ConsumerBuilder<byte[]> b = worker(topic);
            if (o.clientDlq()) {
                b.deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(o.maxRedeliveries())
                        .deadLetterTopic(dlq).build());
            } else {
                b.property("letterbox.dlq.max_redeliveries", String.valueOf(o.maxRedeliveries()));
            }
            try (Consumer<byte[]> c = b.subscribe()) {
                long t0 = System.nanoTime();
                arrived.start(t0);
                long nacks = nackUntil(c, arrived, deadline());
                r.put("completed", arrived.complete());
                r.put("seconds", arrived.seconds());
                r.put("moves_per_s", n / arrived.seconds());
                // the client's policy acks the moved message after its DLQ send: let those acks land
                long settle = System.nanoTime() + 60_000_000_000L;
                while (admin.backlog(topic, SUB) != 0 && System.nanoTime() < settle) {
                    nacks += nackUntil(c, null, System.nanoTime() + 200_000_000L);
                }
                r.put("nacks", nacks);
                r.put("source_backlog", admin.backlog(topic, SUB));
            }
        }
        int[] copies = new int[n];
        long total = 0;
        try (Reader<byte[]> reader = client.newReader().topic(dlq).startMessageId(MessageId.earliest).create()) {
            while (reader.hasMessageAvailable()) {
                Message<byte[]> m = reader.readNext(10, SECONDS);
                if (m == null) {
                    break;
                }
                total++;
                copies[index(m)]++;
            }
        }
        long distinct = Arrays.stream(copies).filter(x -> x > 0).count();
        r.put("dlq_total", total);
        r.put("dlq_distinct", distinct);
        r.put("exact", total == n && distinct == n && Long.valueOf(0).equals(r.get("source_backlog")));
        return r;
    }

    private static long nackUntil(Consumer<byte[]> c, Arrivals arrived, long end) throws Exception {
        long nacks = 0;
        while ((arrived == null || !arrived.complete()) && System.nanoTime() < end) {
            Message<byte[]> m = c.receive(100, MILLISECONDS);
            if (m != null) {
                c.negativeAcknowledge(m);
                nacks++;
            }
        }
        return nacks;
    }

    /** The dead letters of `topic` (its deadletter phase) back to `topic`: the clock runs from the
     *  redrive's start until the source subscription's consumer has received each of the n again. */
    Map<String, Object> redrive(String topic) throws Exception {
        int n = o.messages();
        String dlq = topic + "-" + SUB + "-DLQ";
        Map<String, Object> r = new LinkedHashMap<>();
        try (Arrivals back = new Arrivals(client, topic, SUB, n)) {
            long t0 = System.nanoTime();
            back.start(t0);
            if (o.clientRedrive()) {
                republish(dlq, topic, back);
            } else {
                Admin.Answer a = new Admin(o.adminUrl()).post(Admin.path(dlq) + "/letterbox/redrive", "{}",
                        o.timeoutS());
                r.put("redrive_call_s", since(t0));
                r.put("redrive_status", a.status());
                r.put("redrive_moved", Admin.number(a.body(), "moved"));
            }
            back.await(deadline());
            r.put("completed", back.complete());
            r.put("seconds", back.seconds());
            r.put("redrive_per_s", n / back.seconds());
            back.settle(new Admin(o.adminUrl()), topic);
            r.put("source_received", back.total());
            r.put("source_distinct", back.distinct());
        }
        return r;
    }

    /** What Pulsar users do: a consumer on the DLQ that republishes each message to the source topic
     *  (payload, key and properties) with a default producer, and acks it once the send is confirmed. */
    private void republish(String dlq, String topic, Arrivals back) throws Exception {
        try (Consumer<byte[]> d = client.newConsumer().topic(dlq).subscriptionName("redrive")
                .subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).receiverQueueSize(1000).subscribe();
             Producer<byte[]> p = client.newProducer().topic(topic).blockIfQueueFull(true).create()) {
            long end = deadline();
            while (!back.complete() && System.nanoTime() < end) {
                Message<byte[]> m = d.receive(100, MILLISECONDS);
                if (m == null) {
                    continue;
                }
                TypedMessageBuilder<byte[]> out = p.newMessage().value(m.getData()).properties(m.getProperties());
                if (m.hasKey()) {
                    out.key(m.getKey());
                }
                out.sendAsync().thenAccept(id -> d.acknowledgeAsync(m));
            }
            p.flush();
        }
    }
}
