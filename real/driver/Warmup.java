package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;

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
 *       exercised on the warm-up topic.
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
        try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(p)) {
            if (transactionalId != null) {
                producer.initTransactions();
                for (int i = 0; i < records; i += WARMUP_TXN_SIZE) {
                    producer.beginTransaction();
                    for (int j = 0; j < WARMUP_TXN_SIZE; j++) {
                        producer.send(Workloads.record(topic, null, "k" + j, "warmup", 100));
                    }
                    producer.commitTransaction();
                }
            } else {
                for (int i = 0; i < records; i++) {
                    producer.send(Workloads.record(topic, null, "k" + (i % 100), "warmup", 100));
                }
                producer.flush();
            }
        }
    }
}
