package letterbox.conformance;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.transaction.Transaction;

/** Features letterbox may not have: they must fail cleanly and in bounded time. */
final class UnsupportedScenarios {
    private UnsupportedScenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("transaction_client", UnsupportedScenarios::transactions);
        m.put("pattern_subscription", UnsupportedScenarios::pattern);
    }

    /** enableTransaction(true): does the client build, does newTransaction work, does a txn produce commit. */
    static Object transactions(Ctx c) throws Exception {
        Map<String, Object> rec = new LinkedHashMap<>();
        CompletableFuture<PulsarClient> built = CompletableFuture.supplyAsync(() -> {
            try {
                return PulsarClient.builder().serviceUrl(c.serviceUrl).enableTransaction(true)
                        .operationTimeout(8, TimeUnit.SECONDS).connectionTimeout(5, TimeUnit.SECONDS)
                        .statsInterval(0, TimeUnit.SECONDS).build();
            } catch (Exception e) {
                throw new java.util.concurrent.CompletionException(e);
            }
        });
        PulsarClient client;
        try {
            client = c.track(built.get(20, TimeUnit.SECONDS));
            rec.put("build", "ok");
        } catch (TimeoutException e) {
            rec.put("build", "timeout");
            built.thenAccept(cl -> cl.closeAsync());
            return rec;
        } catch (Exception e) {
            rec.put("build", Ctx.errType(e));
            rec.put("build_causes", causes(e));
            return rec;
        }
        Transaction txn;
        try {
            txn = client.newTransaction().withTransactionTimeout(30, TimeUnit.SECONDS).build()
                    .get(12, TimeUnit.SECONDS);
            rec.put("new_transaction", "ok");
        } catch (TimeoutException e) {
            rec.put("new_transaction", "timeout");
            return rec;
        } catch (Exception e) {
            rec.put("new_transaction", Ctx.errType(e));
            rec.put("new_transaction_causes", causes(e));
            return rec;
        }
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("txn-sub").subscribe();
        Producer<byte[]> p = client.newProducer().topic(topic).sendTimeout(0, TimeUnit.SECONDS).create();
        try {
            p.newMessage(txn).value(Ctx.bytes("m0")).sendAsync().get(10, TimeUnit.SECONDS);
            rec.put("txn_send", "ok");
            Message<byte[]> before = Ctx.recv(cons, 1000);
            rec.put("visible_before_commit", before == null ? null : Ctx.text(before));
            txn.commit().get(10, TimeUnit.SECONDS);
            rec.put("commit", "ok");
            Message<byte[]> after = Ctx.recv(cons, 5000);
            rec.put("visible_after_commit", after == null ? null : Ctx.text(after));
        } catch (TimeoutException e) {
            rec.put("txn_error", "timeout");
        } catch (Exception e) {
            rec.put("txn_error", Ctx.errType(e));
        }
        return rec;
    }

    /** The type names of an exception's causes, outermost first (future wrappers left out). */
    static List<String> causes(Throwable t) {
        List<String> out = new ArrayList<>();
        for (Throwable cur = t; cur != null && out.size() < 6; cur = cur.getCause()) {
            if (!(cur instanceof java.util.concurrent.ExecutionException
                    || cur instanceof java.util.concurrent.CompletionException)) {
                out.add(cur.getClass().getSimpleName());
            }
            if (cur.getCause() == cur) {
                break;
            }
        }
        return out;
    }

    /** topicsPattern over PREFIX-pattern_subscription-pat-.*: existing topics, then one created later. */
    static Object pattern(Ctx c) throws Exception {
        PulsarClient client = c.client();
        Map<String, Object> rec = new LinkedHashMap<>();
        for (String s : List.of("a", "b")) {
            Producer<byte[]> p = c.producer(client, c.topic("pat-" + s));
            p.send(Ctx.bytes("m-" + s));
            p.close();
        }
        Pattern pat = Pattern.compile(c.topic("pat-") + ".*");
        Consumer<byte[]> cons;
        try {
            cons = client.newConsumer().topicsPattern(pat).subscriptionName("pat-sub")
                    .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                    .patternAutoDiscoveryPeriod(1, TimeUnit.SECONDS)
                    .subscribeAsync().get(15, TimeUnit.SECONDS);
            rec.put("subscribe", "ok");
        } catch (TimeoutException e) {
            rec.put("subscribe", "timeout");
            return rec;
        } catch (Exception e) {
            rec.put("subscribe", Ctx.errType(e));
            return rec;
        }
        List<String> got = new ArrayList<>();
        for (Message<byte[]> m : Ctx.drain(cons, 3000, 10)) {
            got.add(Ctx.text(m) + "@" + c.norm(m.getTopicName()));
            cons.acknowledge(m);
        }
        Collections.sort(got);
        rec.put("existing", got);
        Producer<byte[]> pc = c.producer(client, c.topic("pat-c"));
        pc.send(Ctx.bytes("m-c"));
        Message<byte[]> later = Ctx.recv(cons, 8000);
        rec.put("new_topic", later == null ? null : Ctx.text(later) + "@" + c.norm(later.getTopicName()));
        return rec;
    }
}
