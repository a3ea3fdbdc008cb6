package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/**
 * eosim's workload driver: one JVM per application process, on Kafka's own Java clients.
 *
 * <p>Usage: {@code java -cp DRIVER:LIBS/* eosim.driver.EosimDriver SPEC.json}. The spec (written
 * by eosim.real.clients) names the mode, the client configuration, the workload and the history
 * file; the history gets one JSON line per event, in eosim's history format
 * (docs/history-format.md), each flushed as it is written so that a killed process leaves a
 * valid prefix.
 *
 * <p>Modes: {@code produce} ({@link Produce}), {@code txn} ({@link Txn}), {@code consume}
 * ({@link Consume}), {@code process} ({@link Processor}), {@code drain} ({@link Drain}),
 * {@code admin} ({@link AdminMode}), {@code warmup} ({@link Warmup}: a load that warms a freshly
 * started cluster, left out of every history), {@code jmx} ({@link JmxMode}: the MBeans of
 * running JVMs, for eosim's measurements of the brokers) and {@code clock} (prints
 * {@code System.nanoTime()}: eosim's tests check it is the clock its fault lines read).
 *
 * <p>Exit codes: 0 done, 1 the work failed (one line on stderr), 2 a bad spec.
 */
public final class EosimDriver {
    static final ObjectMapper JSON = new ObjectMapper();

    private EosimDriver() {}

    public static void main(String[] args) {
        if (args.length != 1) {
            fail(2, "usage: EosimDriver SPEC.json");
        }
        JsonNode spec;
        try {
            spec = JSON.readTree(new File(args[0]));
        } catch (Exception e) {
            fail(2, args[0] + ": cannot read the spec: " + describe(e));
            return;
        }
        if (spec == null || !spec.isObject()) {
            fail(2, args[0] + ": the spec is not a JSON object");
            return;
        }
        String mode = spec.path("mode").asText("");
        try {
            ObjectNode result;
            switch (mode) {
                case "produce" -> result = new Produce(spec).run();
                case "txn" -> result = new Txn(spec).run();
                case "consume" -> result = new Consume(spec).run();
                case "drain" -> result = new Drain(spec).run();
                case "admin" -> result = new AdminMode(spec).run();
                case "process" -> result = new Processor(spec).run();
                case "warmup" -> result = new Warmup(spec).run();
                case "jmx" -> result = new JmxMode(spec).run();
                case "clock" -> {
                    result = JSON.createObjectNode();
                    result.put("nano_time", System.nanoTime());
                }
                default -> {
                    fail(2, args[0] + ": mode: expected produce, txn, consume, process, drain, "
                            + "admin, warmup, jmx or clock, got '" + mode + "'");
                    return;
                }
            }
            if (!Double.isNaN(History.firstStartMs)) {
                // When this process's clock read its first run time (eosim checks it).
                result.put("clock_ms", History.firstStartMs);
            }
            System.out.println(JSON.writeValueAsString(result));
            System.out.flush();
            System.exit(0);
        } catch (SpecException e) {
            fail(2, args[0] + ": " + e.getMessage());
        } catch (Throwable e) {
            fail(1, mode + ": " + describe(e));
        }
    }

    static void fail(int code, String message) {
        System.err.println("eosim-driver: " + message.replace('\n', ' '));
        System.err.flush();
        System.exit(code);
    }

    /** An exception as eosim's histories write it: {@code Name: message}, causes unwrapped. */
    static String describe(Throwable e) {
        Throwable t = e;
        while ((t instanceof ExecutionException || t instanceof CompletionException)
                && t.getCause() != null) {
            t = t.getCause();
        }
        String message = t.getMessage();
        String text = t.getClass().getSimpleName() + (message == null ? "" : ": " + message);
        return text.replace('\n', ' ');
    }

    /** A required field of an object in the spec. */
    static JsonNode required(JsonNode node, String field, String where) {
        JsonNode value = node.get(field);
        if (value == null || value.isNull()) {
            throw new SpecException(where + field + ": missing");
        }
        return value;
    }

    /** The client properties: the spec's {@code config} (as strings) and its bootstrap. */
    static Properties clientProperties(JsonNode spec) {
        Properties props = new Properties();
        JsonNode config = spec.path("config");
        for (Iterator<Map.Entry<String, JsonNode>> it = config.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isNull()) {
                props.setProperty(e.getKey(), e.getValue().asText());
            }
        }
        props.setProperty("bootstrap.servers", required(spec, "bootstrap", "").asText());
        return props;
    }

    /** The process name of an incarnation: {@code name/incarnation}. */
    static String process(JsonNode spec, int incarnation) {
        return required(spec, "name", "").asText() + "/" + incarnation;
    }

    /** A malformed spec. */
    static final class SpecException extends RuntimeException {
        SpecException(String message) {
            super(message);
        }
    }
}
