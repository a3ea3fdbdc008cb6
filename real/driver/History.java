package eosim.driver;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;

/**
 * The history file: one JSON object per line. Times are milliseconds since the run's epoch on
 * the machine's monotonic clock: the spec's {@code epoch_monotonic_ns} is the epoch on Linux's
 * CLOCK_MONOTONIC, which is what both {@link System#nanoTime()} (HotSpot on Linux) and Python's
 * {@code time.monotonic_ns()} read, so every driver and eosim's fault lines share one clock to
 * the microsecond, whatever namespace they run in. Without it (an older spec) the float
 * {@code epoch_ms} (wall clock) is taken once against {@code currentTimeMillis()}. Op ids count
 * from 0 in this process; eosim renumbers them when it merges the processes' histories.
 *
 * <p>An op's invocation is written at once, by the calling thread, before the operation starts
 * (so a record that reached Kafka always has its invocation in the history). Every other line
 * (a completion, a poll, a group event) is timed when it happens and written by a writer thread
 * of its own: a completion comes on the producer's I/O thread (its callbacks run there), and a
 * file write that blocked it (a page-cache flush, a journal commit) would stall every
 * partition's sends and acknowledgements at once, a stall of the driver, not of Kafka. Each
 * write is whole lines, so a process killed at any moment leaves whole lines (at worst a torn
 * last one, which eosim's reader drops); a killed process loses the completions it had not
 * written yet, which then read as indeterminate, as any crash leaves them.
 */
final class History implements AutoCloseable {
    private static final byte[] END = new byte[0];
    private final OutputStream out;
    private final boolean owned;
    private final long epochNanos;
    private final double startMs;
    private final java.util.concurrent.BlockingQueue<byte[]> queue =
            new java.util.concurrent.LinkedBlockingQueue<>();
    private final Thread writer;
    private volatile IOException failure;
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
        this.writer = new Thread(this::drain, "eosim-history-writer");
        this.writer.setDaemon(true);
        this.writer.start();
    }

    /** The writer thread: whatever is queued, in order, a batch of whole lines per write. */
    private void drain() {
        java.util.List<byte[]> batch = new java.util.ArrayList<>();
        try {
            while (true) {
                batch.add(queue.take());
                queue.drainTo(batch);
                boolean end = false;
                java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
                for (byte[] line : batch) {
                    if (line == END) {
                        end = true;
                        break;
                    }
                    bytes.write(line);
                }
                synchronized (out) {
                    out.write(bytes.toByteArray());
                    out.flush();
                }
                batch.clear();
                if (end) {
                    return;
                }
            }
        } catch (IOException e) {
            failure = e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
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

    private static byte[] bytes(ObjectNode line) {
        try {
            byte[] json = EosimDriver.JSON.writeValueAsBytes(line);
            byte[] bytes = new byte[json.length + 1];
            System.arraycopy(json, 0, bytes, 0, json.length);
            bytes[json.length] = '\n';
            return bytes;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Queue ``line`` for the writer thread (see the class comment). */
    void write(ObjectNode line) {
        if (failure != null) {
            throw new UncheckedIOException(failure);
        }
        queue.add(bytes(line));
    }

    /** Write ``line`` now, on the calling thread (an invocation, before its operation). */
    void writeNow(ObjectNode line) {
        byte[] bytes = bytes(line);
        try {
            synchronized (out) {
                out.write(bytes);
                out.flush();
            }
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

    /**
     * An op line, timed now: an invocation written at once, anything else queued for the
     * writer thread (see the class comment).
     */
    void op(long id, String type, String f, String process, JsonNode value, String error) {
        ObjectNode line = op(id, type, f, process, now(), value, error);
        if (type.equals("invoke")) {
            writeNow(line);
        } else {
            write(line);
        }
    }

    /** Write what is queued and close the file. */
    @Override
    public void close() {
        if (writer.isAlive()) {
            queue.add(END);
            try {
                writer.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (failure != null) {
            throw new UncheckedIOException(failure);
        }
        if (owned) {
            try {
                out.close();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}
