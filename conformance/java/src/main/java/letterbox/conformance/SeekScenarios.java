package letterbox.conformance;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.SubscriptionType;

/** Consumer seek (message id, time) and Reader start positions. */
final class SeekScenarios {
    private SeekScenarios() {}

    static void register(Map<String, Scenario> m) {
        m.put("seek_message_id", SeekScenarios::seekId);
        m.put("seek_earliest_once", SeekScenarios::seekEarliestOnce);
        m.put("seek_earliest_unacked", SeekScenarios::seekEarliestUnacked);
        m.put("seek_time", SeekScenarios::seekTime);
        m.put("reader_earliest_latest", SeekScenarios::readerEarliestLatest);
        m.put("reader_start_message_id", SeekScenarios::readerStartId);
    }

    /**
     * The pause between the last ack and a seek: long enough for acks to have landed on both brokers,
     * and past letterbox's trim of fully acked entries (0.5 s after the ack), so that each broker's
     * record is the same from run to run (Pulsar keeps acked entries of its open ledger; letterbox
     * without retention drops them, and a seek back then finds nothing).
     */
    static final long PAUSE_BEFORE_SEEK_MS = 1500;

    private static Consumer<byte[]> exclusive(PulsarClient client, String topic) throws Exception {
        // acks go out at once (no grouping), and each seek waits a moment after them: an ack still
        // in flight when the cursor is reset would land after it and hide that message
        return client.newConsumer().topic(topic).subscriptionName("seek-sub")
                .subscriptionType(SubscriptionType.Exclusive)
                .acknowledgmentGroupTime(0, TimeUnit.MILLISECONDS).subscribe();
    }

    private static List<MessageId> send(Producer<byte[]> p, int from, int to) throws Exception {
        List<MessageId> ids = new ArrayList<>();
        for (int i = from; i < to; i++) {
            ids.add(p.send(Ctx.bytes("m" + i)));
        }
        return ids;
    }

    /** After reading m0..m5: seek(id of m2), then seek(earliest). */
    static Object seekId(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = exclusive(client, topic);
        Producer<byte[]> p = c.producer(client, topic);
        List<MessageId> ids = send(p, 0, 6);
        Map<String, Object> rec = new LinkedHashMap<>();
        List<Message<byte[]>> got = Ctx.drain(cons, 2000, 6);
        rec.put("first", Ctx.texts(got));
        for (Message<byte[]> m : got) {
            cons.acknowledge(m);
        }
        Ctx.sleep(PAUSE_BEFORE_SEEK_MS);
        cons.seek(ids.get(2));
        List<Message<byte[]>> after = Ctx.drain(cons, 2000, 10);
        rec.put("after_seek_m2", Ctx.texts(after));
        for (Message<byte[]> m : after) {
            cons.acknowledge(m);
        }
        Ctx.sleep(PAUSE_BEFORE_SEEK_MS);
        cons.seek(MessageId.earliest);
        rec.put("after_seek_earliest", Ctx.texts(Ctx.drain(cons, 2000, 10)));
        return rec;
    }

    /** After reading and acking m0..m3: one seek(earliest) on that consumer. */
    static Object seekEarliestOnce(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = exclusive(client, topic);
        Producer<byte[]> p = c.producer(client, topic);
        send(p, 0, 4);
        Map<String, Object> rec = new LinkedHashMap<>();
        List<Message<byte[]>> got = Ctx.drain(cons, 2000, 4);
        rec.put("first", Ctx.texts(got));
        for (Message<byte[]> m : got) {
            cons.acknowledge(m);
        }
        Ctx.sleep(PAUSE_BEFORE_SEEK_MS);
        cons.seek(MessageId.earliest);
        rec.put("after_seek_earliest", Ctx.texts(Ctx.drain(cons, 2000, 10)));
        return rec;
    }

    /** Reading m0..m3 without acking any: one seek(earliest) replays them. */
    static Object seekEarliestUnacked(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = exclusive(client, topic);
        Producer<byte[]> p = c.producer(client, topic);
        send(p, 0, 4);
        Map<String, Object> rec = new LinkedHashMap<>();
        rec.put("first", Ctx.texts(Ctx.drain(cons, 2000, 4)));
        Ctx.sleep(PAUSE_BEFORE_SEEK_MS);
        cons.seek(MessageId.earliest);
        rec.put("after_seek_earliest", Ctx.texts(Ctx.drain(cons, 2000, 10)));
        return rec;
    }

    /** m0..m2, a pause, time T, a pause, m3..m5: seek(T) gives m3..m5. */
    static Object seekTime(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Consumer<byte[]> cons = exclusive(client, topic);
        Producer<byte[]> p = c.producer(client, topic);
        send(p, 0, 3);
        Ctx.sleep(1000);
        long t = System.currentTimeMillis();
        Ctx.sleep(1000);
        send(p, 3, 6);
        Map<String, Object> rec = new LinkedHashMap<>();
        List<Message<byte[]>> got = Ctx.drain(cons, 2000, 6);
        rec.put("first", Ctx.texts(got));
        for (Message<byte[]> m : got) {
            cons.acknowledge(m);
        }
        Ctx.sleep(PAUSE_BEFORE_SEEK_MS);
        cons.seek(t);
        rec.put("after_seek_time", Ctx.texts(Ctx.drain(cons, 2000, 10)));
        Ctx.sleep(PAUSE_BEFORE_SEEK_MS);
        cons.seek(0L);
        rec.put("after_seek_zero", Ctx.texts(Ctx.drain(cons, 2000, 10)));
        return rec;
    }

    /** hasMessageAvailable, bounded: a TimeoutException when the broker does not answer in 10 s. */
    private static boolean available(Reader<byte[]> r) throws Exception {
        return r.hasMessageAvailableAsync().get(10, TimeUnit.SECONDS);
    }

    private static List<String> readAll(Reader<byte[]> r, List<Object> trace) throws Exception {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < 10 && available(r); i++) {
            Message<byte[]> m = r.readNext(Ctx.RECEIVE_MS, TimeUnit.MILLISECONDS);
            out.add(m == null ? null : Ctx.text(m));
        }
        return out;
    }

    /** Reader from earliest and from latest, with hasMessageAvailable. */
    static Object readerEarliestLatest(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Producer<byte[]> p = c.producer(client, topic);
        send(p, 0, 3);
        Map<String, Object> rec = new LinkedHashMap<>();
        Reader<byte[]> early = client.newReader().topic(topic).startMessageId(MessageId.earliest).create();
        rec.put("earliest_has_available", available(early));
        rec.put("earliest_read", readAll(early, null));
        rec.put("earliest_has_available_after", available(early));
        Reader<byte[]> late = client.newReader().topic(topic).startMessageId(MessageId.latest).create();
        rec.put("latest_has_available", available(late));
        send(p, 3, 4);
        Message<byte[]> m = late.readNext(Ctx.RECEIVE_MS, TimeUnit.MILLISECONDS);
        rec.put("latest_next", m == null ? null : Ctx.text(m));
        Message<byte[]> e = early.readNext(Ctx.RECEIVE_MS, TimeUnit.MILLISECONDS);
        rec.put("earliest_next", e == null ? null : Ctx.text(e));
        Reader<byte[]> lateIncl = client.newReader().topic(topic).startMessageId(MessageId.latest)
                .startMessageIdInclusive().create();
        rec.put("latest_inclusive_has_available", available(lateIncl));
        Message<byte[]> li = lateIncl.readNext(3000, TimeUnit.MILLISECONDS);
        rec.put("latest_inclusive_next", li == null ? null : Ctx.text(li));
        return rec;
    }

    /** Reader at the id of m1, exclusive and inclusive of it. */
    static Object readerStartId(Ctx c) throws Exception {
        PulsarClient client = c.client();
        String topic = c.topic("");
        Producer<byte[]> p = c.producer(client, topic);
        List<MessageId> ids = send(p, 0, 4);
        Map<String, Object> rec = new LinkedHashMap<>();
        Reader<byte[]> excl = client.newReader().topic(topic).startMessageId(ids.get(1)).create();
        rec.put("exclusive", readAll(excl, null));
        Reader<byte[]> incl = client.newReader().topic(topic).startMessageId(ids.get(1))
                .startMessageIdInclusive().create();
        rec.put("inclusive", readAll(incl, null));
        Reader<byte[]> last = client.newReader().topic(topic).startMessageId(ids.get(3)).create();
        rec.put("from_last_has_available", available(last));
        return rec;
    }
}
