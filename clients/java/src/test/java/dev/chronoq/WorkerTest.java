package dev.chronoq;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.*;

/**
 * The worker: C14 (every test but the C15 ones), C15 (its name). The lease extension and the long poll that
 * must outlast a handler run on the test clock ({@link ServerTest#tcServer}, {@link ServerTest#time}); the
 * other tests use chronoqd on the machine's clock, where a long poll ends as soon as a task comes, and wait
 * (with a deadline) only for events: a task's state, a handler that started.
 */
class WorkerTest extends ServerTest {
    private static ChronoqWorker.Builder worker() {
        return ChronoqWorker.builder(client).wait(Duration.ofMillis(500));
    }

    // C14: success acks, an exception fails the task with the error text
    @Test
    void c14_successAcksAndAnExceptionFails() throws Exception {
        client.enqueue(TaskSpec.builder("c14-a").id("ok-1").payload(Map.of("fail", false)).build());
        client.enqueue(TaskSpec.builder("c14-a").id("bad-1").payload(Map.of("fail", true)).maxAttempts(1).build());
        try (ChronoqWorker w = worker().concurrency(2).build()) {
            w.handle("c14-a", t -> {
                if (t.payload().get("fail").asBoolean()) throw new IllegalStateException("the disk is on fire");
            });
            w.start();
            Chronoqd.await("ok-1 to succeed", () -> client.get("ok-1").state().equals("succeeded"));
            Chronoqd.await("bad-1 to die", () -> client.get("bad-1").state().equals("dead"));
        }
        String err = client.get("bad-1").lastError();
        assertTrue(err.contains("IllegalStateException: the disk is on fire"), err);
    }

    // C14: RetryLaterException sets the message and the delay
    @Test
    void c14_retryLater() throws Exception {
        client.enqueue(TaskSpec.builder("c14-r").id("later-1").build());
        try (ChronoqWorker w = worker().concurrency(1).build()) {
            w.handle("c14-r", t -> { throw new ChronoqWorker.RetryLaterException("not yet", Duration.ofHours(1)); });
            w.start();
            Chronoqd.await("later-1 to be rescheduled", () -> "not yet".equals(client.get("later-1").lastError()));
        }
        Task t = client.get("later-1");
        assertEquals("scheduled", t.state());
        assertTrue(t.runAt().isAfter(java.time.Instant.now().plus(Duration.ofMinutes(50))));
    }

    // C14: a key's tasks run in order under 8 threads
    @Test
    void c14_perKeyOrderUnderEightThreads() throws Exception {
        int keys = 4, per = 15;
        List<TaskSpec> specs = new ArrayList<>();
        for (int i = 0; i < per; i++)
            for (int k = 0; k < keys; k++)
                specs.add(TaskSpec.builder("c14-keys").key("k" + k).payload(Map.of("k", k, "i", i)).build());
        client.enqueueMany(specs);
        Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
        Map<Integer, AtomicInteger> inside = new ConcurrentHashMap<>();
        AtomicBoolean overlap = new AtomicBoolean();
        AtomicInteger done = new AtomicInteger();
        try (ChronoqWorker w = worker().concurrency(8).build()) {
            w.handle("c14-keys", t -> {
                int k = t.payload().get("k").asInt();
                if (inside.computeIfAbsent(k, x -> new AtomicInteger()).incrementAndGet() > 1) overlap.set(true);
                seen.computeIfAbsent(k, x -> Collections.synchronizedList(new ArrayList<>())).add(t.payload().get("i").asInt());
                Thread.sleep(5); // work that takes a while, so that two tasks of a key run at once if the worker let them
                inside.get(k).decrementAndGet();
                done.incrementAndGet();
            });
            w.start();
            Chronoqd.await("every keyed task to run", () -> done.get() == keys * per);
            Chronoqd.await("every keyed task to succeed", () -> client.getQueue("c14-keys").count("succeeded") == keys * per);
            assertTrue(w.stats().claimsWithAcks() + w.stats().ackRequests() > 0);
            assertEquals(0, w.stats().refused());
        }
        assertFalse(overlap.get(), "two tasks of one key ran at once");
        for (int k = 0; k < keys; k++) {
            List<Integer> order = seen.get(k);
            List<Integer> sorted = new ArrayList<>(order);
            Collections.sort(sorted);
            assertEquals(sorted, order, "key k" + k);
            assertEquals(per, order.size());
        }
    }

    // C14: a batch handler reports per-item results in one request
    @Test
    void c14_batchHandlerPartialSuccess() throws Exception {
        List<TaskSpec> specs = new ArrayList<>();
        for (int i = 0; i < 10; i++) specs.add(TaskSpec.builder("c14-batch").id("b-" + i).payload(i).build());
        client.enqueueMany(specs);
        AtomicInteger batches = new AtomicInteger();
        try (ChronoqWorker w = worker().build()) {
            w.handleBatch("c14-batch", 100, tasks -> {
                batches.incrementAndGet();
                List<ChronoqWorker.ItemResult> out = new ArrayList<>();
                for (Task t : tasks)
                    out.add(t.payload().asInt() % 2 == 0 ? ChronoqWorker.ItemResult.ok()
                            : ChronoqWorker.ItemResult.retry("odd " + t.payload().asInt(), Duration.ofHours(1)));
                return out;
            });
            w.start();
            Chronoqd.await("the batch to be reported", () -> client.get("b-9").lastError() != null && client.get("b-8").state().equals("succeeded"));
            assertEquals(1, batches.get());
            assertEquals(1, w.stats().ackRequests(), "one POST /v1/acks for the batch");
            assertEquals(5, w.stats().succeeded());
            assertEquals(5, w.stats().failed());
        }
        for (int i = 0; i < 10; i++) {
            Task t = client.get("b-" + i);
            if (i % 2 == 0) assertEquals("succeeded", t.state());
            else {
                assertEquals("scheduled", t.state());
                assertEquals("odd " + i, t.lastError());
            }
        }
    }

    /**
     * Closes {@code w}, a worker of {@link ServerTest#tcClient} whose claims long-poll for {@code wait}: close()
     * waits for the claim in flight, which on the test clock ends only when the test moves time past its wait.
     */
    private static void closeOnTestClock(ChronoqWorker w, Duration wait) throws Exception {
        CompletableFuture<Void> closing = CompletableFuture.runAsync(w::close);
        Chronoqd.await("the worker to close", () -> {
            try {
                // move time only while the claimer is parked in a long poll begun at the current time
                if (!closing.isDone() && tcServer.clockWaits().contains(tcServer.clockNow().plus(wait))) time.advance(wait);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
            return closing.isDone();
        });
        closing.get();
    }

    /** Whether a thread named {@code name} is alive. */
    private static boolean threadAlive(String name) {
        return Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.getName().equals(name) && t.isAlive());
    }

    /** Whether {@code t} is in ChronoqWorker.close(), waiting for the handler pool to end. */
    private static boolean waitingForHandlers(Thread t) {
        StackTraceElement[] st = t.getStackTrace();
        for (int i = 0; i + 1 < st.length; i++) {
            if (st[i].getMethodName().equals("awaitTermination") && st[i + 1].getClassName().equals(ChronoqWorker.class.getName())
                    && st[i + 1].getMethodName().equals("close")) return true;
        }
        return false;
    }

    // C14: a stop finishes running tasks and reports them; the claimer is gone once close() returns
    @Test
    void c14_closeFinishesRunningTasks() throws Exception {
        client.enqueue(TaskSpec.builder("c14-stop").id("slow-1").build());
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicBoolean finished = new AtomicBoolean();
        ChronoqWorker w = worker().concurrency(2).build();
        w.handle("c14-stop", t -> {
            started.countDown();
            assertTrue(release.await(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS), "the test did not release the handler");
            finished.set(true);
        });
        w.start();
        assertTrue(started.await(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS), "the handler did not start");
        Thread closer = new Thread(w::close, "c14-closer");
        try {
            closer.start();
            Chronoqd.await("close() to wait for the running handler", () -> waitingForHandlers(closer) || !closer.isAlive());
            assertTrue(closer.isAlive(), "close() returned while the handler was running");
            assertFalse(threadAlive("chronoq-claim-c14-stop"), "close() waits for the handlers only once the claimer has stopped");
            release.countDown();
            closer.join(Chronoqd.DEADLINE.toMillis());
            assertFalse(closer.isAlive(), "close() did not return within " + Chronoqd.DEADLINE + " of the handler's end");
        } finally {
            release.countDown();
        }
        assertTrue(finished.get(), "close() returned before the handler finished");
        assertEquals("succeeded", client.get("slow-1").state());
        // no more claims after close: its claimer and handler threads are gone
        client.enqueue(TaskSpec.builder("c14-stop").id("after-1").build());
        assertFalse(threadAlive("chronoq-claim-c14-stop"), "the claimer outlived close()");
        assertFalse(threadAlive("chronoq-c14-stop-1") || threadAlive("chronoq-c14-stop-2"), "a handler thread outlived close()");
        assertEquals("scheduled", client.get("after-1").state());
    }

    // C14: a lease (600 ms) is extended every third of it while a handler runs. On the test clock: the handler
    // runs until the test releases it, and each 200 ms the test moves time runs one extension, answered
    // before the lease would lapse.
    @Test
    void c14_leaseExtendedWhileRunning() throws Exception {
        ChronoqClient client = tcClient;
        client.enqueue(TaskSpec.builder("c14-lease").id("long-1").build());
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        try (ChronoqWorker w = ChronoqWorker.builder(client).concurrency(1).prefetch(0).wait(Duration.ZERO)
                .lease(Duration.ofMillis(600)).build()) {
            w.handle("c14-lease", t -> {
                started.countDown();
                assertTrue(release.await(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS), "the test did not release the handler");
            });
            w.start();
            assertTrue(started.await(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS), "the handler did not start");
            try {
                Instant start = tcServer.clockNow();
                assertEquals(start.plusMillis(600), client.get("long-1").leaseUntil());
                for (int i = 1; i <= 6; i++) { // 1,200 ms: two leases' worth
                    time.advance(Duration.ofMillis(200));
                    assertEquals(i, w.stats().extensions(), "extensions after " + 200 * i + " ms");
                    Task t = client.get("long-1");
                    assertEquals("running", t.state(), "the lease lapsed after " + 200 * i + " ms");
                    assertEquals(start.plusMillis(200L * i + 600), t.leaseUntil(), "the lease after " + 200 * i + " ms");
                }
            } finally {
                release.countDown(); // a failed check must not leave close() waiting for the handler
            }
            Chronoqd.await("long-1 to succeed", () -> client.get("long-1").state().equals("succeeded"));
            assertEquals(0, w.stats().leasesLost());
            assertEquals(0, w.stats().refused());
        }
        assertEquals(1, client.get("long-1").attempt());
        assertTrue(time.pending().isEmpty(), "close() left a timer: " + time.pending());
    }

    // C14: outcomes ride on the next claim, or go to POST /v1/acks after the linger while a claim waits
    @Test
    void c14_outcomesRideOnClaimsOrGoAfterALinger() throws Exception {
        // Each outcome rides on the next claim, which goes as soon as the slot is free; the flusher's
        // linger is longer than the test, so no outcome can go by POST /v1/acks and none is left over.
        final int rides = 20;
        for (int i = 0; i < rides; i++) client.enqueue(TaskSpec.builder("c14-ride").id("ride-" + i).build());
        try (ChronoqWorker w = worker().concurrency(1).prefetch(0).ackLinger(Duration.ofHours(1)).build()) {
            w.handle("c14-ride", t -> { });
            w.start();
            Chronoqd.await("the ride tasks to succeed", () -> client.getQueue("c14-ride").count("succeeded") == rides);
            assertTrue(w.stats().claimsWithAcks() >= 1, "no claim carried acks");
            assertEquals(0, w.stats().ackRequests(), "an outcome went by POST /v1/acks");
        }
        // On the test clock the claimer's 3 s long poll lasts until the test moves time: the outcome cannot ride on it.
        tcClient.enqueue(TaskSpec.builder("c14-linger").id("linger-1").build());
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Duration wait = Duration.ofSeconds(3);
        ChronoqWorker w = ChronoqWorker.builder(tcClient).concurrency(2).prefetch(0).wait(wait).build();
        try {
            w.handle("c14-linger", t -> {
                started.countDown();
                assertTrue(release.await(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS), "the test did not release the handler");
            });
            w.start();
            assertTrue(started.await(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS), "the handler did not start");
            tcServer.awaitServerWait("the worker's next claim (a free slot) to park in its 3 s long poll", wait);
            Instant parkedUntil = tcServer.clockNow().plus(wait);
            release.countDown();
            Chronoqd.await("linger-1 to succeed", () -> tcClient.get("linger-1").state().equals("succeeded"));
            assertEquals(1, w.stats().ackRequests(), "the outcome did not go by POST /v1/acks");
            assertEquals(0, w.stats().claimsWithAcks());
            assertTrue(tcServer.clockWaits().contains(parkedUntil), "the long poll ended: " + tcServer.clockWaits());
        } finally {
            release.countDown();
            closeOnTestClock(w, wait);
        }
    }

    // C15: a worker names itself <hostname>:<pid> by default, and the name stays on the task it ran;
    // workerName overrides it
    @Test
    void c15_workerNamesItself() throws Exception {
        String expected = java.net.InetAddress.getLocalHost().getHostName() + ":" + ProcessHandle.current().pid();
        assertEquals(expected, ChronoqWorker.defaultWorkerName());
        client.enqueue(TaskSpec.builder("c15-w").id("c15-w-1").build());
        try (ChronoqWorker w = worker().concurrency(1).build()) {
            assertEquals(expected, w.workerName());
            w.handle("c15-w", t -> { });
            w.start();
            Chronoqd.await("c15-w-1 to succeed", () -> client.get("c15-w-1").state().equals("succeeded"));
        }
        assertEquals(expected, client.get("c15-w-1").worker());

        client.enqueue(TaskSpec.builder("c15-n").id("c15-n-1").build());
        try (ChronoqWorker w = worker().concurrency(1).workerName("billing-7").build()) {
            w.handle("c15-n", t -> { });
            w.start();
            Chronoqd.await("c15-n-1 to succeed", () -> client.get("c15-n-1").state().equals("succeeded"));
        }
        assertEquals("billing-7", client.get("c15-n-1").worker());
    }

    // C15: an absurdly long hostname is cut on a character boundary to fit chronoqd's 200 bytes
    @Test
    void c15_workerNameFits200Bytes() {
        for (String host : List.of("\u00e9".repeat(150), "h".repeat(300), "short")) {
            String name = ChronoqWorker.workerName(host, 123456);
            assertTrue(name.getBytes(java.nio.charset.StandardCharsets.UTF_8).length <= 200, name);
            assertTrue(name.endsWith(":123456"), name);
            assertTrue(host.startsWith(name.substring(0, name.length() - ":123456".length())), name);
        }
        assertEquals("h:7", ChronoqWorker.workerName("h", 7));
    }
}
