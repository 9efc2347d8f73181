package letterbox.conformance;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.ProducerAccessMode;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionType;

/** Subscription types and producer access modes. */
final class SubscriptionScenarios {
    private SubscriptionScenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("exclusive_second_consumer_busy", SubscriptionScenarios::exclusiveBusy);
        m.put("failover_switch_on_close", SubscriptionScenarios::failover);
        m.put("shared_two_consumers", SubscriptionScenarios::shared);
        m.put("key_shared_per_key_order", SubscriptionScenarios::keyShared);
        m.put("producer_access_modes", SubscriptionScenarios::accessModes);
    }

    private static Consumer<byte[]> consumer(PulsarClient client, String topic, SubscriptionType type,
                                             String name, int queue) throws Exception {
        return client.newConsumer().topic(topic).subscriptionName("sub").subscriptionType(type)
                .consumerName(name).receiverQueueSize(queue).subscribe();
    }

    static Object exclusiveBusy(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> first = consumer(client, topic, SubscriptionType.Exclusive, "c-a", 10);
        Map<String, Object> rec = new LinkedHashMap<>();
        try {
            consumer(client, topic, SubscriptionType.Exclusive, "c-b", 10).close();
            rec.put("second_exclusive", "ok");
        } catch (Exception e) {
            rec.put("second_exclusive", Ctx.errType(e));
        }
        try {
            consumer(client, topic, SubscriptionType.Shared, "c-c", 10).close();
            rec.put("second_shared", "ok");
        } catch (Exception e) {
            rec.put("second_shared", Ctx.errType(e));
        }
        first.close();
        try {
            consumer(client, topic, SubscriptionType.Exclusive, "c-d", 10).close();
            rec.put("after_close", "ok");
        } catch (Exception e) {
            rec.put("after_close", Ctx.errType(e));
        }
        return rec;
    }

    /** Failover: one active consumer gets everything; when it closes the other takes over. */
    static Object failover(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> a = consumer(client, topic, SubscriptionType.Failover, "c-a", 10);
        Consumer<byte[]> b = consumer(client, topic, SubscriptionType.Failover, "c-b", 10);
        Ctx.sleep(500);
        Producer<byte[]> p = c.producer(client, topic);
        for (int i = 0; i < 4; i++) {
            p.send(Ctx.bytes("m" + i));
        }
        Map<String, Object> rec = new LinkedHashMap<>();
        List<Message<byte[]>> ga = Ctx.drain(a, 1500, 10);
        List<Message<byte[]>> gb = Ctx.drain(b, 500, 10);
        for (Message<byte[]> m : ga) {
            a.acknowledge(m);
        }
        for (Message<byte[]> m : gb) {
            b.acknowledge(m);
        }
        List<String> ta = Ctx.texts(ga);
        List<String> tb = Ctx.texts(gb);
        rec.put("one_active", ta.isEmpty() != tb.isEmpty());
        List<String> all = new ArrayList<>(ta);
        all.addAll(tb);
        rec.put("first_phase", all);
        Consumer<byte[]> active = ta.isEmpty() ? b : a;
        Consumer<byte[]> standby = ta.isEmpty() ? a : b;
        active.close();
        for (int i = 4; i < 6; i++) {
            p.send(Ctx.bytes("m" + i));
        }
        rec.put("standby_after_close", Ctx.texts(Ctx.drain(standby, 3000, 10)));
        return rec;
    }

    /** Shared: two consumers together get every message once. */
    static Object shared(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> a = consumer(client, topic, SubscriptionType.Shared, "c-a", 1);
        Consumer<byte[]> b = consumer(client, topic, SubscriptionType.Shared, "c-b", 1);
        Producer<byte[]> p = c.producer(client, topic);
        for (int i = 0; i < 10; i++) {
            p.send(Ctx.bytes("m" + i));
        }
        List<String> all = new ArrayList<>();
        for (int round = 0; round < 30 && all.size() < 10; round++) {
            for (Consumer<byte[]> cons : List.of(a, b)) {
                Message<byte[]> m = Ctx.recv(cons, 300);
                if (m != null) {
                    all.add(Ctx.text(m));
                    cons.acknowledge(m);
                }
            }
        }
        Collections.sort(all);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("received_sorted", all);
        return rec;
    }

    /** Key_Shared: each key goes to one consumer, in order. */
    static Object keyShared(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> a = consumer(client, topic, SubscriptionType.Key_Shared, "c-a", 100);
        Consumer<byte[]> b = consumer(client, topic, SubscriptionType.Key_Shared, "c-b", 100);
        Producer<byte[]> p = c.producer(client, topic);
        String[] keys = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"};
        for (int i = 0; i < 24; i++) {
            p.newMessage().key(keys[i % keys.length]).value(Ctx.bytes("m" + i)).send();
        }
        Map<String, List<Integer>> perKey = new TreeMap<>();
        Map<String, String> owner = new TreeMap<>();
        Map<String, Boolean> singleOwner = new TreeMap<>();
        int total = 0;
        for (int round = 0; round < 40 && total < 24; round++) {
            for (Consumer<byte[]> cons : List.of(a, b)) {
                Message<byte[]> m = Ctx.recv(cons, 200);
                if (m == null) {
                    continue;
                }
                total++;
                String k = m.getKey();
                perKey.computeIfAbsent(k, x -> new ArrayList<>()).add(Integer.parseInt(Ctx.text(m).substring(1)));
                String prev = owner.putIfAbsent(k, cons.getConsumerName());
                singleOwner.merge(k, prev == null || prev.equals(cons.getConsumerName()), Boolean::logicalAnd);
                cons.acknowledge(m);
            }
        }
        Map<String, Object> rec = new LinkedHashMap<>();
        Map<String, Object> ordered = new TreeMap<>();
        for (Map.Entry<String, List<Integer>> e : perKey.entrySet()) {
            List<Integer> sorted = new ArrayList<>(e.getValue());
            Collections.sort(sorted);
            ordered.put(e.getKey(), sorted.equals(e.getValue()) ? e.getValue().size() : "out of order");
        }
        rec.put("in_order_count_per_key", ordered);
        rec.put("single_consumer_per_key", singleOwner);
        rec.put("total", total);
        return rec;
    }

    private static String tryProducer(PulsarClient client, String topic, ProducerAccessMode mode,
                                      List<Producer<byte[]>> keep) {
        try {
            Producer<byte[]> p = client.newProducer().topic(topic).accessMode(mode)
                    .enableBatching(false).sendTimeout(5, TimeUnit.SECONDS)
                    .createAsync().get(12, TimeUnit.SECONDS);
            keep.add(p);
            return "ok";
        } catch (Exception e) {
            return Ctx.errType(e);
        }
    }

    /** Exclusive producer, then Shared / Exclusive / WaitForExclusive / ExclusiveWithFencing. */
    static Object accessModes(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        List<Producer<byte[]>> keep = new ArrayList<>();
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("first_exclusive", tryProducer(client, topic, ProducerAccessMode.Exclusive, keep));
        rec.put("then_shared", tryProducer(client, topic, ProducerAccessMode.Shared, keep));
        rec.put("then_exclusive", tryProducer(client, topic, ProducerAccessMode.Exclusive, keep));
        if (keep.isEmpty()) {
            return rec;
        }
        Producer<byte[]> first = keep.get(0);
        CompletableFuture<Producer<byte[]>> waiting = client.newProducer().topic(topic)
                .accessMode(ProducerAccessMode.WaitForExclusive).enableBatching(false)
                .sendTimeout(5, TimeUnit.SECONDS).createAsync();
        Ctx.sleep(1500);
        rec.put("wait_for_exclusive_pending", !waiting.isDone());
        first.close();
        Producer<byte[]> waiter = null;
        try {
            waiter = waiting.get(10, TimeUnit.SECONDS);
            rec.put("wait_for_exclusive_after_close", "ok");
        } catch (Exception e) {
            rec.put("wait_for_exclusive_after_close", Ctx.errType(e));
        }
        rec.put("with_fencing", tryProducer(client, topic, ProducerAccessMode.ExclusiveWithFencing, keep));
        if (waiter != null) {
            try {
                waiter.sendAsync(Ctx.bytes("from-fenced")).get(10, TimeUnit.SECONDS);
                rec.put("fenced_send", "ok");
            } catch (java.util.concurrent.TimeoutException e) {
                rec.put("fenced_send", "no answer in 10s");
            } catch (Exception e) {
                rec.put("fenced_send", Ctx.errType(e));
            }
            waiter.closeAsync();
        }
        return rec;
    }
}
