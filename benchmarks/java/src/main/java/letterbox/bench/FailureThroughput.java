package letterbox.bench;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.PulsarClient;

/**
 * The failure path's throughput against one broker, driven with the official Java client
 * (benchmarks/failure_throughput.py runs it):
 *
 * <pre>
 * java -jar benchmarks/java/target/letterbox-bench.jar --service-url pulsar://127.0.0.1:6650
 *     --admin-url http://127.0.0.1:8080 --prefix persistent://public/default/ft-1
 *     [--phases redeliver,deadletter,redrive] [--messages 2000] [--rounds 3] [--max-redeliveries 3]
 *     [--nack-delay-ms 100] [--dlq broker|client] [--redrive broker|client] [--timeout-s 600]
 * </pre>
 *
 * <p>--dlq broker: the consumer property {@code letterbox.dlq.max_redeliveries} (letterbox's
 * broker-side dead-lettering), no DeadLetterPolicy; --dlq client: the client's DeadLetterPolicy.
 * --redrive broker: letterbox's admin redrive; --redrive client: a consumer on the DLQ republishes
 * each message to the source topic and acks it. The redrive phase moves back what the deadletter
 * phase of the same run put into the DLQ (it runs that phase first when it is not named).
 *
 * <p>stdout holds one JSON line: the options and one object per phase; logs go to stderr.
 */
public final class FailureThroughput {
    private FailureThroughput() {}

    public static void main(String[] args) throws Exception {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        Map<String, String> o = new LinkedHashMap<>(Map.of(
                "phases", "redeliver,deadletter,redrive", "messages", "2000", "rounds", "3",
                "max-redeliveries", "3", "nack-delay-ms", "100", "dlq", "broker", "redrive", "broker",
                "timeout-s", "600"));
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                usage("unexpected argument: " + args[i]);
            }
            o.put(args[i].substring(2), args[i + 1]);
        }
        for (String k : new String[] {"service-url", "admin-url", "prefix"}) {
            if (!o.containsKey(k)) {
                usage("missing --" + k);
            }
        }
        Phases.Options opts = new Phases.Options(o.get("admin-url"), Integer.parseInt(o.get("messages")),
                Integer.parseInt(o.get("rounds")), Integer.parseInt(o.get("max-redeliveries")),
                Long.parseLong(o.get("nack-delay-ms")), o.get("dlq").equals("client"),
                o.get("redrive").equals("client"), Long.parseLong(o.get("timeout-s")));
        String phases = "," + o.get("phases") + ",";
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", opts.messages());
        out.put("rounds", opts.rounds());
        out.put("max_redeliveries", opts.maxRedeliveries());
        out.put("nack_delay_ms", opts.nackDelayMs());
        out.put("dlq", o.get("dlq"));
        out.put("redrive_by", o.get("redrive"));
        try (PulsarClient client = PulsarClient.builder().serviceUrl(o.get("service-url"))
                .operationTimeout(60, TimeUnit.SECONDS).build()) {
            Phases p = new Phases(client, opts);
            p.warmUp(o.get("prefix") + "-warm");
            if (phases.contains(",redeliver,")) {
                out.put("redeliver", p.redeliver(o.get("prefix") + "-nack"));
            }
            String dlqTopic = o.get("prefix") + "-dlq";
            if (phases.contains(",deadletter,")) {
                out.put("deadletter", p.deadLetter(dlqTopic));
            }
            if (phases.contains(",redrive,")) {
                if (!phases.contains(",deadletter,")) {
                    out.put("deadletter_setup", p.deadLetter(dlqTopic));
                }
                out.put("redrive", p.redrive(dlqTopic));
            }
        }
        System.out.println(json(out));
        System.out.flush();
        System.exit(0);
    }

    /** JSON of nested maps whose leaves are numbers, booleans and plain strings (no escaping needed). */
    static String json(Object v) {
        if (v instanceof Map<?, ?> m) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : m.entrySet()) {
                b.append(b.length() > 1 ? ", \"" : "\"").append(e.getKey()).append("\": ").append(json(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (v instanceof Double d) {
            return Double.isFinite(d) ? String.format(Locale.ROOT, "%.3f", d) : "null";
        }
        return v instanceof String s ? "\"" + s + "\"" : String.valueOf(v);
    }

    private static void usage(String why) {
        System.err.println(why + "\nusage: --service-url URL --admin-url URL --prefix TOPIC_PREFIX [options]");
        System.exit(2);
    }
}
