package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The {@code process} mode: eosim's ProcessorApp as a member of a consumer group, on Kafka's own
 * clients. A {@link KafkaConsumer} subscribes to the input topic (the classic protocol, the
 * spec's consumer settings) and a {@link KafkaProducer} writes the outputs.
 *
 * <p>The loop is the model's. A poll returns at most {@code batch} records
 * ({@code max.poll.records}). Each record is then processed for {@code processing} ms (fixed, or
 * uniform in {@code [min, max]}), and becomes a {@code process} op with the model's value:
 * {@code {input, outputs: ["value>name/incarnation"], output_topic, transactional_id}} (and,
 * when transactional, {@code transaction}: the number of its batch's transaction in this
 * incarnation), the output written {@code +k} for the k-th repeat of an input in this
 * incarnation. Then, by
 * {@code commit}:
 * <ul>
 *   <li>{@code after_output}: send, flush, commitSync;</li>
 *   <li>{@code before_output}: commitSync, send, flush;</li>
 *   <li>{@code auto}: send, flush; the consumer's auto-commit commits;</li>
 *   <li>transactional: beginTransaction, send, sendOffsetsToTransaction with the consumer's
 *       groupMetadata() (KIP-447), commitTransaction. An abortable error is aborted and the
 *       batch's partitions still assigned are sought back; a fatal one ends the process.</li>
 * </ul>
 *
 * <p>The group's story goes in {@code group} lines as the model writes them: {@code assigned}
 * (the generation and the whole assignment), {@code revoked}, {@code lost} (from the
 * ConsumerRebalanceListener), and {@code commit} for every commitSync (with when it was invoked,
 * the member and generation of the consumer's groupMetadata(), the offsets and the error).
 * Auto-commits are not visible to an application, so they have no line.
 *
 * <p>It runs until its {@code stop_file} exists, then until its polls have returned nothing for
 * {@code idle_ms} and the group has committed the whole input (the model's end of the group's
 * work); then it closes the consumer (which commits, with auto-commit, and leaves the group) and
 * the producer. A poll that throws ends it, as in the model.
 */
final class Processor {
    private final JsonNode spec;
    private final JsonNode workload;
    private final History history;
    private final Random random;
    private final String process;
    private final String name;
    private final Map<String, Integer> attempts = new HashMap<>();
    private KafkaConsumer<String, byte[]> consumer;
    private long processed;
    // Transactions begun by this incarnation: the number each transactional step carries.
    private long transactions;
    private long failed;

    Processor(JsonNode spec) {
        this.spec = spec;
        this.workload = EosimDriver.required(spec, "workload", "");
        for (String field : List.of("topic", "output_topic", "group", "commit")) {
            EosimDriver.required(workload, field, "workload.");
        }
        this.history = new History(spec);
        this.random = new Random(spec.path("seed").asLong(0) * 31 + spec.path("incarnation")
                .asInt(0));
        this.name = spec.get("name").asText();
        this.process = EosimDriver.process(spec, spec.path("incarnation").asInt(0));
    }

    private KafkaConsumer<String, byte[]> newConsumer() {
        Properties props = new Properties();
        for (var it = workload.path("consumer").fields(); it.hasNext(); ) {
            var e = it.next();
            if (!e.getValue().isNull()) {
                props.setProperty(e.getKey(), e.getValue().asText());
            }
        }
        props.setProperty("bootstrap.servers", spec.get("bootstrap").asText());
        props.setProperty("key.deserializer", StringDeserializer.class.getName());
        props.setProperty("value.deserializer", ByteArrayDeserializer.class.getName());
        props.setProperty("group.id", workload.get("group").asText());
        props.setProperty("max.poll.records", String.valueOf(Workloads.intField(workload, "batch",
                10)));
        props.setProperty("enable.auto.commit",
                String.valueOf(workload.get("commit").asText().equals("auto")));
        return new KafkaConsumer<>(props);
    }

    ObjectNode run() {
        String topic = workload.get("topic").asText();
        String outTopic = workload.get("output_topic").asText();
        boolean transactional = workload.path("transactional").asBoolean(false);
        String commit = workload.get("commit").asText();
        long idleMs = (long) Workloads.doubleField(workload, "idle_ms", 3_000.0);
        long pollMs = (long) Workloads.doubleField(workload, "poll_timeout", 1_000.0);
        String stopFile = spec.path("stop_file").asText(null);
        Workloads.sleepUntilRunTime(history, Workloads.doubleField(workload, "start", 0.0));
        Properties producerProps = Workloads.producerProperties(spec);
        String transactionalId = producerProps.getProperty("transactional.id");
        KafkaProducer<String, byte[]> producer = new KafkaProducer<>(producerProps);
        if (transactional) {
            producer.initTransactions();
        }
        consumer = newConsumer();
        consumer.subscribe(List.of(topic), new Listener());
        long idleSince = -1;
        long nextCaughtUpCheck = 0;
        String endedBy = null;
        try {
            while (true) {
                boolean stopping = stopFile != null && Files.exists(Path.of(stopFile));
                ConsumerRecords<String, byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(pollMs));
                } catch (WakeupException e) {
                    break;
                } catch (RuntimeException e) {
                    history.failedNow("poll", process, EosimDriver.describe(e));
                    endedBy = EosimDriver.describe(e);
                    break;
                }
                if (records.isEmpty()) {
                    long now = System.nanoTime();
                    if (idleSince < 0) {
                        idleSince = now;
                    }
                    if (stopping && now - idleSince >= idleMs * 1_000_000L
                            && now >= nextCaughtUpCheck) {
                        if (groupCaughtUp(topic)) {
                            break;
                        }
                        nextCaughtUpCheck = now + 1_000_000_000L;
                    }
                    continue;
                }
                idleSince = -1;
                List<ConsumerRecord<String, byte[]>> batch = new ArrayList<>();
                records.forEach(batch::add);
                processingTime(batch.size());
                if (transactional) {
                    if (!transaction(producer, batch, outTopic, transactionalId)) {
                        endedBy = "fatal";
                        break;
                    }
                } else {
                    atLeastOrMostOnce(producer, batch, outTopic, commit);
                }
            }
        } finally {
            try {
                consumer.close(Duration.ofSeconds(30));
            } catch (RuntimeException ignored) {
                // the history says what happened before
            }
            producer.close(Duration.ofSeconds(30));
        }
        history.close();
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        result.put("process", process);
        result.put("processed", processed);
        result.put("failed", failed);
        if (endedBy != null) {
            result.put("ended_by", endedBy);
        }
        return result;
    }

    /**
     * Whether the group has committed every partition of {@code topic} to its end (the last
     * stable offset under read_committed): the group's work is done, as the model's
     * GroupMembers decides it, so a member may leave without handing unfinished work over.
     */
    private boolean groupCaughtUp(String topic) {
        try {
            Set<TopicPartition> tps = new HashSet<>();
            for (PartitionInfo info : consumer.partitionsFor(topic, Duration.ofSeconds(10))) {
                tps.add(new TopicPartition(topic, info.partition()));
            }
            Map<TopicPartition, Long> end = consumer.endOffsets(tps, Duration.ofSeconds(10));
            Map<TopicPartition, OffsetAndMetadata> committed =
                    consumer.committed(tps, Duration.ofSeconds(10));
            for (TopicPartition tp : tps) {
                OffsetAndMetadata c = committed.get(tp);
                if ((c == null ? 0L : c.offset()) < end.getOrDefault(tp, 0L)) {
                    return false;
                }
            }
            return true;
        } catch (RuntimeException e) {
            return false;
        }
    }

    private void processingTime(int records) {
        JsonNode p = workload.path("processing");
        double took = 0.0;
        if (p.isObject()) {
            double min = p.path("min").asDouble(0.0);
            double max = p.path("max").asDouble(0.0);
            for (int i = 0; i < records; i++) {
                took += min + random.nextDouble() * (max - min);
            }
        } else {
            took = p.asDouble(0.0) * records;
        }
        if (took > 0) {
            Workloads.parkUntil(System.nanoTime() + (long) (took * 1e6));
        }
    }

    private String output(ConsumerRecord<String, byte[]> r) {
        String value = new String(r.value(), StandardCharsets.UTF_8);
        String key = r.topic() + "-" + r.partition() + "@" + r.offset();
        int n = attempts.merge(key, 1, Integer::sum);
        String out = value + ">" + process;
        return n > 1 ? out + "+" + (n - 1) : out;
    }

    /** One process op per record, invoked now; returns their ids and outputs. */
    private List<Object[]> invoke(List<ConsumerRecord<String, byte[]>> batch, String outTopic,
            String transactionalId) {
        List<Object[]> ops = new ArrayList<>();
        if (transactionalId != null) {
            transactions++;
        }
        for (ConsumerRecord<String, byte[]> r : batch) {
            String out = output(r);
            ObjectNode value = EosimDriver.JSON.createObjectNode();
            ObjectNode input = value.putObject("input");
            input.put("topic", r.topic());
            input.put("partition", r.partition());
            input.put("offset", r.offset());
            input.put("value", new String(r.value(), StandardCharsets.UTF_8));
            value.putArray("outputs").add(out);
            value.put("output_topic", outTopic);
            if (transactionalId == null) {
                value.putNull("transactional_id");
            } else {
                value.put("transactional_id", transactionalId);
                value.put("transaction", transactions);
            }
            long id = history.nextId();
            history.op(id, "invoke", "process", process, value, null);
            ops.add(new Object[] {id, out});
        }
        return ops;
    }

    private static Map<TopicPartition, OffsetAndMetadata> nextOffsets(
            List<ConsumerRecord<String, byte[]>> batch) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (ConsumerRecord<String, byte[]> r : batch) {
            TopicPartition tp = new TopicPartition(r.topic(), r.partition());
            long next = r.offset() + 1;
            OffsetAndMetadata had = out.get(tp);
            if (had == null || had.offset() < next) {
                out.put(tp, new OffsetAndMetadata(next));
            }
        }
        return out;
    }

    private void atLeastOrMostOnce(KafkaProducer<String, byte[]> producer,
            List<ConsumerRecord<String, byte[]>> batch, String outTopic, String commit) {
        List<Object[]> ops = invoke(batch, outTopic, null);
        Map<TopicPartition, OffsetAndMetadata> offsets = nextOffsets(batch);
        if (commit.equals("before_output")) {
            commitSync(offsets);
        }
        AtomicReference<String> error = new AtomicReference<>();
        for (Object[] op : ops) {
            producer.send(Workloads.record(outTopic, null, null, (String) op[1], 0),
                    (metadata, e) -> {
                        if (e != null) {
                            error.compareAndSet(null, EosimDriver.describe(e));
                        }
                    });
        }
        producer.flush();
        if (commit.equals("after_output")) {
            commitSync(offsets);
        }
        for (Object[] op : ops) {
            if (error.get() == null) {
                processed++;
                history.op((Long) op[0], "ok", "process", process, null, null);
            } else {
                failed++;
                history.op((Long) op[0], "info", "process", process, null, error.get());
            }
        }
    }

    /** One transaction for the batch; false when the producer failed for good. */
    private boolean transaction(KafkaProducer<String, byte[]> producer,
            List<ConsumerRecord<String, byte[]>> batch, String outTopic, String transactionalId) {
        List<Object[]> ops = invoke(batch, outTopic, transactionalId);
        try {
            producer.beginTransaction();
            for (Object[] op : ops) {
                producer.send(Workloads.record(outTopic, null, null, (String) op[1], 0));
            }
            producer.sendOffsetsToTransaction(nextOffsets(batch), consumer.groupMetadata());
            producer.commitTransaction();
            for (Object[] op : ops) {
                processed++;
                history.op((Long) op[0], "ok", "process", process, null, null);
            }
            return true;
        } catch (ProducerFencedException | FencedInstanceIdException e) {
            for (Object[] op : ops) {
                history.op((Long) op[0], "info", "process", process, null,
                        EosimDriver.describe(e));
            }
            return false;
        } catch (RuntimeException e) {
            String error = EosimDriver.describe(e);
            try {
                producer.abortTransaction();
            } catch (RuntimeException abortError) {
                for (Object[] op : ops) {
                    history.op((Long) op[0], "info", "process", process, null,
                            error + "; abort failed: " + EosimDriver.describe(abortError));
                }
                return false;
            }
            for (Object[] op : ops) {
                failed++;
                history.op((Long) op[0], "fail", "process", process, null, error);
            }
            rewind(batch);
            return true;
        }
    }

    /** Seek the batch's partitions this member still owns back to the batch's first offsets. */
    private void rewind(List<ConsumerRecord<String, byte[]>> batch) {
        Map<TopicPartition, Long> first = new HashMap<>();
        for (ConsumerRecord<String, byte[]> r : batch) {
            first.putIfAbsent(new TopicPartition(r.topic(), r.partition()), r.offset());
        }
        for (Map.Entry<TopicPartition, Long> e : first.entrySet()) {
            if (consumer.assignment().contains(e.getKey())) {
                consumer.seek(e.getKey(), e.getValue());
            }
        }
    }

    /** commitSync of {@code offsets}, with its {@code commit} group line. */
    private void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
        double invoked = history.now();
        var meta = consumer.groupMetadata();
        String error = null;
        try {
            consumer.commitSync(offsets);
        } catch (RuntimeException e) {
            error = EosimDriver.describe(e);
        }
        ObjectNode line = groupLine("commit", meta.memberId());
        line.put(epochKey(), meta.generationId());
        line.put("invoked", invoked);
        ArrayNode listed = line.putArray("offsets");
        TreeMap<String, Object[]> sorted = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            sorted.put(String.format("%s\u0000%09d", e.getKey().topic(), e.getKey().partition()),
                    new Object[] {e.getKey(), e.getValue().offset()});
        }
        for (Object[] entry : sorted.values()) {
            TopicPartition tp = (TopicPartition) entry[0];
            ObjectNode o = listed.addObject();
            o.put("topic", tp.topic());
            o.put("partition", tp.partition());
            o.put("offset", (Long) entry[1]);
        }
        if (error != null) {
            line.put("error", error);
        }
        history.write(line);
    }

    /**
     * A classic group's lines carry its generation; a consumer group's (KIP-848) the member's
     * epoch, which groupMetadata().generationId() is under that protocol.
     */
    private String epochKey() {
        JsonNode protocol = workload.get("consumer").get("group.protocol");
        return protocol != null && protocol.asText().equals("consumer") ? "epoch" : "generation";
    }

    private ObjectNode groupLine(String event, String member) {
        ObjectNode line = EosimDriver.JSON.createObjectNode();
        line.put("kind", "group");
        line.put("time", history.now());
        line.put("process", process);
        line.put("group", workload.get("group").asText());
        line.put("event", event);
        line.put("member", member);
        return line;
    }

    private static void listPartitions(ObjectNode line, Collection<TopicPartition> partitions) {
        ArrayNode listed = line.putArray("partitions");
        List<TopicPartition> sorted = new ArrayList<>(partitions);
        sorted.sort((a, b) -> a.topic().equals(b.topic())
                ? Integer.compare(a.partition(), b.partition())
                : a.topic().compareTo(b.topic()));
        for (TopicPartition tp : sorted) {
            ObjectNode o = listed.addObject();
            o.put("topic", tp.topic());
            o.put("partition", tp.partition());
        }
    }

    /** The group's story, as the model's processor records it. */
    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            givenUp("revoked", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            givenUp("lost", partitions);
        }

        private void givenUp(String event, Collection<TopicPartition> partitions) {
            if (!partitions.isEmpty()) {
                ObjectNode line = groupLine(event, consumer.groupMetadata().memberId());
                listPartitions(line, partitions);
                history.write(line);
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            var meta = consumer.groupMetadata();
            ObjectNode line = groupLine("assigned", meta.memberId());
            line.put(epochKey(), meta.generationId());
            listPartitions(line, consumer.assignment());
            history.write(line);
        }
    }
}
