package letterbox.bench;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

/** A consumer on its own thread that acks whatever arrives on one subscription and notes when each
 *  of the messages 0..n-1 has arrived at least once. Subscribed when constructed; counts from start(). */
final class Arrivals implements AutoCloseable {
    private final Consumer<byte[]> consumer;
    private final int[] copies;
    private final CountDownLatch all;
    private final Thread thread;
    private volatile boolean stop;
    private volatile long t0;
    private volatile long doneAt;
    private volatile long total;

    Arrivals(PulsarClient client, String topic, String subscription, int n) throws Exception {
        consumer = client.newConsumer().topic(topic).subscriptionName(subscription)
                .subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).receiverQueueSize(1000).subscribe();
        copies = new int[n];
        all = new CountDownLatch(n);
        thread = new Thread(this::run, "arrivals-" + subscription);
        thread.setDaemon(true);
    }

    void start(long t0) {
        this.t0 = t0;
        thread.start();
    }

    private void run() {
        while (!stop) {
            try {
                Message<byte[]> m = consumer.receive(100, TimeUnit.MILLISECONDS);
                if (m == null) {
                    continue;
                }
                consumer.acknowledge(m);
                total++;
                if (copies[Phases.index(m)]++ == 0) {
                    if (all.getCount() == 1) {  // the last first arrival: its time is written before
                        doneAt = System.nanoTime();  // complete() can read true (this thread alone counts down)
                    }
                    all.countDown();
                }
            } catch (Exception e) {
                if (!stop) {
                    e.printStackTrace();
                }
                return;
            }
        }
    }

    boolean complete() {
        return all.getCount() == 0;
    }

    void await(long deadlineNanos) throws InterruptedException {
        all.await(Math.max(0, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
    }

    /** Seconds from start() to the last first arrival (or until now, when not all arrived). */
    double seconds() {
        return ((complete() ? doneAt : System.nanoTime()) - t0) / 1e9;
    }

    /** Until the subscription's backlog is 0 (at most 10 s), so that late copies are counted too. */
    void settle(Admin admin, String topic) throws InterruptedException {
        long end = System.nanoTime() + 10_000_000_000L;
        while (admin.backlog(topic, consumer.getSubscription()) != 0 && System.nanoTime() < end) {
            Thread.sleep(100);
        }
        Thread.sleep(200);
    }

    long total() {
        return total;
    }

    long distinct() {
        return copies.length - all.getCount();
    }

    @Override
    public void close() throws Exception {
        stop = true;
        thread.join(5000);
        consumer.close();
    }
}
