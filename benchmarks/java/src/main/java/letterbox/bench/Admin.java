package letterbox.bench;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The two admin calls the phases need, over the broker's REST API (the same paths on both brokers). */
final class Admin {
    record Answer(int status, String body) {}

    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
    private final String base;

    Admin(String base) {
        this.base = base;
    }

    /** persistent://tenant/ns/name as it appears in an admin path: persistent/tenant/ns/name. */
    static String path(String topic) {
        return "/admin/v2/" + topic.replace("://", "/");
    }

    /** The integer value of the first "key" in a JSON text, or null. */
    static Long number(String json, String key) {
        Matcher m = Pattern.compile("\"" + Pattern.quote(key) + "\"\\s*:\\s*(\\d+)").matcher(json);
        return m.find() ? Long.valueOf(m.group(1)) : null;
    }

    Answer post(String path, String json, long timeoutS) throws Exception {
        HttpRequest req = HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(timeoutS))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(json)).build();
        HttpResponse<String> resp = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
        return new Answer(resp.statusCode(), resp.body());
    }

    /** msgBacklog of one subscription of a topic (its stats), or -1 when the stats do not say. */
    long backlog(String topic, String subscription) {
        try {
            HttpRequest req = HttpRequest.newBuilder(URI.create(base + path(topic) + "/stats"))
                    .timeout(Duration.ofSeconds(30)).GET().build();
            String body = HTTP.send(req, HttpResponse.BodyHandlers.ofString()).body();
            int subs = body.indexOf("\"subscriptions\"");
            int at = subs < 0 ? -1 : body.indexOf("\"" + subscription + "\"", subs);
            Long v = at < 0 ? null : number(body.substring(at), "msgBacklog");
            return v == null ? -1 : v;
        } catch (Exception e) {
            return -1;
        }
    }
}
