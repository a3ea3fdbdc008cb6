package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The {@code consume} mode: eosim's ReaderApp on a {@link KafkaConsumer} without a group,
 * assigned every partition of the topic, with the workload's {@code isolation} and
 * {@code auto.offset.reset}. Every non-empty poll is a {@code poll} op (invoke and ok at the same
 * time, {@code {records: [{topic, partition, offset, value}], isolation, group: null}}); a poll
 * that throws is a {@code fail} op and ends the reading, as in the model. It polls until SIGTERM
 * or until the spec's {@code stop_file} exists. With the spec's {@code warmup}, its positions
 * are fixed and its client's record paths warmed ({@link Warmup#reader}) before the first poll,
 * and with {@code warmup.own} its own consumer reads the warm-up topic until its start.
 *
 * <p>Its result splits the polling thread's CPU: {@code poll_cpu_ms} inside {@code poll()} (the
 * consumer reading and parsing its answers and sending the next fetches), and
 * {@code after_poll_cpu_ms} from a non-empty poll's return to the next call (this driver's work on
 * the records: their {@code poll} op), the model's {@code client_receive} and
 * {@code client_after_poll}.
 */
final class Consume {
    private final JsonNode spec;
    private final JsonNode workload;
    private final History history;
    private volatile boolean stop;
    private final CountDownLatch finished = new CountDownLatch(1);

    Consume(JsonNode spec) {
        this.spec = spec;
        this.workload = EosimDriver.required(spec, "workload", "");
        EosimDriver.required(workload, "topic", "workload.");
        this.history = new History(spec);
    }

    /** A consumer of String keys and byte[] values with the spec's config and isolation. */
    static KafkaConsumer<String, byte[]> consumer(JsonNode spec, String isolation,
            String offsetReset) {
        Properties props = EosimDriver.clientProperties(spec);
        props.setProperty("key.deserializer", StringDeserializer.class.getName());
        props.setProperty("value.deserializer", ByteArrayDeserializer.class.getName());
        props.setProperty("isolation.level", isolation);
        props.setProperty("enable.auto.commit", "false");
        props.remove("group.id");
        if (offsetReset != null) {
            props.setProperty("auto.offset.reset", offsetReset);
        }
        return new KafkaConsumer<>(props);
    }

    /** Every partition of {@code topic}, waiting (up to {@code timeoutMs}) for its metadata. */
    static List<TopicPartition> partitions(KafkaConsumer<?, ?> consumer, String topic,
            long timeoutMs) {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        while (true) {
            List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofMillis(timeoutMs));
            if (infos != null && !infos.isEmpty()) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo info : infos) {
                    tps.add(new TopicPartition(topic, info.partition()));
                }
                tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
                return tps;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("topic " + topic + " has no partitions");
            }
            Workloads.parkUntil(System.nanoTime() + 100_000_000L);
        }
    }

    /** A {@code poll} ok op for {@code records}. */
    static void recordPoll(History history, String process,
            Iterable<ConsumerRecord<String, byte[]>> records, String isolation) {
        ObjectNode value = pollValue(records, isolation);
        long id = history.nextId();
        double time = history.now();
        history.write(history.op(id, "invoke", "poll", process, time, null, null));
        history.write(history.op(id, "ok", "poll", process, time, value, null));
    }

    /** The value of a {@code poll} ok op for {@code records}. */
    static ObjectNode pollValue(Iterable<ConsumerRecord<String, byte[]>> records,
            String isolation) {
        ObjectNode value = EosimDriver.JSON.createObjectNode();
        ArrayNode polled = value.putArray("records");
        for (ConsumerRecord<String, byte[]> r : records) {
            ObjectNode rec = polled.addObject();
            rec.put("topic", r.topic());
            rec.put("partition", r.partition());
            rec.put("offset", r.offset());
            rec.put("value", new String(r.value(), StandardCharsets.UTF_8));
        }
        value.put("isolation", isolation);
        value.putNull("group");
        return value;
    }

    ObjectNode run() throws InterruptedException {
        String topic = workload.get("topic").asText();
        String isolation = workload.path("isolation").asText("read_committed");
        String reset = workload.has("auto.offset.reset")
                ? workload.get("auto.offset.reset").asText()
                : workload.path("auto_offset_reset").asText("latest");
        long pollMs = (long) Workloads.doubleField(workload, "poll_interval", 50.0);
        String stopFile = spec.path("stop_file").asText(null);
        String process = EosimDriver.process(spec, spec.path("incarnation").asInt(0));
        long polls = 0;
        long records = 0;
        long warmRead = 0;
        double lateMs = -1.0;
        double ownUntilMs = -1.0;  // when the own read of the warm-up topic ended
        History sink = null;  // where the warm-up topic's polls go (nowhere), once there are some
        // The polling thread's CPU inside poll() and after a non-empty one (ns), where the JVM
        // can read a thread's CPU time (else both stay -1: not measured).
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        boolean timed = threads.isCurrentThreadCpuTimeSupported();
        long pollCpuNs = timed ? 0L : -1L;
        long afterPollCpuNs = timed ? 0L : -1L;
        try (KafkaConsumer<String, byte[]> consumer = consumer(spec, isolation, reset)) {
            Thread hook = new Thread(() -> {
                stop = true;
                consumer.wakeup();
                try {
                    finished.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException ignored) {
                    Thread.currentThread().interrupt();
                }
            });
            Runtime.getRuntime().addShutdownHook(hook);
            List<TopicPartition> runPartitions = partitions(consumer, topic, 60_000);
            // With warmup.own, the run's own consumer also reads the warm-up topic from its
            // end until its start (Warmup.ownPartitions): the run's producers write there at
            // the run's rate just before it.
            List<TopicPartition> warm = Warmup.ownPartitions(spec, consumer);
            List<TopicPartition> assigned = new ArrayList<>(runPartitions);
            assigned.addAll(warm);
            consumer.assign(assigned);
            if (spec.has("warmup")) {
                // Where the reading starts is fixed now, before the epoch; then the client's
                // record paths are warmed on another consumer (a warm-up that ends late
                // misses nothing: the first poll reads from these positions).
                if (!warm.isEmpty()) {
                    // The warm-up topic from its end as it is before the bulk read below (which
                    // can take its 2 s): the own read then takes the backlog the producers'
                    // client warm-ups wrote meanwhile, and their own paced sends after it.
                    // (An empty list would mean every partition.)
                    consumer.seekToEnd(warm);
                }
                for (TopicPartition tp : consumer.assignment()) {
                    consumer.position(tp, Duration.ofSeconds(60));
                }
                Warmup.reader(spec, isolation);
                // How far past the epoch (the reader's start) its warm-up ran: its first poll
                // went that late (the runner's referee bounds it).
                lateMs = Math.max(0.0, history.now());
            }
            while (!stop && (stopFile == null || !Files.exists(Path.of(stopFile)))) {
                if (!warm.isEmpty() && history.now() >= 0.0) {
                    consumer.assign(runPartitions);  // the positions read so far are kept
                    warm = List.of();
                    ownUntilMs = history.now();
                }
                ConsumerRecords<String, byte[]> got;
                long calledNs = timed ? threads.getCurrentThreadCpuTime() : 0L;
                try {
                    got = consumer.poll(Duration.ofMillis(Math.max(1, pollMs)));
                } catch (WakeupException e) {
                    break;
                } catch (RuntimeException e) {
                    history.failedNow("poll", process, EosimDriver.describe(e));
                    break;
                }
                long returnedNs = timed ? threads.getCurrentThreadCpuTime() : 0L;
                if (timed) {
                    pollCpuNs += returnedNs - calledNs;
                }
                if (got.isEmpty()) {
                    continue;
                }
                Iterable<ConsumerRecord<String, byte[]>> read = got;
                int count = got.count();
                if (!warm.isEmpty()) {
                    List<ConsumerRecord<String, byte[]>> warmed = new ArrayList<>();
                    List<ConsumerRecord<String, byte[]>> ofRun = new ArrayList<>();
                    for (ConsumerRecord<String, byte[]> r : got) {
                        (r.topic().equals(topic) ? ofRun : warmed).add(r);
                    }
                    if (!warmed.isEmpty()) {
                        if (sink == null) {
                            sink = Warmup.discarding(spec);
                        }
                        warmRead += warmed.size();
                        recordPoll(sink, Warmup.WARMUP_PROCESS, warmed, isolation);
                    }
                    read = ofRun;
                    count = ofRun.size();
                }
                if (count > 0) {
                    polls++;
                    records += count;
                    recordPoll(history, process, read, isolation);
                }
                if (timed) {
                    afterPollCpuNs += threads.getCurrentThreadCpuTime() - returnedNs;
                }
            }
        } finally {
            if (sink != null) {
                sink.close();
            }
        }
        history.close();
        finished.countDown();
        ObjectNode result = EosimDriver.JSON.createObjectNode();
        result.put("process", process);
        result.put("polls", polls);
        result.put("records", records);
        if (lateMs >= 0) {
            result.put("late_ms", lateMs);
        }
        result.put("warm_read", warmRead);
        if (timed) {
            result.put("poll_cpu_ms", pollCpuNs / 1e6);
            result.put("after_poll_cpu_ms", afterPollCpuNs / 1e6);
        }
        if (ownUntilMs >= 0) {
            result.put("own_until_ms", ownUntilMs);
        }
        return result;
    }
}
