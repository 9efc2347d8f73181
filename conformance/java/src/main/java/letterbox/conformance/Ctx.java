package letterbox.conformance;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;

/** What one scenario run needs: its topic names, clients it must close, normalisation, admin calls. */
final class Ctx implements AutoCloseable {
    static final int RECEIVE_MS = 10_000;
    private static final Pattern MESSAGE_ID = Pattern.compile("^-?\\d+:-?\\d+(:-?\\d+){0,2}$");
    private static final HttpClient HTTP = HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(5)).build();

    final String serviceUrl;
    final String adminUrl;
    final String prefix;
    final String name;
    private final String shortPrefix;
    private final List<AutoCloseable> opened = Collections.synchronizedList(new ArrayList<>());

    Ctx(String serviceUrl, String adminUrl, String prefix, String name) {
        this.serviceUrl = serviceUrl;
        this.adminUrl = adminUrl.replaceAll("/+$", "");
        this.prefix = prefix;
        this.name = name;
        int slash = prefix.lastIndexOf('/');
        this.shortPrefix = slash >= 0 ? prefix.substring(slash + 1) : prefix;
    }

    /** PREFIX-<scenario>[-suffix]. */
    String topic(String suffix) {
        return prefix + "-" + name + (suffix == null || suffix.isEmpty() ? "" : "-" + suffix);
    }

    PulsarClient client() throws PulsarClientException {
        return track(PulsarClient.builder()
                .serviceUrl(serviceUrl)
                .operationTimeout(10, TimeUnit.SECONDS)
                .connectionTimeout(5, TimeUnit.SECONDS)
                .statsInterval(0, TimeUnit.SECONDS)
                .build());
    }

    <T extends AutoCloseable> T track(T closeable) {
        opened.add(closeable);
        return closeable;
    }

    Producer<byte[]> producer(PulsarClient client, String topic) throws PulsarClientException {
        return client.newProducer().topic(topic).enableBatching(false)
                .sendTimeout(10, TimeUnit.SECONDS).create();
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String text(Message<?> m) {
        return new String(m.getData(), StandardCharsets.UTF_8);
    }

    /** Receive with a bound; null when nothing came. */
    static Message<byte[]> recv(Consumer<byte[]> c, int ms) throws PulsarClientException {
        return c.receive(ms, TimeUnit.MILLISECONDS);
    }

    /** Every message until none comes for quietMs (at most max messages). */
    static List<Message<byte[]>> drain(Consumer<byte[]> c, int quietMs, int max) throws PulsarClientException {
        List<Message<byte[]>> out = new ArrayList<>();
        while (out.size() < max) {
            Message<byte[]> m = recv(c, quietMs);
            if (m == null) {
                break;
            }
            out.add(m);
        }
        return out;
    }

    static List<String> texts(List<Message<byte[]>> ms) {
        List<String> out = new ArrayList<>();
        for (Message<byte[]> m : ms) {
            out.add(text(m));
        }
        return out;
    }

    /**
     * A subscription name unique to this run and scenario (it appears as {p}-scenario-tag in records):
     * the old retry/DLQ naming <sub>-RETRY is namespace-wide, so a fixed name would collide across runs.
     */
    String sub(String tag) {
        return shortPrefix + "-" + name + "-" + tag;
    }

    /** The DLQ producer name <topic>-<sub>-<consumer>-<5 random chars>-DLQ without its random part. */
    String producerName(String s) {
        if (s == null) {
            return null;
        }
        return norm(s).replaceAll("-[A-Za-z0-9]{5}-DLQ$", "-<rand>-DLQ");
    }

    /** A topic, producer or property value with the run's prefix replaced by {p}. */
    String norm(String s) {
        if (s == null) {
            return null;
        }
        return s.replace(prefix, "{p}").replace(shortPrefix, "{p}");
    }

    Object normValue(String v) {
        if (v != null && MESSAGE_ID.matcher(v).matches()) {
            return "<id>";
        }
        return norm(v);
    }

    Map<String, Object> props(Message<?> m) {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<String, String> e : m.getProperties().entrySet()) {
            out.put(e.getKey(), normValue(e.getValue()));
        }
        return out;
    }

    /** The comparable view of one delivery. */
    Map<String, Object> msg(Message<?> m) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("value", text(m));
        r.put("key", m.hasKey() ? m.getKey() : null);
        r.put("redelivery", m.getRedeliveryCount());
        r.put("topic", norm(m.getTopicName()));
        r.put("props", props(m));
        if (m.hasOrderingKey()) {
            r.put("ordering_key", new String(m.getOrderingKey(), StandardCharsets.UTF_8));
        }
        if (m.getEventTime() != 0) {
            r.put("event_time", m.getEventTime());
        }
        return r;
    }

    /** GET on the admin API: {"status": code, "body": text}. */
    String[] adminGet(String path) throws Exception {
        HttpRequest req = HttpRequest.newBuilder(URI.create(adminUrl + path))
                .timeout(Duration.ofSeconds(10)).GET().build();
        HttpResponse<String> resp = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
        return new String[] {String.valueOf(resp.statusCode()), resp.body()};
    }

    /** persistent://tenant/ns/name -> /admin/v2/persistent/tenant/ns/name */
    static String adminTopicPath(String topic) {
        return "/admin/v2/" + topic.replace("://", "/");
    }

    /** The sorted subscription names of a topic from the admin API, or the HTTP status on failure. */
    Object subscriptions(String topic) throws Exception {
        String[] r = adminGet(adminTopicPath(topic) + "/subscriptions");
        if (!r[0].equals("200")) {
            return "HTTP " + r[0];
        }
        List<String> subs = new ArrayList<>();
        var mt = Pattern.compile("\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(r[1]);
        while (mt.find()) {
            subs.add(norm(mt.group(1)));
        }
        Collections.sort(subs);
        return subs;
    }

    /** The type name of an expected failure (unwrapping the future wrappers). */
    static String errType(Throwable t) {
        Throwable cur = t;
        while ((cur instanceof CompletionException || cur instanceof ExecutionException)
                && cur.getCause() != null) {
            cur = cur.getCause();
        }
        return cur.getClass().getSimpleName();
    }

    static void sleep(long ms) throws InterruptedException {
        Thread.sleep(ms);
    }

    @Override
    public void close() {
        List<AutoCloseable> all;
        synchronized (opened) {
            all = new ArrayList<>(opened);
            opened.clear();
        }
        Collections.reverse(all);
        for (AutoCloseable c : all) {
            try {
                if (c instanceof PulsarClient pc) {
                    pc.closeAsync().get(10, TimeUnit.SECONDS);
                } else {
                    c.close();
                }
            } catch (Exception e) {
                System.err.println("[" + name + "] close: " + e);
            }
        }
    }
}
