package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * The chronoq client: every call of chronoqd's HTTP/JSON API.
 *
 * <pre>{@code
 * ChronoqClient client = ChronoqClient.builder().urls("http://app-1:7070", "http://app-2:7070").build();
 * client.enqueue(TaskSpec.builder("expire-share").id("share:42").payload(Map.of("share", 42))
 *     .delay(Duration.ofDays(7)).build());
 * }</pre>
 *
 * <p>With several URLs a call goes to the node that answered last; on a connection failure or a
 * 503 it moves to the next node (once per node). A call whose answer was lost after it was sent is
 * resent only if that is safe (GET, PUT, PATCH, DELETE, calls with a token, claims, creates with a
 * client id); otherwise it raises {@link OutcomeUnknownException}. Thread-safe.
 */
public final class ChronoqClient implements AutoCloseable {
    /**
     * Largest batch of one {@code POST /v1/tasks/batch} or {@code POST /v1/acks}.
     *
     */
    public static final int MAX_BATCH = 10_000;
    private static final Pattern INDEX = Pattern.compile("^tasks\\[(\\d+)\\]");

    private final Transport transport;
    private final Timers timers;

    private ChronoqClient(Builder b) {
        this.timers = b.timers;
        List<String> urls = b.urls.isEmpty() ? List.of("http://127.0.0.1:7070") : b.urls;
        SSLContext ssl = b.caFile != null ? trusting(b.caFile) : b.sslContext;
        this.transport = new Transport(urls, b.token, b.timeout, b.connectTimeout, null, ssl);
    }

    /**
     * @return a builder (default URL {@code http://127.0.0.1:7070}, timeout 30 s)
     */
    public static Builder builder() { return new Builder(); }

    /**
     * Builder of {@link ChronoqClient}.
     *
     */
    public static final class Builder {
        private List<String> urls = new ArrayList<>();
        private String token;
        private Duration timeout = Duration.ofSeconds(30);
        private Duration connectTimeout = Duration.ofSeconds(5);
        private Path caFile;
        private SSLContext sslContext;
        private Timers timers = Timers.SYSTEM;

        /**
         * @param urls node URLs (each may also be a comma-separated list)
         * @return this
         */
        public Builder urls(String... urls) {
            for (String u : urls) for (String p : u.split(",")) if (!p.isBlank()) this.urls.add(p.trim());
            return this;
        }
        /**
         * @param urls node URLs
         * @return this
         */
        public Builder urls(List<String> urls) { return urls(urls.toArray(new String[0])); }
        /**
         * @param token the bearer token, or null
         * @return this
         */
        public Builder token(String token) { this.token = token; return this; }
        /**
         * @param timeout per-attempt request timeout (claims and lock waits add their wait)
         * @return this
         */
        public Builder timeout(Duration timeout) { this.timeout = timeout; return this; }
        /**
         * @param connectTimeout connection timeout per node
         * @return this
         */
        public Builder connectTimeout(Duration connectTimeout) { this.connectTimeout = connectTimeout; return this; }
        /**
         * Trusts, for https nodes, the CA certificates of a PEM file (a private CA) instead of the JDK's; the
         * certificate's host name is checked as always. {@link #build()} throws {@link IllegalArgumentException}
         * when the file cannot be read or holds no certificate. Not with {@link #sslContext}.
         *
         * @param caFile the PEM file of the CA certificates
         * @return this
         */
        public Builder caFile(Path caFile) { this.caFile = caFile; return this; }
        /**
         * @param sslContext the TLS context of https nodes (default: the JDK's); not with {@link #caFile}
         * @return this
         */
        public Builder sslContext(SSLContext sslContext) { this.sslContext = sslContext; return this; }
        /**
         * The clock of the lease extensions of this client's locks and workers (package-private: tests
         * give a fake one; default {@link Timers#SYSTEM}).
         */
        Builder timers(Timers timers) { this.timers = timers; return this; }
        /**
         * @return the client
         */
        public ChronoqClient build() {
            if (caFile != null && sslContext != null) throw new IllegalArgumentException("give caFile or sslContext, not both");
            return new ChronoqClient(this);
        }
    }

    /** A TLS context trusting only the CA certificates of the PEM file {@code caFile}. */
    private static SSLContext trusting(Path caFile) {
        Collection<? extends Certificate> certs;
        try (InputStream in = Files.newInputStream(caFile)) {
            certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
        } catch (IOException e) {
            throw new IllegalArgumentException("caFile: cannot read " + caFile + ": " + e, e);
        } catch (CertificateException e) {
            throw new IllegalArgumentException("caFile: " + caFile + " holds no PEM certificate: " + e.getMessage(), e);
        }
        if (certs.isEmpty()) throw new IllegalArgumentException("caFile: " + caFile + " holds no PEM certificate");
        try {
            KeyStore trusted = KeyStore.getInstance(KeyStore.getDefaultType());
            trusted.load(null, null);
            int i = 0;
            for (Certificate c : certs) trusted.setCertificateEntry("ca-" + i++, c);
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trusted);
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, tmf.getTrustManagers(), null);
            return context;
        } catch (GeneralSecurityException | IOException e) {
            throw new IllegalStateException("cannot build a TLS context trusting " + caFile + ": " + e, e);
        }
    }

    /**
     * @return the node the next call goes to first
     */
    public String currentUrl() { return transport.currentUrl(); }

    /** The clock of the lease extensions of this client's locks and workers. */
    Timers timers() { return timers; }

    /** Nothing to release (the JDK HTTP client closes idle connections itself); for try-with-resources. */
    @Override
    public void close() {}

    // ---- plumbing

    private JsonNode call(String method, String path, JsonNode body, boolean resend, Duration extra) {
        return transport.send(new Transport.Call(method, path, body, resend, extra)).body;
    }

    private JsonNode call(String method, String path, JsonNode body, boolean resend) {
        return call(method, path, body, resend, null);
    }

    private CompletableFuture<JsonNode> callAsync(String method, String path, JsonNode body, boolean resend, Duration extra) {
        return transport.sendAsync(new Transport.Call(method, path, body, resend, extra)).thenApply(a -> a.body);
    }

    static RuntimeException unwrap(Throwable e) {
        while (e instanceof CompletionException && e.getCause() != null) e = e.getCause();
        return e instanceof RuntimeException ? (RuntimeException) e : new RuntimeException(e);
    }

    private static ObjectNode obj() { return Transport.MAPPER.createObjectNode(); }

    private static List<Task> tasks(JsonNode arr) {
        List<Task> out = new ArrayList<>();
        for (JsonNode n : arr) out.add(new Task(n));
        return out;
    }

    // ---- tasks

    /**
     * Enqueues one task.
     *
     * @param spec the task
     * @return the stored task
     */
    public Task enqueue(TaskSpec spec) { return unwrapJoin(enqueueAsync(spec)); }

    /**
     * Enqueues one task asynchronously.
     *
     * @param spec the task
     * @return the stored task
     */
    public CompletableFuture<Task> enqueueAsync(TaskSpec spec) {
        return callAsync("POST", "/v1/tasks", spec.toJson(), spec.id != null, null).thenApply(Task::new);
    }

    /**
     * Enqueues {@code queue} now with {@code payload}.
     *
     * @param queue queue
     * @param payload payload
     * @return the task
     */
    public Task enqueue(String queue, Object payload) {
        return enqueue(TaskSpec.builder(queue).payload(payload).build());
    }

    /**
     * Enqueues many tasks, {@value #MAX_BATCH} per request (each request all or nothing). An error
     * names the global index ({@code tasks[15000].run_at}); the batches before it are stored.
     *
     * @param specs the tasks
     * @return the stored tasks, in order
     */
    public List<Task> enqueueMany(List<TaskSpec> specs) { return unwrapJoin(enqueueManyAsync(specs)); }

    /**
     * Asynchronous {@link #enqueueMany}.
     *
     * @param specs the tasks
     * @return the stored tasks
     */
    public CompletableFuture<List<Task>> enqueueManyAsync(List<TaskSpec> specs) {
        List<ObjectNode> bodies = new ArrayList<>();
        for (TaskSpec s : specs) bodies.add(s.toJson());
        List<Task> stored = new ArrayList<>();
        CompletableFuture<Void> chain = CompletableFuture.completedFuture(null);
        for (int[] range : chunks(bodies)) {
            final int offset = range[0];
            List<ObjectNode> part = bodies.subList(range[0], range[1]);
            chain = chain.thenCompose(v -> {
                ObjectNode body = obj();
                ArrayNode arr = body.putArray("tasks");
                boolean allIds = true;
                for (ObjectNode t : part) {
                    arr.add(t);
                    allIds &= t.hasNonNull("id");
                }
                return callAsync("POST", "/v1/tasks/batch", body, allIds, null).handle((r, e) -> {
                    if (e != null) throw shift(unwrap(e), offset);
                    stored.addAll(tasks(r.path("tasks")));
                    return null;
                });
            });
        }
        return chain.thenApply(v -> stored);
    }

    /** chronoqd's request body limit (1 MiB), less room for the envelope. */
    static final int MAX_BODY = 1024 * 1024 - 1024;

    /**
     * Splits items into [from, to) ranges of at most {@value #MAX_BATCH} items and {@link #MAX_BODY} bytes.
     *
     */
    static List<int[]> chunks(List<? extends JsonNode> items) {
        List<int[]> out = new ArrayList<>();
        int from = 0;
        long size = 0;
        for (int i = 0; i < items.size(); i++) {
            int n;
            try {
                n = Transport.MAPPER.writeValueAsBytes(items.get(i)).length + 1;
            } catch (java.io.IOException e) {
                throw new IllegalArgumentException("cannot encode item " + i + ": " + e.getMessage(), e);
            }
            if (i > from && (i - from >= MAX_BATCH || size + n > MAX_BODY)) {
                out.add(new int[] {from, i});
                from = i;
                size = 0;
            }
            size += n;
        }
        if (from < items.size()) out.add(new int[] {from, items.size()});
        return out;
    }

    private static RuntimeException shift(RuntimeException e, int offset) {
        if (offset == 0 || !(e instanceof ChronoqException)) return e;
        ChronoqException c = (ChronoqException) e;
        if (c.field() == null) return e;
        Matcher m = INDEX.matcher(c.field());
        if (!m.find()) return e;
        String old = m.group();
        String now = "tasks[" + (Integer.parseInt(m.group(1)) + offset) + "]";
        return ChronoqException.of(c.code(), c.getMessage().replace(old, now), c.field().replaceFirst(Pattern.quote(old), now),
                c.status(), c.node());
    }

    /**
     * @param id task id
     * @return the task
     * @throws NotFoundException if there is none
     */
    public Task get(String id) { return unwrapJoin(getAsync(id)); }

    /**
     * @param id task id
     * @return the task, asynchronously
     */
    public CompletableFuture<Task> getAsync(String id) {
        return callAsync("GET", "/v1/tasks/" + Json.seg(id), null, false, null).thenApply(Task::new);
    }

    /**
     * {@link #get(String)} with the task's last finished attempts in {@link Task#attempts()}
     * ({@code GET /v1/tasks/{id}?attempts=true}).
     *
     * @param id task id
     * @return the task with its attempts
     * @throws NotFoundException if there is none
     */
    public Task getWithAttempts(String id) { return unwrapJoin(getWithAttemptsAsync(id)); }

    /**
     * @param id task id
     * @return the task with its attempts, asynchronously
     */
    public CompletableFuture<Task> getWithAttemptsAsync(String id) {
        return callAsync("GET", "/v1/tasks/" + Json.seg(id) + "?attempts=true", null, false, null)
                .thenApply(Task::new);
    }

    /**
     * Cancels a scheduled task.
     *
     * @param id task id
     * @return the cancelled task
     */
    public Task cancel(String id) { return unwrapJoin(cancelAsync(id)); }

    /**
     * @param id task id
     * @return the cancelled task, asynchronously
     */
    public CompletableFuture<Task> cancelAsync(String id) {
        return callAsync("DELETE", "/v1/tasks/" + Json.seg(id), null, false, null).thenApply(Task::new);
    }

    /**
     * Moves a scheduled task's run_at.
     *
     * @param id task id
     * @param runAt new time
     * @return the task
     */
    public Task reschedule(String id, Instant runAt) { return reschedule(id, runAt, null); }

    /**
     * Moves a scheduled task's run_at and optionally replaces its payload.
     *
     * @param id task id
     * @param runAt the new time
     * @param payload the new payload, or null to keep it
     * @return the task
     */
    public Task reschedule(String id, Instant runAt, Object payload) { return unwrapJoin(rescheduleAsync(id, runAt, payload)); }

    /**
     * @param id id
     * @param runAt time
     * @param payload payload or null
     * @return the task, asynchronously
     */
    public CompletableFuture<Task> rescheduleAsync(String id, Instant runAt, Object payload) {
        ObjectNode b = obj();
        b.put("run_at", runAt.toString());
        if (payload != null) b.set("payload", Transport.MAPPER.valueToTree(payload));
        return callAsync("PATCH", "/v1/tasks/" + Json.seg(id), b, false, null).thenApply(Task::new);
    }

    /**
     * Reschedules with a delay from now.
     *
     * @param id id
     * @param delay delay
     * @return the task
     */
    public Task reschedule(String id, Duration delay) {
        ObjectNode b = obj();
        b.put("delay_ms", delay.toMillis());
        return new Task(call("PATCH", "/v1/tasks/" + Json.seg(id), b, false));
    }

    /**
     * Schedules a dead task again now (not resent after a lost answer).
     *
     * @param id id
     * @return the task
     */
    public Task retry(String id) { return unwrapJoin(retryAsync(id)); }

    /**
     * @param id id
     * @return the task, asynchronously
     */
    public CompletableFuture<Task> retryAsync(String id) {
        return callAsync("POST", "/v1/tasks/" + Json.seg(id) + "/retry", null, false, null).thenApply(Task::new);
    }

    /**
     * One page of tasks.
     *
     * @param queue queue or null
     * @param state state or null
     * @param key key or null
     * @param limit 1-1000
     * @param cursor cursor of a previous page, or null
     * @return the page
     */
    public Page<Task> list(String queue, String state, String key, int limit, String cursor) {
        StringBuilder q = new StringBuilder("/v1/tasks?limit=").append(limit);
        if (queue != null) q.append("&queue=").append(Json.seg(queue));
        if (state != null) q.append("&state=").append(Json.seg(state));
        if (key != null) q.append("&key=").append(Json.seg(key));
        if (cursor != null) q.append("&cursor=").append(Json.seg(cursor));
        JsonNode r = call("GET", q.toString(), null, false);
        return new Page<>(tasks(r.path("tasks")), Json.text(r, "next_cursor"));
    }

    /**
     * Every task matching, following the pages.
     *
     * @param queue queue or null
     * @param state state or null
     * @return the tasks
     */
    public List<Task> listAll(String queue, String state) {
        List<Task> out = new ArrayList<>();
        String cursor = null;
        do {
            Page<Task> p = list(queue, state, null, 1000, cursor);
            out.addAll(p.items());
            cursor = p.nextCursor();
        } while (cursor != null);
        return out;
    }

    // ---- workers

    /**
     * Claims up to {@code max} due tasks of {@code queue}, leased for {@code lease}.
     *
     * @param queue queue
     * @param max 1-10,000
     * @param lease lease length
     * @param wait how long to wait for a task (long poll), or zero
     * @return the leases
     */
    public List<Task> claim(String queue, int max, Duration lease, Duration wait) {
        return claim(queue, max, lease, wait, List.of()).tasks();
    }

    /**
     * Claims, carrying the outcomes of earlier leases (applied first).
     *
     * @param queue queue
     * @param max 1-10,000
     * @param lease lease length
     * @param wait long-poll wait, or zero
     * @param acks outcomes to report
     * @return the leases and one result per ack
     */
    public ClaimResult claim(String queue, int max, Duration lease, Duration wait, List<AckItem> acks) {
        return unwrapJoin(claimAsync(queue, max, lease, wait, acks, null));
    }

    /**
     * Claims as the named worker: each task claimed shows {@code worker} as {@link Task#worker()}
     * (the dashboard and {@code GET /v1/tasks/{id}} show who holds or last ran it).
     *
     * @param queue queue
     * @param max 1-10,000
     * @param lease lease length
     * @param wait long-poll wait, or zero
     * @param acks outcomes to report
     * @param worker the claimer's name (at most 200 bytes, no control characters), or null or empty
     *     for none
     * @return the leases and one result per ack
     * @throws InvalidArgumentException (field {@code worker}) for a name chronoqd refuses
     */
    public ClaimResult claim(String queue, int max, Duration lease, Duration wait, List<AckItem> acks, String worker) {
        return unwrapJoin(claimAsync(queue, max, lease, wait, acks, worker));
    }

    /**
     * Asynchronous claim.
     *
     * @param queue q
     * @param max max
     * @param lease lease
     * @param wait wait
     * @param acks acks
     * @return the answer
     */
    public CompletableFuture<ClaimResult> claimAsync(String queue, int max, Duration lease, Duration wait, List<AckItem> acks) {
        return claimAsync(queue, max, lease, wait, acks, null);
    }

    /**
     * Asynchronous claim as the named worker.
     *
     * @param queue q
     * @param max max
     * @param lease lease
     * @param wait wait
     * @param acks acks
     * @param worker the claimer's name, or null or empty for none
     * @return the answer
     */
    public CompletableFuture<ClaimResult> claimAsync(String queue, int max, Duration lease, Duration wait, List<AckItem> acks,
                                                     String worker) {
        ObjectNode b = obj();
        b.put("max", max);
        if (lease != null) b.put("lease_ms", lease.toMillis());
        if (wait != null && !wait.isZero()) b.put("wait_ms", wait.toMillis());
        if (worker != null && !worker.isEmpty()) b.put("worker", worker);
        if (acks != null && !acks.isEmpty()) {
            ArrayNode a = b.putArray("acks");
            for (AckItem i : acks) a.add(i.toJson());
        }
        return callAsync("POST", "/v1/queues/" + Json.seg(queue) + "/claim", b, true, wait).thenApply(r -> {
            List<AckResult> res = new ArrayList<>();
            for (JsonNode n : r.path("acks")) res.add(AckResult.from(n, null));
            return new ClaimResult(tasks(r.path("tasks")), res);
        });
    }

    /**
     * Acknowledges a lease (the task succeeded).
     *
     * @param id id
     * @param token token
     * @throws StaleTokenException if no longer ours
     */
    public void ack(String id, long token) { unwrapJoin(ackAsync(id, token)); }

    /**
     * @param id id
     * @param token token
     * @return completion, asynchronously
     */
    public CompletableFuture<Void> ackAsync(String id, long token) {
        ObjectNode b = obj();
        b.put("token", token);
        return callAsync("POST", "/v1/tasks/" + Json.seg(id) + "/ack", b, true, null).thenApply(r -> null);
    }

    /**
     * Fails a lease: it retries after {@code retryIn} (or the backoff when null) or goes dead.
     *
     * @param id id
     * @param token token
     * @param error error text (kept as last_error)
     * @param retryIn retry delay, or null
     */
    public void fail(String id, long token, String error, Duration retryIn) { unwrapJoin(failAsync(id, token, error, retryIn)); }

    /**
     * @param id id
     * @param token token
     * @param error text
     * @param retryIn delay or null
     * @return completion
     */
    public CompletableFuture<Void> failAsync(String id, long token, String error, Duration retryIn) {
        ObjectNode b = obj();
        b.put("token", token);
        if (error != null) b.put("error", error);
        if (retryIn != null) b.put("retry_in_ms", retryIn.toMillis());
        return callAsync("POST", "/v1/tasks/" + Json.seg(id) + "/fail", b, true, null).thenApply(r -> null);
    }

    /**
     * Extends a lease.
     *
     * @param id id
     * @param token token
     * @param lease new length from now
     * @return the new lease end
     */
    public Instant extend(String id, long token, Duration lease) { return unwrapJoin(extendAsync(id, token, lease)); }

    /**
     * @param id id
     * @param token token
     * @param lease lease
     * @return the new lease end, asynchronously
     */
    public CompletableFuture<Instant> extendAsync(String id, long token, Duration lease) {
        ObjectNode b = obj();
        b.put("token", token);
        b.put("lease_ms", lease.toMillis());
        return callAsync("POST", "/v1/tasks/" + Json.seg(id) + "/extend", b, true, null)
                .thenApply(r -> Json.time(r, "lease_until"));
    }

    /**
     * Reports many outcomes (successes and failures), {@value #MAX_BATCH} per request.
     *
     * @param items outcomes
     * @return one result per item, in order
     */
    public List<AckResult> ackMany(List<AckItem> items) { return unwrapJoin(ackManyAsync(items)); }

    /**
     * @param items outcomes
     * @return the results, asynchronously
     */
    public CompletableFuture<List<AckResult>> ackManyAsync(List<AckItem> items) {
        List<ObjectNode> bodies = new ArrayList<>();
        for (AckItem i : items) bodies.add(i.toJson());
        List<AckResult> out = new ArrayList<>();
        CompletableFuture<Void> chain = CompletableFuture.completedFuture(null);
        for (int[] range : chunks(bodies)) {
            List<ObjectNode> part = bodies.subList(range[0], range[1]);
            chain = chain.thenCompose(v -> {
                ObjectNode b = obj();
                b.putArray("acks").addAll(part);
                return transport.sendAsync(new Transport.Call("POST", "/v1/acks", b, true, null)).thenAccept(ans -> {
                    for (JsonNode n : ans.body.path("results")) out.add(AckResult.from(n, ans.node));
                });
            });
        }
        return chain.thenApply(v -> out);
    }

    // ---- queues

    /**
     * @return every queue
     */
    public List<QueueInfo> listQueues() {
        List<QueueInfo> out = new ArrayList<>();
        for (JsonNode n : call("GET", "/v1/queues", null, false).path("queues")) out.add(new QueueInfo(n));
        return out;
    }

    /**
     * @param name queue
     * @return the queue
     */
    public QueueInfo getQueue(String name) { return new QueueInfo(call("GET", "/v1/queues/" + Json.seg(name), null, false)); }

    /**
     * @param name queue
     * @param settings changes
     * @return the queue
     */
    public QueueInfo configureQueue(String name, QueueSettings settings) {
        return new QueueInfo(call("PUT", "/v1/queues/" + Json.seg(name), settings.json, false));
    }

    /**
     * @param name queue
     * @return the queue, paused
     */
    public QueueInfo pauseQueue(String name) { return new QueueInfo(call("POST", "/v1/queues/" + Json.seg(name) + "/pause", null, true)); }

    /**
     * @param name queue
     * @return the queue, resumed
     */
    public QueueInfo resumeQueue(String name) { return new QueueInfo(call("POST", "/v1/queues/" + Json.seg(name) + "/resume", null, true)); }

    // ---- schedules

    /**
     * @param spec definition (with a name)
     * @return the schedule
     * @throws ConflictException if the name is taken
     */
    public Schedule createSchedule(ScheduleSpec spec) { return new Schedule(call("POST", "/v1/schedules", spec.json, true)); }

    /**
     * Creates or replaces.
     *
     * @param name name
     * @param spec definition
     * @return the schedule
     */
    public Schedule putSchedule(String name, ScheduleSpec spec) {
        return new Schedule(call("PUT", "/v1/schedules/" + Json.seg(name), spec.json, false));
    }

    /**
     * @param name name
     * @return the schedule
     */
    public Schedule getSchedule(String name) { return new Schedule(call("GET", "/v1/schedules/" + Json.seg(name), null, false)); }

    /**
     * @param queue queue or null
     * @param limit 1-1000
     * @param cursor cursor or null
     * @return a page of schedules
     */
    public Page<Schedule> listSchedules(String queue, int limit, String cursor) {
        StringBuilder q = new StringBuilder("/v1/schedules?limit=").append(limit);
        if (queue != null) q.append("&queue=").append(Json.seg(queue));
        if (cursor != null) q.append("&cursor=").append(Json.seg(cursor));
        JsonNode r = call("GET", q.toString(), null, false);
        List<Schedule> out = new ArrayList<>();
        for (JsonNode n : r.path("schedules")) out.add(new Schedule(n));
        return new Page<>(out, Json.text(r, "next_cursor"));
    }

    /**
     * @param name name
     */
    public void deleteSchedule(String name) { call("DELETE", "/v1/schedules/" + Json.seg(name), null, false); }

    /**
     * @param name name
     * @return the schedule, paused
     */
    public Schedule pauseSchedule(String name) { return new Schedule(call("POST", "/v1/schedules/" + Json.seg(name) + "/pause", null, true)); }

    /**
     * @param name name
     * @return the schedule, resumed
     */
    public Schedule resumeSchedule(String name) { return new Schedule(call("POST", "/v1/schedules/" + Json.seg(name) + "/resume", null, true)); }

    /**
     * @param name name
     * @param count 1-1000
     * @return the next occurrences
     */
    public List<Instant> nextOccurrences(String name, int count) {
        List<Instant> out = new ArrayList<>();
        for (JsonNode n : call("GET", "/v1/schedules/" + Json.seg(name) + "/next?count=" + count, null, false).path("next"))
            out.add(Json.parseTime(n.asText()));
        return out;
    }

    // ---- locks

    /**
     * Acquires a keyed lock and keeps it (extended in the background every third of the lease)
     * until {@link ChronoqLock#close()}.
     *
     * @param key lock key
     * @param wait how long to wait for it
     * @param lease lease length
     * @return the held lock
     * @throws LockWaitTimeoutException if it stayed held by another for the wait
     */
    public ChronoqLock lock(String key, Duration wait, Duration lease) { return lock(key, wait, lease, null); }

    /**
     * @param key key
     * @param wait wait
     * @param lease lease
     * @param owner owner shown to others, or null
     * @return the held lock
     */
    public ChronoqLock lock(String key, Duration wait, Duration lease, String owner) {
        return new ChronoqLock(this, key, wait, lease, owner);
    }

    /**
     * @param key key
     * @param wait wait
     * @param lease lease
     * @param owner owner or null
     * @return the grant
     */
    public LockGrant acquireLock(String key, Duration wait, Duration lease, String owner) {
        ObjectNode b = obj();
        b.put("wait_ms", wait.toMillis());
        b.put("lease_ms", lease.toMillis());
        if (owner != null) b.put("owner", owner);
        return grant(call("POST", "/v1/locks/" + Json.seg(key) + "/acquire", b, false, wait));
    }

    private static LockGrant grant(JsonNode r) {
        return new LockGrant(Json.text(r, "key"), r.path("token").asLong(), Json.time(r, "expires_at"));
    }

    /**
     * @param key key
     * @param token token
     * @param lease new lease from now
     * @return the grant
     * @throws StaleTokenException if not ours
     */
    public LockGrant extendLock(String key, long token, Duration lease) {
        ObjectNode b = obj();
        b.put("token", token);
        b.put("lease_ms", lease.toMillis());
        return grant(call("POST", "/v1/locks/" + Json.seg(key) + "/extend", b, true));
    }

    /**
     * @param key key
     * @param token token
     * @throws StaleTokenException if not ours
     */
    public void releaseLock(String key, long token) {
        ObjectNode b = obj();
        b.put("token", token);
        call("POST", "/v1/locks/" + Json.seg(key) + "/release", b, true);
    }

    /**
     * @param key key
     * @return the lock's state
     */
    public LockInfo getLock(String key) {
        JsonNode r = call("GET", "/v1/locks/" + Json.seg(key), null, false);
        return new LockInfo(Json.text(r, "key"), r.path("held").asBoolean(), Json.text(r, "owner"),
                Json.time(r, "expires_at"), r.path("waiters").asInt());
    }

    // ---- operations

    /**
     * @return {@code GET /healthz}
     */
    public JsonNode health() { return call("GET", "/healthz", null, false); }

    /**
     * @return the server version
     */
    public String version() { return Json.text(call("GET", "/v1/version", null, false), "version"); }

    /**
     * @return {@code GET /v1/cluster} (cluster mode)
     */
    public JsonNode cluster() { return call("GET", "/v1/cluster", null, false); }

    static <T> T unwrapJoin(CompletableFuture<T> f) {
        try {
            return f.join();
        } catch (CompletionException e) {
            throw unwrap(e);
        }
    }

    @Override
    public String toString() { return "ChronoqClient" + Arrays.toString(transport.nodes().toArray()); }
}
