package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnsupportedVersionException;

/**
 * The {@code txn} mode: eosim's TransactionalProducerApp (Jepsen's transactional writer) on a
 * transactional {@link KafkaProducer}: initTransactions, then per transaction beginTransaction,
 * {@code size} sends of new values, and commitTransaction, or (with {@code abort_probability})
 * flush and abortTransaction.
 *
 * <p>Each transaction is a {@code txn} op, as the model writes it: invoked with
 * {@code {transactional_id, producer_id, epoch, sends: [{topic, partition: null, key, value}]}};
 * {@code ok} when commitTransaction returned (value {@code {sends: [{topic, partition, value,
 * offset}]}}, the acknowledged sends); {@code fail} when an abortTransaction succeeded (the
 * application chose to abort, or a commit failed with an abortable error); {@code info} when the
 * outcome is unknown: a fatal error (fenced, out-of-order sequence, authorization), or a commit
 * that failed and could not be aborted (a commitTransaction that timed out must be retried, and
 * KafkaProducer refuses abortTransaction then). Then the application restarts as the model's
 * does, as a new process ({@code name/incarnation+1}) in this JVM: a new KafkaProducer with the
 * same transactional.id, whose initTransactions fences the old one. An initTransactions that
 * fails (max.block.ms) restarts it too.
 *
 * <p>{@code producer_id} and {@code epoch} are read from the producer's TransactionManager
 * (KafkaProducer keeps them internal; null if that reading fails).
 */
final class Txn {
    private final JsonNode spec;
    private final JsonNode workload;
    private final History history;
    private final Random random;
    private int incarnation;
    private int nextTxn;
    private int nextValue;
    private long committed;
    private long aborted;
    private long unknown;
    private double late;

    Txn(JsonNode spec) {
        this.spec = spec;
        this.workload = EosimDriver.required(spec, "workload", "");
        EosimDriver.required(workload, "topic", "workload.");
        this.history = new History(spec);
        this.random = new Random(spec.path("seed").asLong(0));
        this.incarnation = spec.path("incarnation").asInt(0);
        this.nextTxn = spec.path("first_txn").asInt(0);
        this.nextValue = spec.path("first_index").asInt(0);
    }

    ObjectNode run() {
        int transactions = Workloads.intField(workload, "transactions", 0);
        double rate = Workloads.doubleField(workload, "rate", 50.0);
        double start = Workloads.doubleField(workload, "start", 0.0);
        int maxRestarts = spec.path("max_restarts").asInt(100);
        Properties props = Workloads.producerProperties(spec);
        if (props.getProperty("transactional.id") == null) {
            props.setProperty("transactional.id", spec.get("name").asText());
        }
        String transactionalId = props.getProperty("transactional.id");
        long intervalNanos = (long) (1e9 / rate);
        int restarts = 0;
        // Before the epoch: the client's code warmed and the first producer built and
        // initialised, so that the first transaction begins at the run's start time.
        Warmup.client(spec, props);
        KafkaProducer<String, byte[]> first = new KafkaProducer<>(props);
        boolean firstFailed = false;
        try {
            first.initTransactions();
        } catch (RuntimeException e) {
            firstFailed = true;
        }
        late = Workloads.sleepUntilRunTime(history, start);
        while (nextTxn < transactions) {
            KafkaProducer<String, byte[]> producer = first;
            boolean restart = firstFailed;
            if (producer == null) {
                producer = new KafkaProducer<>(props);
                try {
                    producer.initTransactions();
                } catch (RuntimeException e) {
                    restart = true;
                }
            }
            first = null;
            firstFailed = false;
            while (!restart && nextTxn < transactions) {
                restart = transaction(producer, transactionalId);
                if (!restart) {
                    Workloads.parkUntil(System.nanoTime() + intervalNanos);
                }
            }
            if (!restart) {
                producer.close();
                break;
            }
            producer.close(Duration.ZERO);
            incarnation++;
            if (++restarts > maxRestarts) {
                throw new IllegalStateException("gave up after " + maxRestarts + " restarts");
            }
        }
        if (first != null) {
            first.close();
        }
        history.close();
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        result.put("process", EosimDriver.process(spec, incarnation));
        result.put("late_ms", late);
        result.put("incarnation", incarnation);
        result.put("next_txn", nextTxn);
        result.put("next_index", nextValue);
        result.put("committed", committed);
        result.put("aborted", aborted);
        result.put("indeterminate", unknown);
        return result;
    }

    /** One transaction; true if the producer must be replaced afterwards. */
    private boolean transaction(KafkaProducer<String, byte[]> producer, String transactionalId) {
        String topic = workload.get("topic").asText();
        String name = spec.get("name").asText();
        int size = Workloads.intField(workload, "size", 5);
        Integer keys = Workloads.optionalInt(workload, "keys");
        int valueBytes = Workloads.intField(workload, "value_bytes", 100);
        double abortProbability = Workloads.doubleField(workload, "abort_probability", 0.0);
        String process = EosimDriver.process(spec, incarnation);
        nextTxn++;
        List<String> values = new ArrayList<>();
        List<String> keyList = new ArrayList<>();
        ArrayNode sends = EosimDriver.JSON.createArrayNode();
        for (int i = 0; i < size; i++) {
            String value = name + "-" + (nextValue + i);
            String key = keys == null ? null : "k" + random.nextInt(keys);
            values.add(value);
            keyList.add(key);
            ObjectNode send = sends.addObject();
            send.put("topic", topic);
            send.putNull("partition");
            send.put("key", key);
            send.put("value", value);
        }
        nextValue += size;
        ObjectNode body = EosimDriver.JSON.createObjectNode();
        body.put("transactional_id", transactionalId);
        long[] idAndEpoch = producerIdAndEpoch(producer);
        if (idAndEpoch == null) {
            body.putNull("producer_id");
            body.putNull("epoch");
        } else {
            body.put("producer_id", idAndEpoch[0]);
            body.put("epoch", idAndEpoch[1]);
        }
        body.set("sends", sends);
        long id = history.nextId();
        history.op(id, "invoke", "txn", process, body, null);
        Map<String, long[]> acked = new ConcurrentHashMap<>();
        try {
            producer.beginTransaction();
            for (int i = 0; i < size; i++) {
                String value = values.get(i);
                producer.send(Workloads.record(topic, null, keyList.get(i), value, valueBytes),
                        (metadata, error) -> {
                            if (error == null) {
                                acked.put(value, new long[] {metadata.partition(),
                                        metadata.offset()});
                            }
                        });
            }
            if (random.nextDouble() < abortProbability) {
                // Written first, then aborted: the records reach the log and need markers.
                String error = null;
                try {
                    producer.flush();
                    producer.abortTransaction();
                } catch (RuntimeException e) {
                    error = EosimDriver.describe(e);
                }
                aborted++;
                history.op(id, "fail", "txn", process, null,
                        error == null ? "AbortedByApplication: abortTransaction" : error);
                return error != null;
            }
            producer.commitTransaction();
            ObjectNode value = EosimDriver.JSON.createObjectNode();
            ArrayNode done = value.putArray("sends");
            for (String v : values) {
                long[] at = acked.get(v);
                if (at != null) {
                    ObjectNode s = done.addObject();
                    s.put("topic", topic);
                    s.put("partition", (int) at[0]);
                    s.put("value", v);
                    s.put("offset", at[1]);
                }
            }
            committed++;
            history.op(id, "ok", "txn", process, value, null);
            return false;
        } catch (RuntimeException e) {
            String error = EosimDriver.describe(e);
            if (isFatal(producer, e)) {
                unknown++;
                history.op(id, "info", "txn", process, null, error);
                return true;
            }
            try {
                producer.abortTransaction();
            } catch (RuntimeException abortError) {
                unknown++;
                history.op(id, "info", "txn", process, null,
                        error + "; abort failed: " + EosimDriver.describe(abortError));
                return true;
            }
            aborted++;
            history.op(id, "fail", "txn", process, null, error);
            return false;
        }
    }

    /** TransactionManager.hasFatalError(), or failing that the fatal exception classes. */
    private static boolean isFatal(KafkaProducer<?, ?> producer, RuntimeException e) {
        try {
            Object manager = transactionManager(producer);
            Method m = manager.getClass().getDeclaredMethod("hasFatalError");
            m.setAccessible(true);
            return (Boolean) m.invoke(manager);
        } catch (ReflectiveOperationException | RuntimeException ignored) {
            return e instanceof ProducerFencedException
                    || e instanceof OutOfOrderSequenceException
                    || e instanceof AuthorizationException
                    || e instanceof UnsupportedVersionException;
        }
    }

    private static Object transactionManager(KafkaProducer<?, ?> producer)
            throws ReflectiveOperationException {
        Field f = KafkaProducer.class.getDeclaredField("transactionManager");
        f.setAccessible(true);
        return f.get(producer);
    }

    /** The producer id and epoch of TransactionManager.producerIdAndEpoch(), or null. */
    private static long[] producerIdAndEpoch(KafkaProducer<?, ?> producer) {
        try {
            Object manager = transactionManager(producer);
            Method m = manager.getClass().getDeclaredMethod("producerIdAndEpoch");
            m.setAccessible(true);
            Object pe = m.invoke(manager);
            long id = pe.getClass().getField("producerId").getLong(pe);
            short epoch = pe.getClass().getField("epoch").getShort(pe);
            return id < 0 ? null : new long[] {id, epoch};
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }
}
