package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;

/**
 * The history file: one JSON object per line, each written with one unbuffered write so that a
 * process killed at any moment leaves whole lines (and at worst a torn last one, which eosim's
 * reader drops). Times are milliseconds since the run's {@code epoch_ms} (wall clock), read
 * from the monotonic clock after one wall-clock reading at start. Op ids count from 0 in this
 * process; eosim renumbers them when it merges the processes' histories.
 */
final class History implements AutoCloseable {
    private final OutputStream out;
    private final boolean owned;
    private final double offsetMs;
    private final long startNanos;
    private long nextId;

    History(JsonNode spec) {
        long epochMs = spec.path("epoch_ms").asLong(System.currentTimeMillis());
        this.startNanos = System.nanoTime();
        this.offsetMs = System.currentTimeMillis() - epochMs;
        String path = spec.path("history").asText("-");
        try {
            if (path.equals("-")) {
                this.out = System.out;
                this.owned = false;
            } else {
                this.out = new FileOutputStream(path, true);
                this.owned = true;
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Milliseconds since the run's epoch, to the microsecond. */
    double now() {
        double ms = offsetMs + (System.nanoTime() - startNanos) / 1e6;
        return Math.round(ms * 1000.0) / 1000.0;
    }

    synchronized long nextId() {
        return nextId++;
    }

    synchronized void write(ObjectNode line) {
        try {
            byte[] json = EosimDriver.JSON.writeValueAsBytes(line);
            byte[] bytes = new byte[json.length + 1];
            System.arraycopy(json, 0, bytes, 0, json.length);
            bytes[json.length] = '\n';
            out.write(bytes);
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** An {@code op} line. */
    ObjectNode op(long id, String type, String f, String process, double time, JsonNode value,
            String error) {
        ObjectNode line = EosimDriver.JSON.createObjectNode();
        line.put("kind", "op");
        line.put("id", id);
        line.put("type", type);
        line.put("f", f);
        line.put("process", process);
        line.put("time", time);
        line.set("value", value);
        if (error != null) {
            line.put("error", error);
        }
        return line;
    }

    /** An op that failed at once: its invoke and fail lines, both now (a poll that threw). */
    void failedNow(String f, String process, String error) {
        long id = nextId();
        double time = now();
        write(op(id, "invoke", f, process, time, null, null));
        write(op(id, "fail", f, process, time, null, error));
    }

    /** Write an op line now. */
    void op(long id, String type, String f, String process, JsonNode value, String error) {
        write(op(id, type, f, process, now(), value, error));
    }

    @Override
    public void close() {
        if (owned) {
            try {
                out.close();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}
