package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** What the producing modes share: records, pacing and the producer's serializers. */
final class Workloads {
    static final String PAD_HEADER = "eosim-pad";

    private Workloads() {}

    /**
     * A record whose value is the UTF-8 bytes of {@code value}, padded to {@code valueBytes} with a
     * header {@code eosim-pad} of zero bytes (the value itself stays readable).
     */
    static ProducerRecord<String, byte[]> record(String topic, Integer partition, String key,
            String value, int valueBytes) {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        List<Header> headers = List.of();
        if (valueBytes > bytes.length) {
            headers = List.of(new RecordHeader(PAD_HEADER, new byte[valueBytes - bytes.length]));
        }
        return new ProducerRecord<>(topic, partition, key, bytes, headers);
    }

    /** The producer's properties: the spec's config with String keys and byte[] values. */
    static Properties producerProperties(JsonNode spec) {
        Properties props = EosimDriver.clientProperties(spec);
        props.setProperty("key.serializer", StringSerializer.class.getName());
        props.setProperty("value.serializer", ByteArraySerializer.class.getName());
        return props;
    }

    /**
     * Sleep until the run's time {@code atMs}, if it is still ahead; how late (ms) it already
     * was when called (0 when on time).
     */
    static double sleepUntilRunTime(History history, double atMs) {
        double wait = atMs - history.now();
        if (wait > 0) {
            parkUntil(System.nanoTime() + (long) (wait * 1e6));
            return 0.0;
        }
        return -wait;
    }

    /** Park until {@code System.nanoTime()} reaches {@code deadline}. */
    static void parkUntil(long deadline) {
        long left;
        while ((left = deadline - System.nanoTime()) > 0) {
            LockSupport.parkNanos(left);
        }
    }

    static int intField(JsonNode node, String field, int fallback) {
        JsonNode v = node.get(field);
        return v == null || v.isNull() ? fallback : v.asInt();
    }

    static double doubleField(JsonNode node, String field, double fallback) {
        JsonNode v = node.get(field);
        return v == null || v.isNull() ? fallback : v.asDouble();
    }

    static Integer optionalInt(JsonNode node, String field) {
        JsonNode v = node.get(field);
        return v == null || v.isNull() ? null : v.asInt();
    }
}
