package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.protocol.Errors;

/**
 * The {@code admin} mode: one action on the cluster through Kafka's {@link Admin} client, its
 * result as one JSON object on stdout.
 *
 * <ul>
 *   <li>{@code recreate_topics}: {@code topics: [{name, partitions, replication_factor,
 *       config, assignment}]}. Deletes those that exist (Admin.deleteTopics) and waits until the
 *       topic list no longer names them, creates them (Admin.createTopics; a TopicExistsException
 *       while the old topic's deletion completes is retried) with {@code config} as topic
 *       configs and, when given, {@code assignment} (per partition, its replicas' node ids, the
 *       preferred leader first) as the replica assignment, waits until every partition has
 *       a leader and a full ISR, and then until each is led by its first replica (preferred
 *       leader elections). Result: as {@code describe}, plus {@code configs}: each
 *       topic's configs set on the topic itself (DescribeConfigs, source DYNAMIC_TOPIC_CONFIG).
 *   <li>{@code place_internal}: {@code topics: [{name, assignment}]}, internal topics
 *       ({@code __transaction_state}, {@code __consumer_offsets}). Creates each that does not
 *       exist yet the way a client does (a FindCoordinator through describeTransactions or
 *       describeConsumerGroups), reorders the replicas of every partition whose replica list
 *       differs from {@code assignment} (alterPartitionReassignments, waiting until none is in
 *       progress), then runs a preferred leader election (electLeaders) until every partition
 *       is led by its first replica. Result: {@code {reassigned, elected}} counts.
 *   <li>{@code describe}: {@code topics: [names]}. Result: {@code partitions: [{topic,
 *       partition, leader (node id or null), replicas, isr, elr}]}, from Admin.describeTopics.
 *   <li>{@code delete_records}: {@code records: [{topic, partition, offset}]}, offset -1 for
 *       the high watermark (Admin.deleteRecords). Result: {@code low_watermarks: [{topic,
 *       partition, low_watermark, error}]}: the error's name ({@code NONE}, or the one the
 *       admin client gave up with, low_watermark -1).
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
                case "place_internal" -> placeInternal(admin);
                default -> throw new EosimDriver.SpecException("action.name: expected "
                        + "recreate_topics, describe, delete_records or place_internal, got '"
                        + name + "'");
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
        Map<TopicPartition, List<Integer>> assignments = new LinkedHashMap<>();
        for (JsonNode t : topics) {
            String topic = EosimDriver.required(t, "name", "action.topics[].").asText();
            NewTopic nt;
            if (t.has("assignment")) {
                Map<Integer, List<Integer>> replicas = assignment(t.get("assignment"));
                replicas.forEach((p, ids) -> assignments.put(new TopicPartition(topic, p), ids));
                nt = new NewTopic(topic, replicas);
            } else {
                nt = new NewTopic(topic, t.path("partitions").asInt(1),
                        (short) t.path("replication_factor").asInt(1));
            }
            Map<String, String> configs = new HashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = t.path("config").fields();
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
                    electPreferred(admin, names, assignments);
                    ObjectNode result = describe(admin, names);
                    result.set("configs", topicConfigs(admin, names));
                    return result;
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

    /** Per partition (0, 1, ...), its replicas' node ids, the preferred leader first. */
    private static Map<Integer, List<Integer>> assignment(JsonNode partitions) {
        Map<Integer, List<Integer>> result = new LinkedHashMap<>();
        int partition = 0;
        for (JsonNode replicas : partitions) {
            List<Integer> ids = new ArrayList<>();
            for (JsonNode id : replicas) {
                ids.add(id.asInt());
            }
            result.put(partition++, ids);
        }
        return result;
    }

    /** Each topic's configs set on the topic itself (not the broker's or Kafka's defaults). */
    private static ObjectNode topicConfigs(Admin admin, List<String> names) throws Exception {
        List<ConfigResource> resources = new ArrayList<>();
        for (String name : names) {
            resources.add(new ConfigResource(ConfigResource.Type.TOPIC, name));
        }
        Map<ConfigResource, Config> configs = admin.describeConfigs(resources).all().get();
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        for (ConfigResource r : resources) {
            ObjectNode topic = result.putObject(r.name());
            for (ConfigEntry e : configs.get(r).entries()) {
                if (e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) {
                    topic.put(e.name(), e.value());
                }
            }
        }
        return result;
    }

    private ObjectNode placeInternal(Admin admin) throws Exception {
        Map<TopicPartition, List<Integer>> wanted = new LinkedHashMap<>();
        List<String> names = new ArrayList<>();
        for (JsonNode t : EosimDriver.required(action, "topics", "action.")) {
            String name = EosimDriver.required(t, "name", "action.topics[].").asText();
            names.add(name);
            Map<Integer, List<Integer>> a =
                    assignment(EosimDriver.required(t, "assignment", "action.topics[]."));
            a.forEach((p, ids) -> wanted.put(new TopicPartition(name, p), ids));
        }
        for (String name : names) {
            createInternal(admin, name);
        }
        Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new LinkedHashMap<>();
        for (Map.Entry<TopicPartition, TopicPartitionInfo> e : partitions(admin, names).entrySet()) {
            List<Integer> want = wanted.get(e.getKey());
            if (want != null && !ids(e.getValue().replicas()).equals(want)) {
                moves.put(e.getKey(), Optional.of(new NewPartitionReassignment(want)));
            }
        }
        if (!moves.isEmpty()) {
            admin.alterPartitionReassignments(moves).all().get();
            while (!admin.listPartitionReassignments(moves.keySet()).reassignments().get()
                    .isEmpty()) {
                check("reassignments of " + moves.size() + " internal partitions in progress");
                pause();
            }
        }
        int elected = electPreferred(admin, names, wanted);
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        result.put("reassigned", moves.size());
        result.put("elected", elected);
        return result;
    }

    /**
     * Preferred leader elections (Admin.electLeaders) until every partition of {@code wanted}
     * is led by its first replica; the number of elections that succeeded. A topic created
     * while its first replica's broker was down (restarting after an earlier run's crash) gets
     * another leader and keeps it: Kafka moves it back only after
     * leader.imbalance.check.interval.seconds.
     */
    private int electPreferred(Admin admin, List<String> names,
            Map<TopicPartition, List<Integer>> wanted) throws Exception {
        int elected = 0;
        while (true) {
            Set<TopicPartition> misled = new TreeSet<>(
                    Comparator.comparing(TopicPartition::topic)
                            .thenComparingInt(TopicPartition::partition));
            for (Map.Entry<TopicPartition, TopicPartitionInfo> e :
                    partitions(admin, names).entrySet()) {
                List<Integer> want = wanted.get(e.getKey());
                Node leader = e.getValue().leader();
                if (want != null && (leader == null || leader.isEmpty()
                        || leader.id() != want.get(0))) {
                    misled.add(e.getKey());
                }
            }
            if (misled.isEmpty()) {
                return elected;
            }
            check(misled.size() + " partitions not led by their preferred replica, e.g. "
                    + misled.iterator().next());
            Map<TopicPartition, Optional<Throwable>> results =
                    admin.electLeaders(ElectionType.PREFERRED, misled).partitions().get();
            for (Optional<Throwable> error : results.values()) {
                if (error.isEmpty()) {
                    elected++;
                }
            }
            pause();
        }
    }

    /** Create an internal topic as a client's FindCoordinator does, if it does not exist. */
    private void createInternal(Admin admin, String name) throws Exception {
        ListTopicsOptions internal = new ListTopicsOptions().listInternal(true);
        while (!admin.listTopics(internal).names().get().contains(name)) {
            try {
                if (name.equals("__transaction_state")) {
                    admin.describeTransactions(List.of("eosim-place-internal")).all().get();
                } else {
                    admin.describeConsumerGroups(List.of("eosim-place-internal")).all().get();
                }
            } catch (ExecutionException e) {
                // Expected: no such transactional id or group; the lookup created the topic.
            }
            check(name + " not created");
            pause();
        }
    }

    private static Map<TopicPartition, TopicPartitionInfo> partitions(Admin admin,
            List<String> names) throws Exception {
        Map<TopicPartition, TopicPartitionInfo> result = new LinkedHashMap<>();
        for (Map.Entry<String, TopicDescription> e :
                admin.describeTopics(names).allTopicNames().get().entrySet()) {
            for (TopicPartitionInfo p : e.getValue().partitions()) {
                result.put(new TopicPartition(e.getKey(), p.partition()), p);
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
            ObjectNode mark = marks.addObject()
                    .put("topic", tp.topic())
                    .put("partition", tp.partition());
            try {
                mark.put("low_watermark", results.get(tp).get().lowWatermark());
                mark.put("error", "NONE");
            } catch (ExecutionException e) {
                // One partition's error (e.g. no leader, an offset past its HW): reported, the
                // others still answered.
                mark.put("low_watermark", -1L);
                mark.put("error", Errors.forException(e.getCause()).name());
            }
        }
        return result;
    }
}
