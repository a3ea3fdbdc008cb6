package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.record.TimestampType;

/**
 * The {@code drain} mode: the final reads of a run, after the workload and the faults.
 *
 * <ol>
 *   <li>A {@link KafkaConsumer} with read_uncommitted reads every partition of the listed topics
 *       from its log start ({@code beginningOffsets}) to its end ({@code endOffsets}, the high
 *       watermark) and writes one {@code log} line per partition: {@code records} of
 *       {@code {offset, value}} (plus {@code time} when the topic stamps LogAppendTime), and
 *       {@code log_start_offset} when above 0; with the spec's {@code node_names}, a replicated
 *       partition's line adds {@code leader} and {@code high_watermark} as the model's. Control records (transaction markers) are not
 *       returned to consumers, so offsets have gaps. A partition not read to its end within the
 *       timeout gets no {@code log} line (a partial one would claim writes lost), and the result
 *       lists it under {@code incomplete}. A consumer cannot see the markers, so a record the
 *       read_committed pass below skipped although it lies below the last stable offset is
 *       marked {@code "aborted": true} (only for partitions that pass read to its end).
 *   <li>With {@code committed} (default true), as the model's final drain: a fresh read_committed
 *       consumer reads every partition from its start to its last stable offset
 *       ({@code endOffsets} under read_committed), each non-empty poll a {@code poll} op of this
 *       process; then one {@code lso} line per partition: {@code lso}, {@code log_end_offset}
 *       (the read_uncommitted end) and {@code open_transactions}, the producers whose
 *       transaction is still open there ({@code Admin.describeProducers}, its
 *       {@code currentTransactionStartOffset}).
 * </ol>
 */
final class Drain {
    private final JsonNode spec;
    private final JsonNode workload;
    private final History history;
    private final double epochMs;

    Drain(JsonNode spec) {
        this.spec = spec;
        this.workload = EosimDriver.required(spec, "workload", "");
        EosimDriver.required(workload, "topics", "workload.");
        this.history = new History(spec);
        this.epochMs = spec.path("epoch_ms").asDouble(0);
    }

    ObjectNode run() throws Exception {
        long timeoutMs = (long) Workloads.doubleField(workload, "timeout_ms", 60_000.0);
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        boolean committed = workload.path("committed").asBoolean(true);
        List<TopicPartition> tps = new ArrayList<>();
        Map<TopicPartition, Long> ends;
        Set<TopicPartition> incomplete = new LinkedHashSet<>();
        // Written after the read_committed pass, which tells which records were aborted.
        List<ObjectNode> logLines = new ArrayList<>();
        try (KafkaConsumer<String, byte[]> consumer =
                Consume.consumer(spec, "read_uncommitted", "earliest")) {
            for (JsonNode topic : workload.get("topics")) {
                tps.addAll(Consume.partitions(consumer, topic.asText(), timeoutMs));
            }
            consumer.assign(tps);
            Map<TopicPartition, Long> starts = consumer.beginningOffsets(tps);
            ends = consumer.endOffsets(tps);
            Map<TopicPartition, ArrayNode> records = new LinkedHashMap<>();
            for (TopicPartition tp : tps) {
                records.put(tp, EosimDriver.JSON.createArrayNode());
            }
            consumer.seekToBeginning(tps);
            Set<TopicPartition> pending = readTo(consumer, tps, ends, deadline, polled -> {
                for (ConsumerRecord<String, byte[]> r : polled) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (r.offset() >= ends.get(tp)) {
                        continue;
                    }
                    ObjectNode rec = records.get(tp).addObject();
                    rec.put("offset", r.offset());
                    rec.put("value", new String(r.value(), StandardCharsets.UTF_8));
                    if (r.timestampType() == TimestampType.LOG_APPEND_TIME) {
                        rec.put("time", r.timestamp() - epochMs);
                    }
                }
            });
            incomplete.addAll(pending);
            Map<TopicPartition, String[]> leaders = replicatedLeaders(tps);
            for (TopicPartition tp : tps) {
                if (pending.contains(tp)) {
                    continue;
                }
                ObjectNode line = EosimDriver.JSON.createObjectNode();
                line.put("kind", "log");
                line.put("topic", tp.topic());
                line.put("partition", tp.partition());
                ArrayNode recs = records.get(tp);
                long start = starts.get(tp);
                if (!recs.isEmpty()) {
                    start = Math.min(start, recs.get(0).get("offset").asLong());
                }
                if (start > 0) {
                    line.put("log_start_offset", start);
                }
                String[] leader = leaders.get(tp);
                if (leader != null) {
                    // A replicated partition, as the model writes it: its leader (null when
                    // offline) and the high watermark, the end a read_uncommitted read reaches.
                    line.put("leader", leader[0]);
                    line.put("high_watermark", ends.get(tp));
                }
                line.set("records", recs);
                logLines.add(line);
            }
        }
        if (committed) {
            Map<TopicPartition, Set<Long>> read = readCommitted(tps, ends, deadline, incomplete);
            for (ObjectNode line : logLines) {
                TopicPartition tp =
                        new TopicPartition(line.get("topic").asText(), line.get("partition").asInt());
                markAborted(line, read.get(tp), lsos.get(tp));
            }
        }
        for (ObjectNode line : logLines) {
            history.write(line);
        }
        history.close();
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        result.put("partitions", tps.size());
        ArrayNode missing = result.putArray("incomplete");
        for (TopicPartition tp : incomplete) {
            missing.addObject().put("topic", tp.topic()).put("partition", tp.partition());
        }
        return result;
    }

    /**
     * Marks {@code "aborted": true} on the records of a {@code log} line below the partition's
     * last stable offset that the read_committed pass did not return ({@code committed}, null
     * when that pass did not reach the LSO: nothing is marked then).
     */
    static void markAborted(ObjectNode line, Set<Long> committed, Long lso) {
        if (committed == null || lso == null) {
            return;
        }
        for (JsonNode rec : line.get("records")) {
            long offset = rec.get("offset").asLong();
            if (offset < lso && !committed.contains(offset)) {
                ((ObjectNode) rec).put("aborted", true);
            }
        }
    }

    /** The last stable offsets the read_committed pass read to. */
    private final Map<TopicPartition, Long> lsos = new HashMap<>();

    /**
     * The read_committed pass: its polls, the {@code lso} lines, and per partition read to its
     * LSO the offsets it returned (partitions it did not finish are absent).
     */
    private Map<TopicPartition, Set<Long>> readCommitted(List<TopicPartition> tps,
            Map<TopicPartition, Long> logEnds, long deadline, Set<TopicPartition> incomplete)
            throws Exception {
        String process = EosimDriver.process(spec, spec.path("incarnation").asInt(0));
        Map<TopicPartition, Set<Long>> read = new HashMap<>();
        for (TopicPartition tp : tps) {
            read.put(tp, new HashSet<>());
        }
        try (KafkaConsumer<String, byte[]> consumer =
                Consume.consumer(spec, "read_committed", "earliest")) {
            consumer.assign(tps);
            lsos.putAll(consumer.endOffsets(tps));
            consumer.seekToBeginning(tps);
            Set<TopicPartition> unfinished = readTo(consumer, tps, lsos, deadline, polled -> {
                Consume.recordPoll(history, process, polled, "read_committed");
                for (ConsumerRecord<String, byte[]> r : polled) {
                    read.get(new TopicPartition(r.topic(), r.partition())).add(r.offset());
                }
            });
            incomplete.addAll(unfinished);
            for (TopicPartition tp : unfinished) {
                read.remove(tp);
            }
        }
        Map<TopicPartition, List<long[]>> open = openTransactions(tps);
        for (TopicPartition tp : tps) {
            ObjectNode line = EosimDriver.JSON.createObjectNode();
            line.put("kind", "lso");
            line.put("topic", tp.topic());
            line.put("partition", tp.partition());
            line.put("lso", lsos.get(tp));
            line.put("log_end_offset", logEnds.get(tp));
            ArrayNode txns = line.putArray("open_transactions");
            for (long[] t : open.getOrDefault(tp, List.of())) {
                txns.addObject().put("producer_id", t[0]).put("first_offset", t[1]);
            }
            history.write(line);
        }
        return read;
    }

    /**
     * With the spec's {@code node_names} (node id to eosim's name, {@code {"1": "broker-0"}}),
     * the leader's name of each partition with more than one replica (Admin.describeTopics);
     * a one-element array holding null for an offline one. Empty without {@code node_names}.
     */
    private Map<TopicPartition, String[]> replicatedLeaders(List<TopicPartition> tps)
            throws Exception {
        Map<TopicPartition, String[]> leaders = new HashMap<>();
        JsonNode names = spec.get("node_names");
        if (names == null || !names.isObject()) {
            return leaders;
        }
        Set<String> topics = new LinkedHashSet<>();
        for (TopicPartition tp : tps) {
            topics.add(tp.topic());
        }
        try (Admin admin = Admin.create(EosimDriver.clientProperties(spec))) {
            Map<String, TopicDescription> described =
                    admin.describeTopics(topics).allTopicNames().get();
            for (TopicDescription d : described.values()) {
                for (TopicPartitionInfo p : d.partitions()) {
                    if (p.replicas().size() < 2) {
                        continue;
                    }
                    String leader = null;
                    if (p.leader() != null && !p.leader().isEmpty()) {
                        JsonNode name = names.get(Integer.toString(p.leader().id()));
                        leader = name == null ? Integer.toString(p.leader().id()) : name.asText();
                    }
                    leaders.put(new TopicPartition(d.name(), p.partition()),
                            new String[] {leader});
                }
            }
        }
        return leaders;
    }

    /** Per partition, (producer id, first offset) of each transaction still open there. */
    private Map<TopicPartition, List<long[]>> openTransactions(List<TopicPartition> tps)
            throws Exception {
        Map<TopicPartition, List<long[]>> open = new HashMap<>();
        try (Admin admin = Admin.create(EosimDriver.clientProperties(spec))) {
            Map<TopicPartition, PartitionProducerState> states =
                    admin.describeProducers(tps).all().get();
            for (Map.Entry<TopicPartition, PartitionProducerState> e : states.entrySet()) {
                List<long[]> list = new ArrayList<>();
                for (ProducerState p : e.getValue().activeProducers()) {
                    if (p.currentTransactionStartOffset().isPresent()) {
                        list.add(new long[] {p.producerId(),
                                p.currentTransactionStartOffset().getAsLong()});
                    }
                }
                list.sort((a, b) -> Long.compare(a[1], b[1]));
                open.put(e.getKey(), list);
            }
        }
        return open;
    }

    interface Sink {
        void accept(ConsumerRecords<String, byte[]> records);
    }

    /**
     * Poll until every partition's position reaches its target offset (or the deadline); the
     * partitions that did not. The position passes control records and, under read_committed,
     * aborted data too, so it reaches the end even when the last batches are markers.
     */
    private static Set<TopicPartition> readTo(KafkaConsumer<String, byte[]> consumer,
            List<TopicPartition> tps, Map<TopicPartition, Long> targets, long deadline,
            Sink sink) {
        Set<TopicPartition> pending = new LinkedHashSet<>(tps);
        while (true) {
            pending.removeIf(tp -> consumer.position(tp) >= targets.get(tp));
            if (pending.isEmpty() || System.nanoTime() > deadline) {
                return pending;
            }
            ConsumerRecords<String, byte[]> polled = consumer.poll(Duration.ofMillis(200));
            if (!polled.isEmpty()) {
                sink.accept(polled);
            }
        }
    }
}
