package letterbox.conformance;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The Java scenario program of conformance/README.md:
 * {@code --service-url URL --admin-url URL --prefix PREFIX [--only A,B]} or {@code --list}.
 * One JSON line per scenario on stdout; logs on stderr; exit 0 once every scenario printed its line.
 */
public final class Main {
    /** A scenario that overruns this is abandoned with an error line (its client is closed). */
    static final long SCENARIO_LIMIT_S = 60;

    private Main() {}

    static Map<String, Scenario> scenarios() {
        Map<String, Scenario> all = new LinkedHashMap<>();
        RetryScenarios.register(all);
        NackScenarios.register(all);
        AckScenarios.register(all);
        DeliveryScenarios.register(all);
        SubscriptionScenarios.register(all);
        SeekScenarios.register(all);
        UnsupportedScenarios.register(all);
        return all;
    }

    public static void main(String[] args) {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        Map<String, String> opts = new LinkedHashMap<>();
        boolean list = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--list")) {
                list = true;
            } else if (a.startsWith("--") && a.contains("=")) {
                opts.put(a.substring(2, a.indexOf('=')), a.substring(a.indexOf('=') + 1));
            } else if (a.startsWith("--") && i + 1 < args.length) {
                opts.put(a.substring(2), args[++i]);
            } else {
                usage("unexpected argument: " + a);
            }
        }
        Map<String, Scenario> all = scenarios();
        if (list) {
            all.keySet().forEach(System.out::println);
            System.out.flush();
            System.exit(0);
        }
        for (String k : List.of("service-url", "admin-url", "prefix")) {
            if (!opts.containsKey(k)) {
                usage("missing --" + k);
            }
        }
        List<String> names = new ArrayList<>(all.keySet());
        if (opts.containsKey("only")) {
            FailureEventScenarios.register(all); // letterbox's own: run when named, never listed
            names = new ArrayList<>();
            for (String n : opts.get("only").split(",")) {
                n = n.trim();
                if (n.isEmpty()) {
                    continue;
                }
                if (!all.containsKey(n)) {
                    usage("unknown scenario: " + n);
                }
                names.add(n);
            }
        }
        for (String n : names) {
            runOne(n, all.get(n), opts);
        }
        System.out.flush();
        System.exit(0);
    }

    private static void runOne(String name, Scenario s, Map<String, String> opts) {
        Ctx ctx = new Ctx(opts.get("service-url"), opts.get("admin-url"), opts.get("prefix"), name);
        ExecutorService ex = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "scenario-" + name);
            t.setDaemon(true);
            return t;
        });
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("scenario", name);
        long t0 = System.nanoTime();
        System.err.println("[" + name + "] start");
        Future<Object> f = ex.submit(() -> s.run(ctx));
        try {
            line.put("record", f.get(SCENARIO_LIMIT_S, TimeUnit.SECONDS));
        } catch (TimeoutException e) {
            f.cancel(true);
            line.put("error", "TimeoutException: scenario did not finish within " + SCENARIO_LIMIT_S + "s");
        } catch (ExecutionException e) {
            Throwable c = e.getCause() == null ? e : e.getCause();
            c.printStackTrace();
            String msg = String.valueOf(c.getMessage()).split("\n")[0];
            line.put("error", c.getClass().getSimpleName() + ": " + msg);
        } catch (InterruptedException e) {
            line.put("error", "InterruptedException");
        } finally {
            ex.shutdownNow();
            ctx.close();
        }
        System.err.printf("[%s] done in %.1fs%n", name, (System.nanoTime() - t0) / 1e9);
        System.out.println(Json.write(line));
        System.out.flush();
    }

    private static void usage(String why) {
        System.err.println(why);
        System.err.println("usage: --service-url URL --admin-url URL --prefix PREFIX [--only A,B] | --list");
        System.exit(2);
    }
}
