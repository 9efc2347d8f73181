package letterbox.conformance;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/**
 * letterbox's failure events topic read with the Java client. These scenarios use letterbox's
 * extensions, so they run against letterbox only: {@code --only failure_events} runs them,
 * {@code --list} does not name them (the differential harness never runs them on Pulsar).
 */
final class FailureEventScenarios {
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    private FailureEventScenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("failure_events", FailureEventScenarios::failureEvents);
    }

    /**
     * The namespace opts in; a consumer on the events topic sees the events of one message nacked
     * with a reason (announced through the admin API), dead-lettered after its second nack, then
     * redriven: nack, dead-letter, redrive in that order (the second nack is an event of its own
     * when the client's redelivery request comes before the dead-lettering).
     */
    static Object failureEvents(Ctx c) throws Exception {
        String[] parts = c.prefix.replace("persistent://", "").split("/");
        String ns = parts[0] + "/" + parts[1];
        expect(post(c, "/admin/v2/namespaces/" + ns + "/letterbox/failureEvents", "{\"enabled\": true}"), 204,
                "enable failure events");
        PulsarClient client = c.client();
        Consumer<byte[]> watch = client.newConsumer().topic("persistent://" + ns + "/__letterbox_failure_events")
                .subscriptionName("watch-" + c.name).subscriptionInitialPosition(SubscriptionInitialPosition.Latest)
                .subscribe();
        String topic = c.topic("");
        Consumer<byte[]> cons = client.newConsumer().topic(topic).subscriptionName("S")
                .subscriptionType(SubscriptionType.Shared)
                .negativeAckRedeliveryDelay(100, TimeUnit.MILLISECONDS)
                .property("letterbox.dlq.max_redeliveries", "1")
                .subscribe();
        Producer<byte[]> p = c.producer(client, topic);
        p.send(Ctx.bytes("m0"));
        for (int attempt = 1; attempt <= 2; attempt++) {
            Message<byte[]> m = Ctx.recv(cons, Ctx.RECEIVE_MS);
            if (m == null) {
                throw new IllegalStateException("delivery " + attempt + " did not come");
            }
            MessageIdAdv id = (MessageIdAdv) m.getMessageId();
            String path = Ctx.adminTopicPath(topic) + "/subscription/S/letterbox/attempts/"
                    + id.getLedgerId() + ":" + id.getEntryId();
            expect(post(c, path, "{\"ending\": \"nack\", \"reason\": \"db down (attempt " + attempt + ")\"}"), 200,
                    "announce the nack");
            cons.negativeAcknowledge(m);
        }
        String dlq = Ctx.adminTopicPath(topic + "-S-DLQ");
        long deadline = System.currentTimeMillis() + Ctx.RECEIVE_MS;
        while (true) {
            String[] r = c.adminGet(dlq + "/letterbox/deadLetters");
            if (r[0].equals("200") && r[1].contains("messageId")) {
                break;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("no dead letter in " + topic + "-S-DLQ");
            }
            Ctx.sleep(50);
        }
        expect(post(c, dlq + "/letterbox/redrive", "{}"), 200, "redrive");
        List<Object> events = new ArrayList<>();
        String last = "";
        while (events.size() < 6 && !last.equals("redrive")) {
            Message<byte[]> m = Ctx.recv(watch, Ctx.RECEIVE_MS);
            if (m == null) {
                throw new IllegalStateException("failure event " + (events.size() + 1) + " did not come");
            }
            watch.acknowledge(m);
            String json = Ctx.text(m);
            if (!topic.equals(field(json, "topic"))) {
                continue; // another scenario's
            }
            Map<String, Object> ev = new LinkedHashMap<>();
            last = field(json, "type");
            ev.put("type", last);
            ev.put("topic", c.norm(field(json, "topic")));
            ev.put("subscription", field(json, "subscription"));
            ev.put("reason", field(json, "reason"));
            events.add(ev);
        }
        return events;
    }

    /** A string field of an event's compact JSON (null when absent or not a string). */
    static String field(String json, String name) {
        Matcher m = Pattern.compile("\"" + name + "\":\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(json);
        return m.find() ? m.group(1).replace("\\\"", "\"").replace("\\\\", "\\") : null;
    }

    static int post(Ctx c, String path, String body) throws Exception {
        HttpRequest req = HttpRequest.newBuilder(URI.create(c.adminUrl + path))
                .timeout(Duration.ofSeconds(10)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build();
        return HTTP.send(req, HttpResponse.BodyHandlers.ofString()).statusCode();
    }

    static void expect(int status, int wanted, String what) {
        if (status != wanted) {
            throw new IllegalStateException(what + ": HTTP " + status);
        }
    }
}
