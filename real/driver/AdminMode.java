package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The {@code admin} mode: one action on the cluster through Kafka's {@link Admin} client, its
 * result as one JSON object on stdout.
 *
 * <ul>
 *   <li>{@code recreate_topics}: {@code topics: [{name, partitions, replication_factor,
 *       configs}]}. Deletes those that exist (Admin.deleteTopics) and waits until the topic list
 *       no longer names them, creates them (Admin.createTopics; a TopicExistsException while
 *       the old topic's deletion completes is retried), and waits until every partition has a
 *       leader and a full ISR. Result: as {@code describe}.
 *   <li>{@code describe}: {@code topics: [names]}. Result: {@code partitions: [{topic,
 *       partition, leader (node id or null), replicas, isr, elr}]}, from Admin.describeTopics.
 *   <li>{@code delete_records}: {@code records: [{topic, partition, offset}]}
 *       (Admin.deleteRecords). Result: {@code low_watermarks: [{topic, partition,
 *       low_watermark}]}.
 * </ul>
 *
 * Every action gives up after {@code timeout_ms} (default 60000).
 */
final class AdminMode {
    private final JsonNode spec;
    private final JsonNode action;
    private final long deadline;

    AdminMode(JsonNode spec) {
        this.spec = spec;
        this.action = EosimDriver.required(spec, "action", "");
        EosimDriver.required(action, "name", "action.");
        long timeoutMs = action.path("timeout_ms").asLong(60_000);
        this.deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    }

    ObjectNode run() throws Exception {
        String name = action.get("name").asText();
        try (Admin admin = Admin.create(EosimDriver.clientProperties(spec))) {
            return switch (name) {
                case "recreate_topics" -> recreate(admin);
                case "describe" -> describe(admin, names(action.path("topics")));
                case "delete_records" -> deleteRecords(admin);
                default -> throw new EosimDriver.SpecException("action.name: expected "
                        + "recreate_topics, describe or delete_records, got '" + name + "'");
            };
        }
    }

    private static List<String> names(JsonNode topics) {
        List<String> names = new ArrayList<>();
        for (JsonNode t : topics) {
            names.add(t.isObject() ? t.get("name").asText() : t.asText());
        }
        return names;
    }

    private void check(String what) {
        if (System.nanoTime() > deadline) {
            throw new IllegalStateException("timed out: " + what);
        }
    }

    private static void pause() {
        Workloads.parkUntil(System.nanoTime() + 100_000_000L);
    }

    private ObjectNode recreate(Admin admin) throws Exception {
        JsonNode topics = EosimDriver.required(action, "topics", "action.");
        List<String> names = names(topics);
        Set<String> existing = new TreeSet<>(admin.listTopics().names().get());
        existing.retainAll(names);
        if (!existing.isEmpty()) {
            try {
                admin.deleteTopics(existing).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                    throw e;
                }
            }
            while (true) {
                Set<String> left = new TreeSet<>(admin.listTopics().names().get());
                left.retainAll(existing);
                if (left.isEmpty()) {
                    break;
                }
                check("topics " + left + " still listed after deletion");
                pause();
            }
        }
        Map<String, NewTopic> wanted = new LinkedHashMap<>();
        for (JsonNode t : topics) {
            String topic = EosimDriver.required(t, "name", "action.topics[].").asText();
            NewTopic nt = new NewTopic(topic, t.path("partitions").asInt(1),
                    (short) t.path("replication_factor").asInt(1));
            Map<String, String> configs = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = t.path("configs").fields();
                    it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                configs.put(e.getKey(), e.getValue().asText());
            }
            wanted.put(topic, nt.configs(configs));
        }
        while (!wanted.isEmpty()) {
            Map<String, KafkaFuture<Void>> results =
                    admin.createTopics(wanted.values()).values();
            for (Map.Entry<String, KafkaFuture<Void>> e : results.entrySet()) {
                try {
                    e.getValue().get();
                    wanted.remove(e.getKey());
                } catch (ExecutionException err) {
                    if (!(err.getCause() instanceof TopicExistsException)) {
                        throw err;
                    }
                }
            }
            if (!wanted.isEmpty()) {
                check("could not create " + wanted.keySet() + " (the old topics are still "
                        + "being deleted)");
                pause();
            }
        }
        while (true) {
            String notReady = notReady(admin, names);
            if (notReady == null) {
                try {
                    return describe(admin, names);
                } catch (ExecutionException e) {
                    // Another broker answered, one that has not heard of the topics yet.
                    if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                        throw e;
                    }
                    notReady = "topics not yet known to every broker: " + EosimDriver.describe(e);
                }
            }
            check(notReady);
            pause();
        }
    }

    /** Why the topics are not ready (a partition without a leader or a full ISR), or null. */
    private static String notReady(Admin admin, List<String> names) throws Exception {
        Map<String, TopicDescription> described;
        try {
            described = admin.describeTopics(names).allTopicNames().get();
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                return "topics not yet known: " + EosimDriver.describe(e);
            }
            throw e;
        }
        for (String name : names) {
            for (TopicPartitionInfo p : described.get(name).partitions()) {
                if (p.leader() == null || p.leader().isEmpty()) {
                    return name + "-" + p.partition() + " has no leader";
                }
                if (p.isr().size() < p.replicas().size()) {
                    return name + "-" + p.partition() + " has ISR " + ids(p.isr())
                            + " of replicas " + ids(p.replicas());
                }
            }
        }
        return null;
    }

    private static List<Integer> ids(List<Node> nodes) {
        List<Integer> ids = new ArrayList<>();
        for (Node n : nodes) {
            ids.add(n.id());
        }
        return ids;
    }

    private static ArrayNode idArray(ObjectNode parent, String field, List<Node> nodes) {
        ArrayNode array = parent.putArray(field);
        for (Node n : nodes) {
            array.add(n.id());
        }
        return array;
    }

    private ObjectNode describe(Admin admin, List<String> names) throws Exception {
        Map<String, TopicDescription> described = admin.describeTopics(names).allTopicNames().get();
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        ArrayNode partitions = result.putArray("partitions");
        for (String name : names) {
            for (TopicPartitionInfo p : described.get(name).partitions()) {
                ObjectNode o = partitions.addObject();
                o.put("topic", name);
                o.put("partition", p.partition());
                if (p.leader() == null || p.leader().isEmpty()) {
                    o.putNull("leader");
                } else {
                    o.put("leader", p.leader().id());
                }
                idArray(o, "replicas", p.replicas());
                idArray(o, "isr", p.isr());
                idArray(o, "elr", p.elr() == null ? List.of() : p.elr());
            }
        }
        return result;
    }

    private ObjectNode deleteRecords(Admin admin) throws Exception {
        Map<TopicPartition, RecordsToDelete> request = new LinkedHashMap<>();
        for (JsonNode r : EosimDriver.required(action, "records", "action.")) {
            request.put(new TopicPartition(r.get("topic").asText(), r.get("partition").asInt()),
                    RecordsToDelete.beforeOffset(r.get("offset").asLong()));
        }
        Map<TopicPartition, KafkaFuture<DeletedRecords>> results =
                admin.deleteRecords(request).lowWatermarks();
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        ArrayNode marks = result.putArray("low_watermarks");
        for (TopicPartition tp : request.keySet()) {
            marks.addObject()
                    .put("topic", tp.topic())
                    .put("partition", tp.partition())
                    .put("low_watermark", results.get(tp).get().lowWatermark());
        }
        return result;
    }
}
