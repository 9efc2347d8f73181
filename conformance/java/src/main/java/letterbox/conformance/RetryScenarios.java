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

/** enableRetry + reconsumeLater: retry letter topic, its properties, the DLQ after maxRedeliverCount. */
final class RetryScenarios {
    private RetryScenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("retry_reconsume_later_to_dlq", RetryScenarios::reconsumeLaterToDlq);
        m.put("retry_custom_properties", RetryScenarios::customProperties);
        m.put("retry_explicit_topics_initial_sub", RetryScenarios::explicitTopics);
        m.put("retry_exclusive_delay", RetryScenarios::retryExclusive);
    }

    private static Consumer<byte[]> earliest(PulsarClient client, String topic, String sub) throws Exception {
        return client.newConsumer().topic(topic).subscriptionName(sub)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
    }

    /** Deliveries of one message through reconsumeLater(1 s) until it lands in the DLQ. */
    private static List<Object> retryLoop(Ctx c, Consumer<byte[]> cons, int deliveries) throws Exception {
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < deliveries; i++) {
            Message<byte[]> msg = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (msg == null) {
                out.add(null);
                break;
            }
            // no timing fact here: Pulsar's delayed delivery (tick 1 s, non-strict) may hand a 1 s
            // retry over up to one tick early, so "not before" does not hold on the reference
            out.add(c.msg(msg));
            cons.reconsumeLater(msg, 1, TimeUnit.SECONDS);
        }
        return out;
    }

    /** The namespace of a topic: persistent://tenant/ns/x -> persistent://tenant/ns/ */
    private static String namespaceOf(String topic) {
        return topic.substring(0, topic.lastIndexOf('/') + 1);
    }

    /**
     * Default names: retry <topic>-<sub>-RETRY, DLQ <topic>-<sub>-DLQ; maxRedeliverCount 2.
     * The client falls back to the pre-2.8 names <sub>-RETRY / <sub>-DLQ when it believes those exist,
     * so the DLQ is watched under both names and the record says where the message ended.
     */
    static Object reconsumeLaterToDlq(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        String sub = c.sub("rs");
        String ns = namespaceOf(topic);
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName(sub)
                .subscriptionType(SubscriptionType.Shared)
                .consumerName("c1")
                .enableRetry(true)
                .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2).build())
                .subscribe();
        // watched only now: the subscribe above decides between the two names by whether the old
        // ones exist, and a watcher created before it would create <sub>-DLQ and tip the choice
        Consumer<byte[]> dlq = client.newConsumer()
                .topics(List.of(topic + "-" + sub + "-DLQ", ns + sub + "-DLQ"))
                .subscriptionName("dlq-watch")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.newMessage().key("k0").property("orig", "yes").value(Ctx.bytes("m0")).send();

        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("deliveries", retryLoop(c, cons, 3));
        Message<byte[]> dead = Ctx.recv(dlq, Ctx.RECEIVE_MS);
        rec.put("dlq", dead == null ? null : c.msg(dead));
        if (dead != null) {
            rec.put("dlq_producer", c.producerName(dead.getProducerName()));
            dlq.acknowledge(dead);
        }
        Message<byte[]> extra = Ctx.recv(cons, 2000);
        rec.put("after_dlq", extra == null ? null : c.msg(extra));
        Map<String, Object> subs = new LinkedHashMap<>();
        subs.put("<topic>-<sub>-RETRY", c.subscriptions(topic + "-" + sub + "-RETRY"));
        subs.put("<sub>-RETRY", c.subscriptions(ns + sub + "-RETRY"));
        rec.put("retry_topic_subscriptions", subs);
        return rec;
    }

    /** reconsumeLater(msg, customProperties, 1, SECONDS): the custom properties come back with the retry. */
    static Object customProperties(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        String sub = c.sub("rs");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName(sub)
                .subscriptionType(SubscriptionType.Shared)
                .enableRetry(true)
                .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(3).build())
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.newMessage().key("k1").orderingKey(Ctx.bytes("ok-1")).eventTime(1_700_000_000_000L)
                .property("orig", "yes").value(Ctx.bytes("m0")).send();

        Map<String, Object> rec = new LinkedHashMap<>();
        Message<byte[]> first = Ctx.recv(cons, Ctx.RECEIVE_MS);
        rec.put("first", first == null ? null : c.msg(first));
        if (first == null) {
            return rec;
        }
        Map<String, String> custom = new LinkedHashMap<>();
        custom.put("custom-key-1", "custom-value-1");
        custom.put("custom-key-2", "custom-value-2");
        cons.reconsumeLater(first, custom, 1, TimeUnit.SECONDS);
        Message<byte[]> again = Ctx.recv(cons, Ctx.RECEIVE_MS);
        rec.put("retried", again == null ? null : c.msg(again));
        if (again != null) {
            cons.acknowledge(again);
        }
        Message<byte[]> extra = Ctx.recv(cons, 2000);
        rec.put("after_ack", extra == null ? null : c.msg(extra));
        return rec;
    }

    /** Explicit retryLetterTopic / deadLetterTopic and initialSubscriptionName on the DLQ. */
    static Object explicitTopics(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        String retry = c.topic("my-retry");
        String dead = c.topic("my-dlq");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("retry-sub")
                .subscriptionType(SubscriptionType.Shared)
                .enableRetry(true)
                .deadLetterPolicy(DeadLetterPolicy.builder()
                        .maxRedeliverCount(1)
                        .retryLetterTopic(retry)
                        .deadLetterTopic(dead)
                        .initialSubscriptionName("init-sub")
                        .build())
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.newMessage().key("k2").property("orig", "yes").value(Ctx.bytes("m0")).send();

        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("deliveries", retryLoop(c, cons, 2));
        // the DLQ producer is created on the first dead letter: give the client a moment
        Object subs = null;
        for (int i = 0; i < 20; i++) {
            subs = c.subscriptions(dead);
            if (subs instanceof List<?> l && l.contains("init-sub")) {
                break;
            }
            Ctx.sleep(250);
        }
        rec.put("dlq_subscriptions", subs);
        rec.put("retry_subscriptions", c.subscriptions(retry));
        Consumer<byte[]> init = client.newConsumer().topic(dead).subscriptionName("init-sub")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Latest).subscribe();
        Message<byte[]> held = Ctx.recv(init, Ctx.RECEIVE_MS);
        rec.put("dlq_held_by_init_sub", held == null ? null : c.msg(held));
        if (held != null) {
            init.acknowledge(held);
        }
        Message<byte[]> extra = Ctx.recv(cons, 1500);
        rec.put("after_dlq", extra == null ? null : c.msg(extra));
        return rec;
    }

    /** enableRetry on Exclusive, reconsumeLater(3 s): whether the retry is held (delayed delivery is Shared-only in Pulsar). */
    static Object retryExclusive(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName(c.sub("rx"))
                .subscriptionType(SubscriptionType.Exclusive)
                .enableRetry(true)
                .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(3).build())
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.newMessage().value(Ctx.bytes("m0")).send();
        Map<String, Object> rec = new LinkedHashMap<>();
        Message<byte[]> first = Ctx.recv(cons, Ctx.RECEIVE_MS);
        rec.put("first", first == null ? null : Ctx.text(first));
        if (first == null) {
            return rec;
        }
        long at = System.nanoTime();
        cons.reconsumeLater(first, 3, TimeUnit.SECONDS);
        Message<byte[]> again = Ctx.recv(cons, Ctx.RECEIVE_MS);
        rec.put("retried", again == null ? null : Ctx.text(again));
        if (again != null) {
            rec.put("reconsumetimes", again.getProperty("RECONSUMETIMES"));
            rec.put("held_1500ms", System.nanoTime() - at >= 1_500_000_000L);
            cons.acknowledge(again);
        }
        return rec;
    }
}
