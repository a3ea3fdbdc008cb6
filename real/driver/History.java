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
 * reader drops). Times are milliseconds since the run's epoch on the machine's monotonic clock:
 * the spec's {@code epoch_monotonic_ns} is the epoch on Linux's CLOCK_MONOTONIC, which is what
 * both {@link System#nanoTime()} (HotSpot on Linux) and Python's {@code time.monotonic_ns()}
 * read, so every driver and eosim's fault lines share one clock to the microsecond, whatever
 * namespace they run in. Without it (an older spec) the float {@code epoch_ms} (wall clock) is
 * taken once against {@code currentTimeMillis()}. Op ids count from 0 in this process; eosim
 * renumbers them when it merges the processes' histories.
 */
final class History implements AutoCloseable {
    private final OutputStream out;
    private final boolean owned;
    private final long epochNanos;
    private final double startMs;
    private long nextId;
    /** The {@link #startMs()} of the first history this process opened (NaN: none yet). */
    static volatile double firstStartMs = Double.NaN;

    History(JsonNode spec) {
        if (spec.hasNonNull("epoch_monotonic_ns")) {
            this.epochNanos = spec.get("epoch_monotonic_ns").asLong();
        } else {
            double epochMs = spec.path("epoch_ms").asDouble(System.currentTimeMillis());
            long nowNanos = System.nanoTime();
            this.epochNanos = nowNanos - (long) ((System.currentTimeMillis() - epochMs) * 1e6);
        }
        this.startMs = now();
        if (Double.isNaN(firstStartMs)) {
            firstStartMs = startMs;
        }
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

    /**
     * When this process opened its history, in the run's time: eosim checks it against the
     * moment it started the process (a clock that is not the runner's makes the run invalid).
     */
    double startMs() {
        return startMs;
    }

    /** Milliseconds since the run's epoch, to the microsecond. */
    double now() {
        double ms = (System.nanoTime() - epochNanos) / 1e6;
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
