package letterbox.conformance;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.impl.MultiplierRedeliveryBackoff;

/** negativeAcknowledge: redelivery counts, backoff, the DLQ after maxRedeliverCount. */
final class NackScenarios {
    private NackScenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("nack_redelivery_count_shared", c -> nackCounts(c, SubscriptionType.Shared));
        m.put("nack_redelivery_count_exclusive", c -> nackCounts(c, SubscriptionType.Exclusive));
        m.put("nack_backoff_multiplier", NackScenarios::nackBackoff);
        m.put("nack_dlq_shared", NackScenarios::nackDlq);
        m.put("nack_dlq_exclusive", NackScenarios::nackDlqExclusive);
        m.put("nack_count_across_reconnect", NackScenarios::countAcrossReconnect);
        m.put("ack_timeout_dlq", NackScenarios::ackTimeoutDlq);
    }

    /** One message nacked three times then acked: the redelivery count of each delivery. */
    static Object nackCounts(Ctx c, SubscriptionType type) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("nack-sub")
                .subscriptionType(type)
                .negativeAckRedeliveryDelay(300, TimeUnit.MILLISECONDS)
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.newMessage().key("k0").value(Ctx.bytes("m0")).send();
        List<Object> seen = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (m == null) {
                seen.add(null);
                break;
            }
            seen.add(List.of(Ctx.text(m), m.getRedeliveryCount()));
            if (i < 3) {
                cons.negativeAcknowledge(m);
            } else {
                cons.acknowledge(m);
            }
        }
        Message<byte[]> extra = Ctx.recv(cons, 1500);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("deliveries", seen);
        rec.put("after_ack", extra == null ? null : Ctx.text(extra));
        return rec;
    }

    /** MultiplierRedeliveryBackoff 500 ms x2 (cap 2 s): redelivered, and not before half the backoff. */
    static Object nackBackoff(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        long[] backoffMs = {500, 1000, 2000};
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("nack-sub")
                .subscriptionType(SubscriptionType.Shared)
                .negativeAckRedeliveryBackoff(MultiplierRedeliveryBackoff.builder()
                        .minDelayMs(500).maxDelayMs(2000).multiplier(2).build())
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.newMessage().value(Ctx.bytes("m0")).send();
        List<Object> seen = new ArrayList<>();
        long nackedAt = 0;
        for (int i = 0; i < 4; i++) {
            Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (m == null) {
                seen.add(null);
                break;
            }
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("value", Ctx.text(m));
            r.put("redelivery", m.getRedeliveryCount());
            if (i > 0) {
                long waited = (System.nanoTime() - nackedAt) / 1_000_000;
                r.put("not_before_ms", backoffMs[i - 1] / 2);
                r.put("held", waited >= backoffMs[i - 1] / 2);
            }
            seen.add(r);
            if (i < 3) {
                nackedAt = System.nanoTime();
                cons.negativeAcknowledge(m);
            } else {
                cons.acknowledge(m);
            }
        }
        return seen;
    }

    /** Shared, maxRedeliverCount 2: deliveries 0,1,2 then the DLQ, keeping key and properties. */
    static Object nackDlq(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        String sub = "nack-sub";
        Consumer<byte[]> dlq = client.newConsumer().topic(topic + "-" + sub + "-DLQ")
                .subscriptionName("dlq-watch")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName(sub)
                .subscriptionType(SubscriptionType.Shared)
                .consumerName("c1")
                .negativeAckRedeliveryDelay(300, TimeUnit.MILLISECONDS)
                .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2).build())
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.newMessage().key("k-dlq").orderingKey(Ctx.bytes("ok-dlq")).eventTime(1_700_000_000_000L)
                .property("p1", "v1").value(Ctx.bytes("m0")).send();
        p.newMessage().key("k-ok").value(Ctx.bytes("m1")).send();
        List<Object> seen = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            Message<byte[]> m = Ctx.recv(cons, 3000);
            if (m == null) {
                break;
            }
            seen.add(List.of(Ctx.text(m), m.getRedeliveryCount()));
            if (Ctx.text(m).equals("m1")) {
                cons.acknowledge(m);
            } else {
                cons.negativeAcknowledge(m);
            }
        }
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("deliveries", seen);
        Message<byte[]> dead = Ctx.recv(dlq, Ctx.RECEIVE_MS);
        rec.put("dlq", dead == null ? null : c.msg(dead));
        if (dead != null) {
            rec.put("dlq_producer", c.producerName(dead.getProducerName()));
            dlq.acknowledge(dead);
        }
        Message<byte[]> more = Ctx.recv(dlq, 1000);
        rec.put("dlq_more", more == null ? null : Ctx.text(more));
        return rec;
    }

    /** Exclusive, maxRedeliverCount 2: five nacks of one message, then an ack; what reaches the
     *  application and whether anything reaches the DLQ (the client has no DLQ path there). */
    static Object nackDlqExclusive(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        String sub = "nack-sub";
        Consumer<byte[]> dlq = client.newConsumer().topic(topic + "-" + sub + "-DLQ")
                .subscriptionName("dlq-watch")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName(sub)
                .subscriptionType(SubscriptionType.Exclusive)
                .negativeAckRedeliveryDelay(200, TimeUnit.MILLISECONDS)
                .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2).build())
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.send(Ctx.bytes("m0"));
        List<Object> seen = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (m == null) {
                seen.add(null);
                break;
            }
            seen.add(m.getRedeliveryCount());
            if (i < 5) {
                cons.negativeAcknowledge(m);
            } else {
                cons.acknowledge(m);
            }
        }
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("counts", seen);
        Message<byte[]> dead = Ctx.recv(dlq, 1500);
        rec.put("dlq", dead == null ? null : Ctx.text(dead));
        return rec;
    }

    /** Shared, nacked twice, then the only consumer closes and a new one subscribes: its redelivery count. */
    static Object countAcrossReconnect(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("nack-sub")
                .subscriptionType(SubscriptionType.Shared)
                .negativeAckRedeliveryDelay(300, TimeUnit.MILLISECONDS).subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.send(Ctx.bytes("m0"));
        List<Object> seen = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (m == null) {
                seen.add(null);
                break;
            }
            seen.add(m.getRedeliveryCount());
            if (i < 2) {
                cons.negativeAcknowledge(m);
            }
        }
        cons.close();
        Consumer<byte[]> again = client.newConsumer().topic(topic).subscriptionName("nack-sub")
                .subscriptionType(SubscriptionType.Shared).subscribe();
        Message<byte[]> m = Ctx.recv(again, Ctx.RECEIVE_MS);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("before_close", seen);
        rec.put("after_reconnect", m == null ? null : List.of(Ctx.text(m), m.getRedeliveryCount()));
        if (m != null) {
            again.acknowledge(m);
        }
        return rec;
    }

    /** Shared, ackTimeout 1 s, maxRedeliverCount 1: never acked, the message ends in the DLQ. */
    static Object ackTimeoutDlq(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        String sub = "at-sub";
        Consumer<byte[]> dlq = client.newConsumer().topic(topic + "-" + sub + "-DLQ")
                .subscriptionName("dlq-watch")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName(sub)
                .subscriptionType(SubscriptionType.Shared)
                .ackTimeout(1, TimeUnit.SECONDS).ackTimeoutTickTime(200, TimeUnit.MILLISECONDS)
                .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(1).build())
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.newMessage().key("k-at").property("p1", "v1").value(Ctx.bytes("m0")).send();
        List<Object> seen = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Message<byte[]> m = Ctx.recv(cons, 4000);
            if (m == null) {
                break;
            }
            seen.add(List.of(Ctx.text(m), m.getRedeliveryCount()));
        }
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("deliveries", seen);
        Message<byte[]> dead = Ctx.recv(dlq, Ctx.RECEIVE_MS);
        rec.put("dlq", dead == null ? null : c.msg(dead));
        return rec;
    }
}
