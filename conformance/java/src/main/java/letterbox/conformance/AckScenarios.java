package letterbox.conformance;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.impl.MultiplierRedeliveryBackoff;

/** Ack timeout, cumulative acks, batch-index acks. */
final class AckScenarios {
    private AckScenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("ack_timeout_redelivery", AckScenarios::ackTimeout);
        m.put("ack_timeout_backoff", AckScenarios::ackTimeoutBackoff);
        m.put("cumulative_ack_exclusive", AckScenarios::cumulativeExclusive);
        m.put("cumulative_ack_shared_error", AckScenarios::cumulativeShared);
        m.put("batch_index_ack_restart", AckScenarios::batchIndexAck);
        m.put("batch_nack_one_of_batch", AckScenarios::batchNackOne);
    }

    /** ackTimeout 1 s: the unacked one of two comes back with redelivery count 1. */
    static Object ackTimeout(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("at-sub")
                .subscriptionType(SubscriptionType.Shared)
                .ackTimeout(1, TimeUnit.SECONDS).ackTimeoutTickTime(200, TimeUnit.MILLISECONDS)
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.send(Ctx.bytes("m0"));
        p.send(Ctx.bytes("m1"));
        List<Object> seen = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (m == null) {
                seen.add(null);
                break;
            }
            seen.add(List.of(Ctx.text(m), m.getRedeliveryCount()));
            if (!(Ctx.text(m).equals("m1") && m.getRedeliveryCount() == 0)) {
                cons.acknowledge(m);
            }
        }
        Message<byte[]> extra = Ctx.recv(cons, 2000);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("deliveries", seen);
        rec.put("after_ack", extra == null ? null : Ctx.text(extra));
        return rec;
    }

    /** ackTimeout 1 s + ackTimeoutRedeliveryBackoff 500 ms x2: redelivered twice, not before 1 s each. */
    static Object ackTimeoutBackoff(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("at-sub")
                .subscriptionType(SubscriptionType.Shared)
                .ackTimeout(1, TimeUnit.SECONDS)
                .ackTimeoutRedeliveryBackoff(MultiplierRedeliveryBackoff.builder()
                        .minDelayMs(500).maxDelayMs(1000).multiplier(2).build())
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.send(Ctx.bytes("m0"));
        List<Object> seen = new ArrayList<>();
        long last = 0;
        for (int i = 0; i < 3; i++) {
            Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (m == null) {
                seen.add(null);
                break;
            }
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("value", Ctx.text(m));
            r.put("redelivery", m.getRedeliveryCount());
            if (i > 0) {
                r.put("not_before_900ms", System.nanoTime() - last >= 900_000_000L);
            }
            last = System.nanoTime();
            seen.add(r);
            if (i == 2) {
                cons.acknowledge(m);
            }
        }
        return seen;
    }

    /** Exclusive: acknowledgeCumulative(m2) of m0..m4, reconnect: only m3, m4 come back. */
    static Object cumulativeExclusive(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("cum-sub")
                .subscriptionType(SubscriptionType.Exclusive)
                .acknowledgmentGroupTime(0, TimeUnit.MILLISECONDS).subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        for (int i = 0; i < 5; i++) {
            p.send(Ctx.bytes("m" + i));
        }
        List<Message<byte[]>> got = Ctx.drain(cons, 2000, 5);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("first", Ctx.texts(got));
        if (got.size() >= 3) {
            cons.acknowledgeCumulativeAsync(got.get(2)).get(10, TimeUnit.SECONDS);
        }
        cons.close();
        Consumer<byte[]> again = client.newConsumer().topic(topic).subscriptionName("cum-sub")
                .subscriptionType(SubscriptionType.Exclusive).subscribe();
        rec.put("after_reconnect", Ctx.texts(Ctx.drain(again, 2000, 10)));
        return rec;
    }

    /** acknowledgeCumulative on Shared is refused by the client. */
    static Object cumulativeShared(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("cum-sub")
                .subscriptionType(SubscriptionType.Shared).subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.send(Ctx.bytes("m0"));
        Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("received", m == null ? null : Ctx.text(m));
        if (m == null) {
            return rec;
        }
        try {
            cons.acknowledgeCumulative(m);
            rec.put("cumulative", "ok");
        } catch (Exception e) {
            rec.put("cumulative", Ctx.errType(e));
        }
        cons.acknowledge(m);
        return rec;
    }

    private static Producer<byte[]> batchProducer(PulsarClient client, String topic) throws Exception {
        return client.newProducer().topic(topic).enableBatching(true)
                .batchingMaxMessages(100).batchingMaxPublishDelay(1, TimeUnit.SECONDS)
                .sendTimeout(10, TimeUnit.SECONDS).create();
    }

    private static void sendBatch(Producer<byte[]> p, int n) throws Exception {
        List<CompletableFuture<?>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            fs.add(p.sendAsync(Ctx.bytes("m" + i)));
        }
        p.flush();
        CompletableFuture.allOf(fs.toArray(new CompletableFuture[0])).get(10, TimeUnit.SECONDS);
    }

    private static Consumer<byte[]> batchConsumer(PulsarClient client, String topic) throws Exception {
        return client.newConsumer().topic(topic).subscriptionName("bi-sub")
                .subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableBatchIndexAcknowledgment(true)
                .acknowledgmentGroupTime(0, TimeUnit.MILLISECONDS)
                .negativeAckRedeliveryDelay(300, TimeUnit.MILLISECONDS)
                .subscribe();
    }

    private static List<Object> batchView(List<Message<byte[]>> ms) {
        List<Object> out = new ArrayList<>();
        for (Message<byte[]> m : ms) {
            int size = m.getMessageId() instanceof MessageIdAdv a ? a.getBatchSize() : -1;
            out.add(List.of(Ctx.text(m), size));
        }
        return out;
    }

    /** One batch of five; ack m0, m2, m4 by batch index; a new consumer gets only m1, m3. */
    static Object batchIndexAck(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = batchConsumer(client, topic);
        sendBatch(batchProducer(client, topic), 5);
        List<Message<byte[]>> got = Ctx.drain(cons, 2000, 5);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("first", batchView(got));
        for (Message<byte[]> m : got) {
            int i = Integer.parseInt(Ctx.text(m).substring(1));
            if (i % 2 == 0) {
                cons.acknowledgeAsync(m).get(10, TimeUnit.SECONDS);
            }
        }
        cons.close();
        Consumer<byte[]> again = batchConsumer(client, topic);
        rec.put("after_restart", Ctx.texts(Ctx.drain(again, 2000, 10)));
        return rec;
    }

    /** One batch of three; ack m0, m2, nack m1: what is redelivered. */
    static Object batchNackOne(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = batchConsumer(client, topic);
        sendBatch(batchProducer(client, topic), 3);
        List<Message<byte[]>> got = Ctx.drain(cons, 2000, 3);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("first", batchView(got));
        for (Message<byte[]> m : got) {
            if (Ctx.text(m).equals("m1")) {
                cons.negativeAcknowledge(m);
            } else {
                cons.acknowledgeAsync(m).get(10, TimeUnit.SECONDS);
            }
        }
        List<Object> again = new ArrayList<>();
        for (Message<byte[]> m : Ctx.drain(cons, 2000, 10)) {
            again.add(List.of(Ctx.text(m), m.getRedeliveryCount()));
            cons.acknowledge(m);
        }
        rec.put("redelivered", again);
        return rec;
    }
}
