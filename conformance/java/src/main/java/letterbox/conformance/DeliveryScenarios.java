package letterbox.conformance;

import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/** Delayed delivery (deliverAfter / deliverAt) and chunking. */
final class DeliveryScenarios {
    private DeliveryScenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("deliver_after_shared", c -> delayed(c, SubscriptionType.Shared, false));
        m.put("deliver_at_shared", c -> delayed(c, SubscriptionType.Shared, true));
        m.put("deliver_after_exclusive", c -> delayed(c, SubscriptionType.Exclusive, false));
        m.put("chunking_6mb", DeliveryScenarios::chunking);
        m.put("oversize_without_chunking", DeliveryScenarios::oversize);
    }

    /**
     * m0 delayed 3 s, m1 not: the arrival order, and whether m0 was held at least 1.5 s (Pulsar may
     * deliver up to one delayedDeliveryTickTimeMillis, 1 s, early).
     */
    static Object delayed(Ctx c, SubscriptionType type, boolean at) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("delay-sub")
                .subscriptionType(type).subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        long sent = System.nanoTime();
        if (at) {
            p.newMessage().value(Ctx.bytes("m0")).deliverAt(System.currentTimeMillis() + 3000).send();
        } else {
            p.newMessage().value(Ctx.bytes("m0")).deliverAfter(3, TimeUnit.SECONDS).send();
        }
        p.send(Ctx.bytes("m1"));
        Map<String, Object> rec = new LinkedHashMap<>();
        java.util.List<String> order = new java.util.ArrayList<>();
        Boolean held = null;
        for (int i = 0; i < 2; i++) {
            Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (m == null) {
                order.add(null);
                break;
            }
            order.add(Ctx.text(m));
            if (Ctx.text(m).equals("m0")) {
                held = System.nanoTime() - sent >= 1_500_000_000L;
            }
            cons.acknowledge(m);
        }
        rec.put("order", order);
        rec.put("m0_held_1500ms", held);
        return rec;
    }

    private static byte[] payload(int size) {
        byte[] b = new byte[size];
        new Random(42).nextBytes(b);
        return b;
    }

    private static String sha256(byte[] b) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    /**
     * A 6 MiB message with enableChunking (1 MiB chunks): received whole. The chunk size is set
     * explicitly: chunks of the broker's full maxMessageSize (5 MiB) make bookie frames a few bytes over
     * a standalone bookie's default 5 MiB netty frame limit, and the reference then retries that write
     * forever (TooLongFrameException, every topic on the bookie channel stalls).
     */
    static Object chunking(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("chunk-sub")
                .subscriptionType(SubscriptionType.Exclusive).subscribe();
        Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(false).enableChunking(true)
                .chunkMaxMessageSize(1024 * 1024)
                .sendTimeout(20, TimeUnit.SECONDS).create();
        byte[] data = payload(6 * 1024 * 1024);
        p.newMessage().key("big").value(data).send();
        p.send(Ctx.bytes("small"));
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("sent_length", data.length);
        rec.put("sent_sha256", sha256(data));
        Message<byte[]> m = Ctx.recv(cons, 15_000);
        if (m == null) {
            rec.put("received", null);
            return rec;
        }
        rec.put("received_length", m.getData().length);
        rec.put("received_sha256", sha256(m.getData()));
        rec.put("key", m.getKey());
        rec.put("id_type", m.getMessageId().getClass().getSimpleName());
        cons.acknowledge(m);
        Message<byte[]> next = Ctx.recv(cons, Ctx.RECEIVE_MS);
        rec.put("next", next == null ? null : Ctx.text(next));
        return rec;
    }

    /** A 6 MiB message without chunking is refused. */
    static Object oversize(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("big-sub").subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        Map<String, Object> rec = new LinkedHashMap<>();
        try {
            p.sendAsync(payload(6 * 1024 * 1024)).get(15, TimeUnit.SECONDS);
            rec.put("send", "ok");
        } catch (Exception e) {
            rec.put("send", Ctx.errType(e));
        }
        p.send(Ctx.bytes("small"));
        Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
        rec.put("received", m == null ? null : List.of(m.getData().length > 100 ? "big" : Ctx.text(m)));
        return rec;
    }
}
