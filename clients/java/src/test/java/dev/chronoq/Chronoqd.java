package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/** A chronoqd started for tests on a free port with a temporary data directory. */
final class Chronoqd implements AutoCloseable {
    static final Duration DEADLINE = Duration.ofSeconds(45);
    private static final AtomicInteger SEQ = new AtomicInteger();

    final Process process;
    /** kill() ended it, so its exit status says nothing. */
    private volatile boolean killed;
    final Path data;
    final int port;
    final String url;

    private Chronoqd(Process process, Path data, int port, boolean tls) {
        this.process = process;
        this.data = data;
        this.port = port;
        this.url = (tls ? "https" : "http") + "://127.0.0.1:" + port;
    }

    static String binary() {
        String b = System.getenv("CHRONOQD");
        if (b != null && !b.isEmpty()) return b;
        // The checkout's developer build (build/dev): the nearest one above the working directory.
        for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path candidate = dir.resolve("build/dev/src/server/chronoqd");
            if (Files.isExecutable(candidate)) return candidate.toString();
        }
        return "build/dev/src/server/chronoqd";
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    static Chronoqd start() throws Exception {
        return start(null);
    }

    /**
     * Starts chronoqd; with a token, it requires {@code Authorization: Bearer <token>}; {@code extra} are more
     * arguments (a cluster node's {@code --cluster --store ...}).
     */
    static Chronoqd start(String token, String... extra) throws Exception {
        String bin = binary();
        if (!new File(bin).canExecute()) throw new IllegalStateException("no chronoqd at " + bin + " (set CHRONOQD)");
        Path data = Files.createTempDirectory("chronoq-java-test-");
        int port = freePort();
        java.util.List<String> cmd = new java.util.ArrayList<>(java.util.List.of(bin, "--data", data.toString(), "--listen", "127.0.0.1:" + port));
        if (token != null) {
            Path tf = data.resolve("token");
            Files.writeString(tf, token + "\n");
            cmd.add("--token-file");
            cmd.add(tf.toString());
        }
        cmd.addAll(java.util.List.of(extra));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().remove("CHRONOQ_TOKEN");
        pb.environment().remove("CHRONOQ_TOKEN_FILE");
        pb.redirectError(data.resolve("stderr.log").toFile());
        Process p = pb.start();
        CountDownLatch ready = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean tls = new java.util.concurrent.atomic.AtomicBoolean();
        StringBuilder seen = new StringBuilder();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    synchronized (seen) { if (seen.length() < 4000) seen.append(line).append('\n'); }
                    if (line.contains("listening on")) {
                        tls.set(line.contains("listening on https://")); // chronoqd --tls-cert
                        ready.countDown();
                    }
                }
            } catch (IOException ignored) {
                // process gone
            }
        }, "chronoqd-stdout-" + SEQ.incrementAndGet());
        reader.setDaemon(true);
        reader.start();
        if (!ready.await(DEADLINE.toSeconds(), TimeUnit.SECONDS)) {
            p.destroyForcibly();
            String err = Files.exists(data.resolve("stderr.log")) ? Files.readString(data.resolve("stderr.log")) : "";
            throw new IllegalStateException("chronoqd did not say 'listening on' within " + DEADLINE
                    + "; stdout: " + seen + " stderr: " + err);
        }
        return new Chronoqd(p, data, port, tls.get());
    }

    /**
     * Starts {@code chronoqd --test-clock}: its time stands still from start-up and moves only by
     * {@link #advanceClock} (docs/API.md, "The test clock").
     */
    static Chronoqd startTestClock() throws Exception {
        return start(null, "--test-clock");
    }

    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    private JsonNode clockCall(String body) throws Exception {
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(url + "/v1/test/clock")).timeout(DEADLINE);
        rb = body == null ? rb.GET() : rb.header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<String> r = HTTP.send(rb.build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new AssertionError((body == null ? "GET" : "POST " + body) + " /v1/test/clock answered " + r.statusCode()
                    + ": " + r.body() + " (is " + binary() + " a chronoqd with --test-clock?)");
        }
        return Transport.MAPPER.readTree(r.body());
    }

    /** GET /v1/test/clock: the server's time. */
    Instant clockNow() throws Exception {
        return Instant.parse(clockCall(null).get("now").asText());
    }

    /** GET /v1/test/clock: the deadlines the server's threads wait for. */
    List<Instant> clockWaits() throws Exception {
        List<Instant> out = new ArrayList<>();
        for (JsonNode w : clockCall(null).path("waits")) out.add(Instant.parse(w.asText()));
        return out;
    }

    /**
     * POST /v1/test/clock {"advance_ms":ms}: moves the server's time; it answers once the engine has acted on it
     * (due tasks handed out, lapsed leases and locks freed, waits that ran out answered).
     *
     * @return the server's new time
     */
    Instant advanceClock(long ms) throws Exception {
        return Instant.parse(clockCall("{\"advance_ms\":" + ms + "}").get("now").asText());
    }

    /**
     * Waits until one of the server's threads waits for {@code now + wait} (a claim's or a lock's wait_ms,
     * begun by a call made after the server's time last moved), so that moving time then ends that wait.
     */
    void awaitServerWait(String what, Duration wait) throws Exception {
        Instant deadline = clockNow().plus(wait);
        long end = System.nanoTime() + DEADLINE.toNanos();
        while (true) {
            List<Instant> waits = clockWaits();
            if (waits.contains(deadline)) return;
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out after " + DEADLINE + " waiting for " + what + " to wait on chronoqd until "
                        + deadline + "; it waits for " + waits);
            }
            Thread.sleep(5);
        }
    }

    ChronoqClient client() {
        return ChronoqClient.builder().urls(url).timeout(Duration.ofSeconds(60)).build();
    }

    /** Ends chronoqd as a crash of its machine would (SIGKILL) and waits for it. */
    void kill() throws InterruptedException {
        killed = true;
        process.destroyForcibly();
        if (!process.waitFor(DEADLINE.toSeconds(), TimeUnit.SECONDS)) {
            throw new IllegalStateException("chronoqd did not end within " + DEADLINE + " of SIGKILL");
        }
    }

    @Override
    public void close() throws Exception {
        process.destroy(); // SIGTERM
        if (!process.waitFor(DEADLINE.toSeconds(), TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
            throw new IllegalStateException("chronoqd did not stop within " + DEADLINE + " of SIGTERM");
        }
        // Unless kill() ended it, chronoqd exits 0 on SIGTERM: anything else is a crash at
        // shutdown or a sanitizer's report (the tests run the ASan+UBSan build, whose
        // LeakSanitizer checks at exit), which is in its stderr.
        if (!killed && process.exitValue() != 0) {
            String err = Files.readString(data.resolve("stderr.log"));
            throw new IllegalStateException("chronoqd exited with " + process.exitValue()
                    + " after SIGTERM; stderr: " + err.substring(Math.max(0, err.length() - 4000)));
        }
        try (var s = Files.walk(data)) {
            s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        }
    }

    /** Polls {@code cond} until it holds or the deadline passes (then fails with {@code what}). */
    static void await(String what, BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + DEADLINE.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) throw new AssertionError("timed out after " + DEADLINE + " waiting for " + what);
            Thread.sleep(20);
        }
    }
}
