package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * The {@code produce} mode: the scenario's producer application (eosim's ProducerApp) on a
 * {@link KafkaProducer}.
 *
 * <p>Before the run's epoch the client is warmed ({@link Warmup#client}), the producer built,
 * the topic's metadata fetched and the producer itself warmed on the warm-up topic until
 * shortly before its start ({@link Warmup#own}: its connections open, its request path
 * compiled); the result's {@code late_ms} says how far past its start time the first send
 * went (eosim holds a run whose workload started late invalid), {@code warm_sent} how many
 * records its own warm-up sent.
 *
 * <p>Values are {@code <name>-<n>} from {@code first_index}, after the {@code resend} list
 * ({@code [value, key]} pairs a restarted application sends again first). Keys are {@code k<i>}
 * with i drawn from {@code java.util.Random(seed)}; sends are paced at the workload's rate
 * (constant or Poisson gaps from the same Random), the gap counted from when send() returned
 * if it blocked, as the model does.
 *
 * <p>Outcomes: an {@code invoke} line before {@code send()}; {@code ok} with the partition and
 * offset from the callback's {@link RecordMetadata} ({@code -1} when unknown, as with acks=0);
 * {@code info} when the callback gets an exception (an earlier attempt may have landed);
 * {@code fail} when {@code send()} throws, or when the callback runs inside {@code send()}
 * itself: {@code KafkaProducer.doSend} completes the callback with an {@code ApiException} on
 * the caller's thread, before the record reaches the accumulator (for instance a metadata wait
 * that exceeded {@code max.block.ms}), so the record was never sent.
 */
final class Produce {
    private final JsonNode spec;
    private final JsonNode workload;
    private final History history;
    private final String process;
    private final AtomicLong acked = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong indeterminate = new AtomicLong();
    private volatile Thread sendingThread;

    Produce(JsonNode spec) {
        this.spec = spec;
        this.workload = EosimDriver.required(spec, "workload", "");
        EosimDriver.required(workload, "topic", "workload.");
        this.history = new History(spec);
        this.process = EosimDriver.process(spec, spec.path("incarnation").asInt(0));
    }

    ObjectNode run() {
        String topic = workload.get("topic").asText();
        String name = spec.get("name").asText();
        int records = Workloads.intField(workload, "records", 0);
        double rate = Workloads.doubleField(workload, "rate", 1000.0);
        boolean poisson = workload.path("arrival").asText("constant").equals("poisson");
        Integer keys = Workloads.optionalInt(workload, "keys");
        Integer partition = Workloads.optionalInt(workload, "partition");
        int valueBytes = Workloads.intField(workload, "value_bytes", 100);
        double start = Workloads.doubleField(workload, "start", 0.0);
        int next = spec.path("first_index").asInt(0);
        Random random = new Random(spec.path("seed").asLong(0));
        List<String[]> resend = new ArrayList<>();
        for (JsonNode pair : spec.path("resend")) {
            resend.add(new String[] {pair.get(0).asText(), pair.get(1).isNull() ? null
                    : pair.get(1).asText()});
        }
        double interval = 1000.0 / rate;
        long sent = 0;
        long warmSent;
        double late;
        // Before the epoch: the client's code warmed, the producer built, the topic's metadata
        // fetched and the producer's own connections opened (Warmup.own), so that the first
        // send goes at the run's start time as the model's does (a first send that blocked
        // would shift every later one).
        Properties props = Workloads.producerProperties(spec);
        Warmup.client(spec, props);
        try (KafkaProducer<String, byte[]> producer = new KafkaProducer<>(props)) {
            producer.partitionsFor(topic);
            warmSent = Warmup.own(spec, producer, history, start, rate);
            late = Workloads.sleepUntilRunTime(history, start);
            long due = System.nanoTime();
            while (!resend.isEmpty() || next < records) {
                Workloads.parkUntil(due);
                String value;
                String key;
                if (!resend.isEmpty()) {
                    String[] pair = resend.remove(0);
                    value = pair[0];
                    key = pair[1];
                } else {
                    value = name + "-" + next;
                    key = keys == null ? null : "k" + random.nextInt(keys);
                    next++;
                }
                long invoked = System.nanoTime();
                send(producer, topic, partition, key, value, valueBytes);
                sent++;
                long returned = System.nanoTime();
                double gap = poisson ? -Math.log(1.0 - random.nextDouble()) * interval : interval;
                long base = returned - invoked > 1_000_000L ? returned : due;
                due = base + (long) (gap * 1e6);
            }
            producer.flush();
        }
        history.close();
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        result.put("process", process);
        result.put("late_ms", late);
        result.put("warm_sent", warmSent);
        result.put("next_index", next);
        result.put("sent", sent);
        result.put("acked", acked.get());
        result.put("failed", failed.get());
        result.put("indeterminate", indeterminate.get());
        return result;
    }

    private ObjectNode sendValue(String topic, Integer partition, String key, String value) {
        ObjectNode v = EosimDriver.JSON.createObjectNode();
        v.put("topic", topic);
        if (partition == null) {
            v.putNull("partition");
        } else {
            v.put("partition", partition);
        }
        v.put("key", key);
        v.put("value", value);
        return v;
    }

    private void send(KafkaProducer<String, byte[]> producer, String topic, Integer partition,
            String key, String value, int valueBytes) {
        long id = history.nextId();
        history.op(id, "invoke", "send", process, sendValue(topic, partition, key, value), null);
        Callback callback = (RecordMetadata metadata, Exception error) -> {
            Integer p = partition;
            if (metadata != null && metadata.partition() >= 0) {
                p = metadata.partition();
            }
            ObjectNode v = sendValue(topic, p, key, value);
            if (error == null) {
                v.put("offset", metadata.hasOffset() ? metadata.offset() : -1L);
                acked.incrementAndGet();
                history.op(id, "ok", "send", process, v, null);
            } else if (Thread.currentThread() == sendingThread) {
                failed.incrementAndGet();
                history.op(id, "fail", "send", process, v, EosimDriver.describe(error));
            } else {
                indeterminate.incrementAndGet();
                history.op(id, "info", "send", process, v, EosimDriver.describe(error));
            }
        };
        sendingThread = Thread.currentThread();
        try {
            producer.send(Workloads.record(topic, partition, key, value, valueBytes), callback);
        } catch (RuntimeException e) {
            failed.incrementAndGet();
            history.op(id, "fail", "send", process, sendValue(topic, partition, key, value),
                    EosimDriver.describe(e));
        } finally {
            sendingThread = null;
        }
    }
}
