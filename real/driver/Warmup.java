package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;

/**
 * Warm-up loads, left out of every history.
 *
 * <p>A freshly started broker is many times slower for its first seconds (class loading, the
 * JIT), and so is a fresh client JVM. The model has no such thing, so before a run is measured
 * eosim warms both:
 *
 * <ul>
 *   <li>the {@code warmup} mode, after a cluster starts and before a run whose brokers were
 *       restarted since the last warm-up: an idempotent acks=all producer writes to the
 *       warm-up topic ({@code workload.topic}, one partition led by each broker) at
 *       {@code workload.rate} for {@code workload.seconds}, a read_committed consumer reads
 *       along, and with {@code workload.transactional} a transactional producer commits
 *       transactions there too;
 *   <li>{@link #client}, inside a producing driver before the run's epoch: the same client
 *       code paths as the run's producer (its configuration, on another transactional.id),
 *       exercised on the warm-up topic, then {@link #own}: the run's own producer instance
 *       sends there at the run's rate until shortly before its start; {@link #reader}, inside
 *       a reading driver: the run's consumer paths, reading the warm-up topic, and
 *       {@link #ownPartitions}: the run's own consumer reads it too until its start. They write
 *       their history lines, by the run's own code, to a history that goes nowhere
 *       ({@link #discarding}).
 * </ul>
 */
final class Warmup {
    private final JsonNode spec;
    private final JsonNode workload;

    Warmup(JsonNode spec) {
        this.spec = spec;
        this.workload = EosimDriver.required(spec, "workload", "");
        EosimDriver.required(workload, "topic", "workload.");
    }

    ObjectNode run() throws Exception {
        String topic = workload.get("topic").asText();
        double seconds = Workloads.doubleField(workload, "seconds", 8.0);
        double rate = Workloads.doubleField(workload, "rate", 2000.0);
        boolean transactional = workload.path("transactional").asBoolean(false);
        long end = System.nanoTime() + (long) (seconds * 1e9);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong read = new AtomicLong();
        Thread reader = new Thread(() -> {
            try (KafkaConsumer<String, byte[]> consumer =
                    Consume.consumer(spec, "read_committed", "latest")) {
                consumer.assign(Consume.partitions(consumer, topic, 60_000));
                while (!stop.get()) {
                    ConsumerRecords<String, byte[]> got = consumer.poll(Duration.ofMillis(100));
                    read.addAndGet(got.count());
                }
            }
        }, "eosim-warmup-reader");
        reader.start();
        Properties props = Workloads.producerProperties(spec);
        props.setProperty("acks", "all");
        props.setProperty("enable.idempotence", "true");
        long sent = 0;
        long transactions = 0;
        long interval = (long) (1e9 / rate);
        try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(props)) {
            KafkaProducer<String, byte[]> txn = null;
            if (transactional) {
                Properties t = Workloads.producerProperties(spec);
                t.setProperty("transactional.id", "eosim-warmup");
                txn = new KafkaProducer<>(t);
                txn.initTransactions();
            }
            long due = System.nanoTime();
            while (System.nanoTime() < end) {
                Workloads.parkUntil(due);
                producer.send(Workloads.record(topic, null, "k" + (sent % 100), "warmup-" + sent,
                        100));
                sent++;
                if (txn != null && sent % 100 == 0) {
                    txn.beginTransaction();
                    for (int i = 0; i < 5; i++) {
                        txn.send(Workloads.record(topic, null, "t" + i, "warmup-txn", 100));
                    }
                    txn.commitTransaction();
                    transactions++;
                }
                due += interval;
            }
            producer.flush();
            if (txn != null) {
                txn.close();
            }
        } finally {
            stop.set(true);
            reader.join(10_000);
        }
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        result.put("sent", sent);
        result.put("read", read.get());
        result.put("transactions", transactions);
        return result;
    }

    /**
     * Warm a producing driver's client code before its epoch: with the spec's {@code warmup}
     * ({@code {topic, records}}), a producer of {@code props} (a transactional one on
     * {@code <transactional.id>-warmup}, in transactions of {@link #WARMUP_TXN_SIZE} records)
     * writes {@code records} records to the warm-up topic and closes. Nothing reaches the
     * history. The transactions are few (four for 2,000 records) so that the warm-up ends
     * within the runner's lead before the epoch. On the calibration cluster (three brokers,
     * two cores) back-to-back transactions took about 45 ms each, the next one's first
     * produce answered CONCURRENT_TRANSACTIONS while the last one's markers were written: in
     * transactions of five (400 commits) the warm-up ended 4.1 s after the epoch even on one
     * broker (tests/test_real_driver.py), and in transactions of 20 (100 commits) it still met
     * calibration case 4's first broker kill at 2 s; its EndTxn timed out and the driver died
     * before its first operation.
     */
    /** Records per transaction of a transactional producer's client warm-up. */
    static final int WARMUP_TXN_SIZE = 500;

    static void client(JsonNode spec, Properties props) {
        JsonNode warm = spec.get("warmup");
        if (warm == null || !warm.isObject()) {
            return;
        }
        String topic = EosimDriver.required(warm, "topic", "warmup.").asText();
        int records = Workloads.intField(warm, "records", 1000);
        Properties p = new Properties();
        p.putAll(props);
        String transactionalId = p.getProperty("transactional.id");
        if (transactionalId != null) {
            p.setProperty("transactional.id", transactionalId + "-warmup");
        }
        p.setProperty("client.id", "eosim-warmup");
        try (History sink = discarding(spec);
                KafkaProducer<String, byte[]> producer = new KafkaProducer<>(p)) {
            if (transactionalId != null) {
                producer.initTransactions();
                for (int i = 0; i < records; i += WARMUP_TXN_SIZE) {
                    producer.beginTransaction();
                    for (int j = 0; j < WARMUP_TXN_SIZE; j++) {
                        send(producer, sink, topic, "k" + j);
                    }
                    producer.commitTransaction();
                }
            } else {
                for (int i = 0; i < records; i++) {
                    send(producer, sink, topic, "k" + (i % 100));
                }
                producer.flush();
            }
        }
    }

    /** How close to its start a run's own producer stops its warm-up sends (then flushes). */
    static final double OWN_GAP_MS = 300.0;

    /**
     * Warm the run's own producer instance before its start: with the spec's
     * {@code warmup.own_ms}, it sends to the warm-up topic (one partition led by each broker)
     * at {@code rate} records/s for {@code own_ms} at most and stops {@link #OWN_GAP_MS}
     * before {@code startMs}, then flushes. Its connections to every broker are then open and
     * its per-request code compiled, as the model's clients are at the start: a new producer
     * opens its connections at its first batch, and cold, a run's first acknowledgements came
     * 46-50 ms after its first sends (docs/calibration.md, "A real run's first half second").
     * Nothing reaches the history. Returns how many records it sent.
     */
    static long own(JsonNode spec, KafkaProducer<String, byte[]> producer, History history,
            double startMs, double rate) {
        JsonNode warm = spec.get("warmup");
        if (warm == null || !warm.isObject() || !warm.has("own_ms")) {
            return 0;
        }
        String topic = EosimDriver.required(warm, "topic", "warmup.").asText();
        double until = Math.min(history.now() + warm.get("own_ms").asDouble(),
                startMs - OWN_GAP_MS);
        long interval = (long) (1e9 / Math.max(rate, 1.0));
        long sent = 0;
        try (History sink = discarding(spec)) {
            long due = System.nanoTime();
            while (history.now() < until) {
                send(producer, sink, topic, "k" + (sent % 100));
                sent++;
                due += interval;
                Workloads.parkUntil(due);
            }
            producer.flush();
        }
        return sent;
    }

    /**
     * The warm-up topic's partitions a reading driver's own consumer reads beside its run's
     * until its start (none without the spec's {@code warmup.own}): the run's producers' own
     * warm-ups ({@link #own}) write there at the run's rate just before it, so the consumer's
     * steady-state path (small fetches, one after another, from every broker) is compiled and
     * its fetch sessions open at the start, as the model's reader is. The bulk read of
     * {@link #reader} compiles the record paths but, in a few large polls, not that one: with
     * it alone, the records acknowledged in a run's first second were read 0.98 ms after
     * their acknowledgement at the median (0.14 ms in the rest of the run; Kafka 4.1.1,
     * calibration case 5 with acks=all, docs/calibration.md). A warm-up topic that cannot be
     * found leaves the client cold, not the run broken.
     */
    static List<TopicPartition> ownPartitions(JsonNode spec, KafkaConsumer<?, ?> consumer) {
        JsonNode warm = spec.get("warmup");
        if (warm == null || !warm.isObject() || !warm.path("own").asBoolean(false)) {
            return List.of();
        }
        String topic = EosimDriver.required(warm, "topic", "warmup.").asText();
        try {
            return Consume.partitions(consumer, topic, 10_000);
        } catch (RuntimeException e) {
            System.err.println("eosim: the reader's own warm-up has no topic "
                    + topic + ": " + EosimDriver.describe(e));
            return List.of();
        }
    }

    /** How long a reading driver's warm-up may read at most. */
    static final long READER_WARMUP_NS = 2_000_000_000L;

    /**
     * Warm a reading driver's client code before its epoch: with the spec's {@code warmup}
     * ({@code {topic, records}}), a consumer of the run's config and {@code isolation} reads
     * {@code records} records of the warm-up topic from its start (for
     * {@link #READER_WARMUP_NS} at most), building each poll's history value as the run will,
     * and closes. Nothing reaches the history.
     */
    static void reader(JsonNode spec, String isolation) {
        JsonNode warm = spec.get("warmup");
        if (warm == null || !warm.isObject()) {
            return;
        }
        String topic = EosimDriver.required(warm, "topic", "warmup.").asText();
        int records = Workloads.intField(warm, "records", 1000);
        long deadline = System.nanoTime() + READER_WARMUP_NS;
        long read = 0;
        try (History sink = discarding(spec);
                KafkaConsumer<String, byte[]> consumer =
                        Consume.consumer(spec, isolation, "earliest")) {
            consumer.assign(Consume.partitions(consumer, topic, 10_000));
            consumer.seekToBeginning(consumer.assignment());
            while (read < records && System.nanoTime() < deadline) {
                ConsumerRecords<String, byte[]> got = consumer.poll(Duration.ofMillis(100));
                if (!got.isEmpty()) {
                    read += got.count();
                    Consume.recordPoll(sink, WARMUP_PROCESS, got, isolation);
                }
            }
        } catch (Exception e) {
            // A warm-up that fails leaves the client cold, not the run broken.
            System.err.println("eosim: the reader's warm-up failed: " + EosimDriver.describe(e));
        }
    }

    /** The process name of a warm-up's history lines (which go nowhere). */
    static final String WARMUP_PROCESS = "eosim-warmup/0";

    /**
     * A history that goes nowhere ({@code /dev/null}): a warm-up writes its lines there by the
     * run's own code, so that building and encoding them is compiled before the run (a
     * producer's completions are written on its I/O thread: cold, they held every
     * acknowledgement of a run's first few hundred ms).
     */
    static History discarding(JsonNode spec) {
        ObjectNode copy = spec.deepCopy();
        copy.put("history", "/dev/null");
        return new History(copy);
    }

    /** A warm-up send: its invoke line, and its completion line from its callback. */
    static void send(KafkaProducer<String, byte[]> producer, History sink, String topic,
            String key) {
        long id = sink.nextId();
        ObjectNode value = EosimDriver.JSON.createObjectNode();
        value.put("topic", topic);
        value.putNull("partition");
        value.put("key", key);
        value.put("value", "warmup");
        sink.op(id, "invoke", "send", WARMUP_PROCESS, value, null);
        producer.send(Workloads.record(topic, null, key, "warmup", 100), (metadata, error) -> {
            ObjectNode done = value.deepCopy();
            if (error == null) {
                done.put("partition", metadata.partition());
                done.put("offset", metadata.hasOffset() ? metadata.offset() : -1L);
                sink.op(id, "ok", "send", WARMUP_PROCESS, done, null);
            } else {
                sink.op(id, "info", "send", WARMUP_PROCESS, done, EosimDriver.describe(error));
            }
        });
    }
}
