package dev.chronoq;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Runs handlers on the tasks of one or more queues.
 *
 * <pre>{@code
 * ChronoqWorker worker = ChronoqWorker.builder(client).concurrency(8).build();
 * worker.handle("expire-share", task -> expire(task.payload().get("share").asLong()));
 * worker.start();                 // or worker.run() to block until close()
 * worker.installShutdownHook();   // close() on SIGTERM
 * }</pre>
 *
 * <p>Each queue has a claiming thread and a pool of {@code concurrency} handler threads. A claim
 * takes up to the free handler slots plus {@code prefetch} tasks, and long-polls ({@code wait_ms})
 * only while a handler slot is free. A handler that returns acknowledges its task; one that
 * throws fails it with the exception's text ({@link RetryLaterException} sets the retry delay).
 * Outcomes ride on the queue's next claim, or go to {@code POST /v1/acks} after a short linger
 * (5 ms). While a task is claimed its lease is extended every third of the lease. A batch handler
 * ({@link #handleBatch}) gets up to {@code batchSize} tasks and returns one {@link ItemResult} per
 * task; the results go in one {@code POST /v1/acks}. {@link #close()} stops claiming, finishes
 * running (and prefetched) tasks and flushes their outcomes.
 */
public final class ChronoqWorker implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(ChronoqWorker.class.getName());
    private static final int ERROR_LIMIT = 4000;
    /** chronoqd's limit on a claim's worker name, in bytes of UTF-8. */
    private static final int WORKER_NAME_LIMIT = 200;

    /** A handler of one task: returning acknowledges it, an exception fails it. */
    @FunctionalInterface
    public interface Handler {
        /**
         * @param task the lease
         * @throws Exception to fail the attempt
         */
        void handle(Task task) throws Exception;
    }

    /** A handler of a batch: returns one result per task, in order; an exception fails them all. */
    @FunctionalInterface
    public interface BatchHandler {
        /**
         * @param tasks the leases
         * @return one result per task
         * @throws Exception to fail them all
         */
        List<ItemResult> handle(List<Task> tasks) throws Exception;
    }

    /** The outcome of one task of a batch. */
    public static final class ItemResult {
        final String error;
        final Duration retryIn;

        private ItemResult(String error, Duration retryIn) {
            this.error = error;
            this.retryIn = retryIn;
        }

        /**
         * @return success
         */
        public static ItemResult ok() { return new ItemResult(null, null); }
        /**
         * @param error text
         * @return a failure retried after the backoff
         */
        public static ItemResult fail(String error) { return new ItemResult(error == null ? "failed" : error, null); }
        /**
         * @param error text
         * @param retryIn delay
         * @return a failure retried after {@code retryIn}
         */
        public static ItemResult retry(String error, Duration retryIn) { return new ItemResult(error == null ? "failed" : error, retryIn); }
        /**
         * @return whether it is a success
         */
        public boolean isOk() { return error == null; }
    }

    /** Throw from a handler to fail the attempt with this message (no stack trace) and retry after a delay. */
    public static final class RetryLaterException extends Exception {
        private final Duration delay;

        /**
         * @param message the error text
         * @param delay retry delay, or null for the backoff
         */
        public RetryLaterException(String message, Duration delay) {
            super(message);
            this.delay = delay;
        }

        /**
         * @return the delay, or null
         */
        public Duration delay() { return delay; }
    }

    /** Counters (they only grow). */
    public static final class Stats {
        final AtomicLong claimed = new AtomicLong();
        final AtomicLong succeeded = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicLong ackRequests = new AtomicLong();
        final AtomicLong claimsWithAcks = new AtomicLong();
        final AtomicLong extensions = new AtomicLong();
        final AtomicLong leasesLost = new AtomicLong();
        final AtomicLong refused = new AtomicLong();

        /**
         * @return tasks claimed
         */
        public long claimed() { return claimed.get(); }
        /**
         * @return handlers that succeeded
         */
        public long succeeded() { return succeeded.get(); }
        /**
         * @return handlers that failed
         */
        public long failed() { return failed.get(); }
        /**
         * @return POST /v1/acks requests
         */
        public long ackRequests() { return ackRequests.get(); }
        /**
         * @return claims that carried acks
         */
        public long claimsWithAcks() { return claimsWithAcks.get(); }
        /**
         * @return lease extensions that succeeded
         */
        public long extensions() { return extensions.get(); }
        /**
         * @return leases found lost when extending
         */
        public long leasesLost() { return leasesLost.get(); }
        /**
         * @return outcomes chronoqd refused (the lease was no longer ours)
         */
        public long refused() { return refused.get(); }
    }

    private final class Registration {
        final String queue;
        final Handler handler;
        final BatchHandler batchHandler;
        final int concurrency;
        final int limit;
        final int batchSize;
        final List<AckItem> outcomes = new ArrayList<>();
        ExecutorService pool;
        Thread claimer;
        int inFlight;   // tasks (batches) claimed and not finished; guarded by this
        int running;    // handlers running; guarded by this

        Registration(String queue, Handler h, BatchHandler bh, int concurrency, int limit, int batchSize) {
            this.queue = queue;
            this.handler = h;
            this.batchHandler = bh;
            this.concurrency = concurrency;
            this.limit = limit;
            this.batchSize = batchSize;
        }
    }

    private final ChronoqClient client;
    private final int concurrency;
    private final Duration lease;
    private final Duration wait;
    private final int prefetch;
    private final Duration linger;
    private final String workerName;
    private final List<Registration> regs = new ArrayList<>();
    private final Map<String, Task> tracked = new ConcurrentHashMap<>();
    private final Stats stats = new Stats();
    private final Object outcomeSignal = new Object();
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile boolean started;
    private volatile boolean stopping;
    private volatile boolean flusherStop;
    private Thread flusher;
    private Timers.Periodic extender;

    private ChronoqWorker(Builder b) {
        this.client = b.client;
        this.concurrency = b.concurrency;
        this.lease = b.lease;
        this.wait = b.wait;
        this.prefetch = b.prefetch < 0 ? 4 * b.concurrency : b.prefetch;
        this.linger = b.linger;
        this.workerName = b.workerName != null ? b.workerName : defaultWorkerName();
    }

    /**
     * The name a worker gives its claims unless told otherwise: {@code <hostname>:<pid>}, the
     * hostname ({@code InetAddress.getLocalHost().getHostName()}, else {@code $HOSTNAME}, else
     * {@code localhost}) cut on a character boundary to keep the name within chronoqd's 200 bytes.
     *
     * @return {@code <hostname>:<pid>}
     */
    public static String defaultWorkerName() {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (java.io.IOException | RuntimeException e) {
            host = System.getenv("HOSTNAME");
        }
        if (host == null || host.isEmpty()) host = "localhost";
        return workerName(host, ProcessHandle.current().pid());
    }

    /** {@code host:pid}, the host cut (on a UTF-8 character boundary) to fit 200 bytes. */
    static String workerName(String host, long pid) {
        String suffix = ":" + pid;
        byte[] b = host.getBytes(StandardCharsets.UTF_8);
        int n = WORKER_NAME_LIMIT - suffix.length();
        if (b.length <= n) return host + suffix;
        while (n > 0 && (b[n] & 0xC0) == 0x80) n--;
        return new String(b, 0, n, StandardCharsets.UTF_8) + suffix;
    }

    /**
     * @param client the client to talk through
     * @return a builder
     */
    public static Builder builder(ChronoqClient client) { return new Builder(client); }

    /**
     * Builder of {@link ChronoqWorker}.
     *
     */
    public static final class Builder {
        private final ChronoqClient client;
        private int concurrency = 8;
        private Duration lease = Duration.ofSeconds(30);
        private Duration wait = Duration.ofSeconds(5);
        private int prefetch = -1;
        private Duration linger = Duration.ofMillis(5);
        private String workerName;

        private Builder(ChronoqClient client) { this.client = client; }

        /**
         * @param n handler threads per queue (default 8)
         * @return this
         */
        public Builder concurrency(int n) { this.concurrency = n; return this; }
        /**
         * @param lease each claim's lease (default 30 s), extended every third while claimed
         * @return this
         */
        public Builder lease(Duration lease) { this.lease = lease; return this; }
        /**
         * @param wait long-poll wait of a claim (default 5 s; a close waits for the claim in flight)
         * @return this
         */
        public Builder wait(Duration wait) { this.wait = wait; return this; }
        /**
         * @param n tasks claimed beyond the free handler threads (default 4 x concurrency)
         * @return this
         */
        public Builder prefetch(int n) { this.prefetch = n; return this; }
        /**
         * @param linger how long an outcome waits for a claim to ride on (default 5 ms)
         * @return this
         */
        public Builder ackLinger(Duration linger) { this.linger = linger; return this; }
        /**
         * @param name the name each claim gives chronoqd (at most 200 bytes, no control characters),
         *     shown by the dashboard and {@code GET /v1/tasks/{id}} as the task's worker (default
         *     {@link ChronoqWorker#defaultWorkerName()}, {@code <hostname>:<pid>}; empty: none)
         * @return this
         */
        public Builder workerName(String name) { this.workerName = name; return this; }
        /**
         * @return the worker
         */
        public ChronoqWorker build() { return new ChronoqWorker(this); }
    }

    /**
     * @return the counters
     */
    public Stats stats() { return stats; }

    /**
     * @return the name this worker's claims give chronoqd (empty: none)
     */
    public String workerName() { return workerName; }

    /**
     * Registers a handler for {@code queue} with the worker's concurrency.
     *
     * @param queue queue
     * @param handler handler
     * @return this
     */
    public ChronoqWorker handle(String queue, Handler handler) { return handle(queue, concurrency, handler); }

    /**
     * @param queue queue
     * @param concurrency handler threads
     * @param handler handler
     * @return this
     */
    public synchronized ChronoqWorker handle(String queue, int concurrency, Handler handler) {
        if (started) throw new IllegalStateException("register handlers before start()");
        regs.add(new Registration(queue, handler, null, concurrency, concurrency + prefetch, 1));
        return this;
    }

    /**
     * Registers a batch handler: it gets up to {@code batchSize} tasks at once (one batch at a time)
     * and returns one {@link ItemResult} per task; the results go in one request.
     *
     * @param queue queue
     * @param batchSize most tasks per batch (1-10,000)
     * @param handler handler
     * @return this
     */
    public synchronized ChronoqWorker handleBatch(String queue, int batchSize, BatchHandler handler) {
        if (started) throw new IllegalStateException("register handlers before start()");
        regs.add(new Registration(queue, null, handler, 1, 1, batchSize));
        return this;
    }

    /** Starts claiming (returns at once). */
    public synchronized void start() {
        if (started) throw new IllegalStateException("already started");
        started = true;
        extender = client.timers().every("chronoq-extender", Duration.ofMillis(Math.max(1, lease.toMillis() / 3)),
                this::extendAll);
        flusher = daemon(this::flushLoop, "chronoq-acks");
        flusher.start();
        for (Registration reg : regs) {
            AtomicInteger n = new AtomicInteger();
            reg.pool = Executors.newFixedThreadPool(reg.concurrency,
                    r -> daemon(r, "chronoq-" + reg.queue + "-" + n.incrementAndGet()));
            reg.claimer = daemon(() -> claimLoop(reg), "chronoq-claim-" + reg.queue);
            reg.claimer.start();
        }
    }

    /**
     * Starts (if needed) and blocks until {@link #close()}.
     *
     * @throws InterruptedException if interrupted
     */
    public void run() throws InterruptedException {
        if (!started) start();
        stopped.await();
    }

    /** Closes the worker when the JVM stops (SIGTERM, SIGINT). */
    public void installShutdownHook() {
        Runtime.getRuntime().addShutdownHook(new Thread(this::close, "chronoq-shutdown"));
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    // ---- claiming

    private void claimLoop(Registration reg) {
        int errors = 0;
        while (true) {
            int max;
            boolean slotFree;
            synchronized (reg) {
                while (!stopping && reg.inFlight >= reg.limit) waitOn(reg, 100);
                if (stopping) return;
                max = reg.batchHandler != null ? reg.batchSize : reg.limit - reg.inFlight;
                slotFree = reg.running < reg.concurrency;
            }
            List<AckItem> acks = drain(reg);
            Duration w = slotFree ? wait : Duration.ZERO;
            ClaimResult res;
            try {
                res = client.claim(reg.queue, Math.min(max, ChronoqClient.MAX_BATCH), lease, w, acks, workerName);
                errors = 0;
            } catch (RuntimeException e) {
                if (!acks.isEmpty()) {
                    if (refusesOutcomes(e)) {
                        LOG.warning("chronoqd refused outcomes of " + reg.queue + ": " + e);
                    } else {
                        requeue(reg, acks);
                    }
                }
                errors++;
                LOG.log(Level.WARNING, "claim on " + reg.queue + " failed (will retry): " + e);
                synchronized (reg) {
                    if (!stopping) waitOn(reg, Math.min(5000, 100L << Math.min(errors, 6)));
                }
                continue;
            }
            if (!acks.isEmpty()) stats.claimsWithAcks.incrementAndGet();
            countResults(res.acks());
            List<Task> got = res.tasks();
            if (got.isEmpty()) {
                if (w.isZero()) synchronized (reg) { if (!stopping) waitOn(reg, 50); }
                continue;
            }
            stats.claimed.addAndGet(got.size());
            for (Task t : got) tracked.put(t.id(), t);
            if (reg.batchHandler != null) {
                synchronized (reg) { reg.inFlight++; }
                reg.pool.execute(() -> runBatch(reg, got));
            } else {
                synchronized (reg) { reg.inFlight += got.size(); }
                for (Task t : got) reg.pool.execute(() -> runOne(reg, t));
            }
        }
    }

    private static void waitOn(Object o, long ms) {
        try {
            o.wait(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void countResults(List<AckResult> results) {
        for (AckResult r : results) {
            if (!r.ok()) {
                stats.refused.incrementAndGet();
                LOG.warning("outcome of " + r.id() + " refused: " + r.error());
            }
        }
    }

    // ---- running

    private void runOne(Registration reg, Task t) {
        synchronized (reg) { reg.running++; }
        AckItem outcome;
        try {
            reg.handler.handle(t);
            outcome = AckItem.ok(t);
            stats.succeeded.incrementAndGet();
        } catch (RetryLaterException e) {
            outcome = AckItem.fail(t.id(), t.token(), e.getMessage(), e.delay());
            stats.failed.incrementAndGet();
        } catch (Throwable e) {
            outcome = AckItem.fail(t.id(), t.token(), errorText(e));
            stats.failed.incrementAndGet();
        }
        tracked.remove(t.id(), t);
        addOutcome(reg, List.of(outcome));
        synchronized (reg) {
            reg.running--;
            reg.inFlight--;
            reg.notifyAll();
        }
    }

    private void runBatch(Registration reg, List<Task> tasks) {
        synchronized (reg) { reg.running++; }
        List<AckItem> out = new ArrayList<>();
        try {
            List<ItemResult> results = reg.batchHandler.handle(tasks);
            if (results == null || results.size() != tasks.size()) {
                throw new IllegalStateException("the batch handler returned " + (results == null ? "null" : results.size()
                        + " results") + " for " + tasks.size() + " tasks");
            }
            for (int i = 0; i < tasks.size(); i++) {
                Task t = tasks.get(i);
                ItemResult r = results.get(i) == null ? ItemResult.ok() : results.get(i);
                if (r.isOk()) {
                    out.add(AckItem.ok(t));
                    stats.succeeded.incrementAndGet();
                } else {
                    out.add(AckItem.fail(t.id(), t.token(), cut(r.error), r.retryIn));
                    stats.failed.incrementAndGet();
                }
            }
        } catch (Throwable e) {
            out.clear();
            String text = errorText(e);
            for (Task t : tasks) out.add(AckItem.fail(t.id(), t.token(), text));
            stats.failed.addAndGet(tasks.size());
        }
        for (Task t : tasks) tracked.remove(t.id(), t);
        reportOrRequeue(reg, out);
        synchronized (reg) {
            reg.running--;
            reg.inFlight--;
            reg.notifyAll();
        }
    }

    /** The exception's stack trace (first lines), cut to chronoqd's 4 KiB. */
    static String errorText(Throwable e) {
        if (e instanceof RetryLaterException) return cut(e.getMessage());
        StringWriter sw = new StringWriter();
        e.printStackTrace(new PrintWriter(sw));
        String[] lines = sw.toString().split("\n");
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < Math.min(lines.length, 12); i++) b.append(i > 0 ? "\n" : "").append(lines[i].stripTrailing());
        return cut(b.toString());
    }

    private static String cut(String s) {
        if (s == null) return "failed";
        byte[] d = s.getBytes(StandardCharsets.UTF_8);
        if (d.length <= ERROR_LIMIT) return s;
        return new String(d, 0, ERROR_LIMIT, StandardCharsets.UTF_8) + "...";
    }

    // ---- outcomes

    private void addOutcome(Registration reg, List<AckItem> items) {
        synchronized (reg.outcomes) { reg.outcomes.addAll(items); }
        synchronized (outcomeSignal) { outcomeSignal.notifyAll(); }
    }

    private void requeue(Registration reg, List<AckItem> items) {
        synchronized (reg.outcomes) { reg.outcomes.addAll(0, items); }
        synchronized (outcomeSignal) { outcomeSignal.notifyAll(); }
    }

    /** Whether a refused request was refused for its outcomes (a field of {@code acks}), not for the rest. */
    private static boolean refusesOutcomes(RuntimeException e) {
        return e instanceof InvalidArgumentException && ((InvalidArgumentException) e).field() != null
                && ((InvalidArgumentException) e).field().startsWith("acks");
    }

    /**
     * Reports outcomes in one POST /v1/acks; false if they could not be sent, and are back at the head of the
     * queue's outcomes (outcomes chronoqd refuses are logged and dropped: sending them again would not help).
     */
    private boolean reportOrRequeue(Registration reg, List<AckItem> items) {
        try {
            stats.ackRequests.incrementAndGet();
            countResults(client.ackMany(items));
            return true;
        } catch (InvalidArgumentException e) {
            LOG.warning("chronoqd refused outcomes of " + reg.queue + ": " + e);
            return true;
        } catch (RuntimeException e) {
            LOG.warning("could not report outcomes of " + reg.queue + " (will retry): " + e);
            requeue(reg, items);
            return false;
        }
    }

    private static List<AckItem> drain(Registration reg) {
        synchronized (reg.outcomes) {
            // stay well under chronoqd's 1 MiB body: error texts are cut to 4,000 bytes
            int n = 0;
            long size = 0;
            while (n < reg.outcomes.size() && n < ChronoqClient.MAX_BATCH) {
                AckItem a = reg.outcomes.get(n);
                size += 64 + a.id().length() * 6L + (a.error() == null ? 0 : a.error().length() * 6L);
                if (n > 0 && size > 900_000) break;
                n++;
            }
            List<AckItem> out = new ArrayList<>(reg.outcomes.subList(0, n));
            reg.outcomes.subList(0, n).clear();
            return out;
        }
    }

    private boolean anyOutcomes() {
        for (Registration r : regs) synchronized (r.outcomes) { if (!r.outcomes.isEmpty()) return true; }
        return false;
    }

    private void flushLoop() {
        int errors = 0;
        while (!flusherStop) {
            synchronized (outcomeSignal) {
                while (!flusherStop && !anyOutcomes()) waitOn(outcomeSignal, 200);
            }
            if (flusherStop) return;
            // The linger, cut short only by close() (which sends what is left itself).
            long end = System.nanoTime() + Math.max(1, linger.toMillis() << Math.min(errors, 10)) * 1_000_000L;
            synchronized (outcomeSignal) {
                for (long left; !flusherStop && (left = end - System.nanoTime()) > 0; ) {
                    waitOn(outcomeSignal, Math.max(1, left / 1_000_000L));
                }
            }
            if (flusherStop) return;
            errors = flushOnce() ? 0 : errors + 1;
        }
    }

    /** Sends every pending outcome by POST /v1/acks; false if some could not be sent. */
    private boolean flushOnce() {
        boolean ok = true;
        for (Registration reg : regs) {
            while (true) {
                List<AckItem> items = drain(reg);
                if (items.isEmpty()) break;
                if (!reportOrRequeue(reg, items)) {
                    ok = false;
                    break;
                }
            }
        }
        return ok;
    }

    // ---- leases

    private void extendAll() {
        for (Task t : tracked.values()) {
            if (stopping && tracked.isEmpty()) return;
            try {
                client.extend(t.id(), t.token(), lease);
                stats.extensions.incrementAndGet();
            } catch (StaleTokenException e) {
                stats.leasesLost.incrementAndGet();
                tracked.remove(t.id(), t);
                LOG.warning("lease of " + t.id() + " lost: " + e.getMessage());
            } catch (RuntimeException e) {
                LOG.warning("could not extend the lease of " + t.id() + " (will retry): " + e);
            }
        }
    }

    // ---- stopping

    /**
     * Stops claiming (waiting for a claim in flight, up to the wait), lets running and prefetched
     * tasks finish, reports their outcomes and stops. Idempotent.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (!started || stopping) {
                stopping = true;
                stopped.countDown();
                return;
            }
            stopping = true;
        }
        for (Registration reg : regs) {
            synchronized (reg) { reg.notifyAll(); }
        }
        for (Registration reg : regs) {
            try {
                reg.claimer.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        for (Registration reg : regs) {
            reg.pool.shutdown();
            try {
                while (!reg.pool.awaitTermination(1, TimeUnit.SECONDS)) {
                    LOG.fine("waiting for handlers of " + reg.queue);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        flusherStop = true;
        synchronized (outcomeSignal) { outcomeSignal.notifyAll(); }
        try {
            flusher.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (int i = 0; i < 3 && !flushOnce(); i++) {
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                break;
            }
        }
        extender.cancel();
        stopped.countDown();
    }
}
