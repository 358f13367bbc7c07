package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import static org.junit.jupiter.api.Assertions.*;

/** Task, claim, queue and schedule calls against a real chronoqd. */
class ClientTest extends ServerTest {
    // C1
    @Test
    void c1_enqueueEveryFieldAndGet() {
        Instant runAt = Instant.now().plus(1, ChronoUnit.HOURS).truncatedTo(ChronoUnit.MILLIS);
        Task t = client.enqueue(TaskSpec.builder("c1").id("share:42").payload(Map.of("share", 42))
                .runAt(runAt).maxAttempts(7).priority(3).backoff(new Backoff(Duration.ofMillis(100), Duration.ofSeconds(5)))
                .target(new Target("http://127.0.0.1:9/hook", "PUT", Map.of("X-A", "b"), Duration.ofSeconds(3)))
                .key("customer:7").build());
        assertEquals("share:42", t.id());
        Task g = client.get("share:42");
        assertEquals("c1", g.queue());
        assertEquals(42, g.payload().get("share").asInt());
        assertEquals(runAt, g.runAt());
        assertEquals(7, g.maxAttempts());
        assertEquals(3, g.priority());
        assertEquals("customer:7", g.key());
        assertEquals("scheduled", g.state());
        assertEquals("http://127.0.0.1:9/hook", g.target().get("url").asText());
        assertEquals("PUT", g.target().get("method").asText());
        assertEquals("b", g.target().get("headers").get("X-A").asText());
        assertEquals(3000, g.target().get("timeout_ms").asInt());
        assertNotNull(g.createdAt());

        // delay and a generated id, no key
        Task d = client.enqueue(TaskSpec.builder("c1").delay(Duration.ofMinutes(10)).payload(List.of(1, 2)).build());
        assertTrue(d.id().startsWith("_"));
        assertNull(d.key());
        assertTrue(d.runAt().isAfter(Instant.now().plus(Duration.ofMinutes(9))));
        assertEquals(2, client.get(d.id()).payload().size());
    }

    // C1 (asynchronous variants)
    @Test
    void c1_asyncVariants() {
        CompletableFuture<Task> f = client.enqueueAsync(TaskSpec.builder("c1-async").id("async-1").payload(Map.of("a", 1)).build());
        Task t = f.join();
        assertEquals("async-1", t.id());
        assertEquals(1, client.getAsync("async-1").join().payload().get("a").asInt());
        ClaimResult r = client.claimAsync("c1-async", 10, Duration.ofSeconds(30), Duration.ZERO, List.of()).join();
        assertEquals(1, r.tasks().size());
        client.ackAsync("async-1", r.tasks().get(0).token()).join();
        assertEquals("succeeded", client.get("async-1").state());
        var e = assertThrows(java.util.concurrent.CompletionException.class, () -> client.getAsync("nope-async").join());
        assertInstanceOf(NotFoundException.class, e.getCause());
    }

    // C2
    @Test
    void c2_cancelAndReschedule() {
        client.enqueue(TaskSpec.builder("c2").id("c2-a").delay(Duration.ofHours(1)).build());
        Task c = client.cancel("c2-a");
        assertEquals("cancelled", c.state());
        assertEquals("cancelled", client.get("c2-a").state());

        client.enqueue(TaskSpec.builder("c2").id("c2-b").delay(Duration.ofHours(1)).payload(Map.of("v", 1)).build());
        Instant later = Instant.now().plus(2, ChronoUnit.DAYS).truncatedTo(ChronoUnit.MILLIS);
        Task r = client.reschedule("c2-b", later, Map.of("v", 2));
        assertEquals(later, r.runAt());
        assertEquals(2, client.get("c2-b").payload().get("v").asInt());
        Task r2 = client.reschedule("c2-b", Duration.ofHours(5));
        assertTrue(r2.runAt().isBefore(later));
    }

    // C2: cancelling a running task is failed_precondition
    @Test
    void c2_cancelRunningIsFailedPrecondition() {
        client.enqueue(TaskSpec.builder("c2-run").id("c2-run").build());
        List<Task> l = client.claim("c2-run", 1, Duration.ofSeconds(30), Duration.ZERO);
        assertEquals(1, l.size());
        FailedPreconditionException e = assertThrows(FailedPreconditionException.class, () -> client.cancel("c2-run"));
        assertEquals("failed_precondition", e.code());
        assertEquals(409, e.status());
        client.ack("c2-run", l.get(0).token());
    }

    // C3
    @Test
    void c3_onConflict() {
        client.enqueue(TaskSpec.builder("c3").id("c3").payload(Map.of("v", 1)).delay(Duration.ofHours(1)).build());
        ConflictException e = assertThrows(ConflictException.class,
                () -> client.enqueue(TaskSpec.builder("c3").id("c3").payload(Map.of("v", 2)).onConflict(OnConflict.REJECT).build()));
        assertEquals(409, e.status());
        Task ig = client.enqueue(TaskSpec.builder("c3").id("c3").payload(Map.of("v", 3)).onConflict(OnConflict.IGNORE).build());
        assertEquals(1, ig.payload().get("v").asInt());
        Task rep = client.enqueue(TaskSpec.builder("c3").id("c3").payload(Map.of("v", 4)).onConflict(OnConflict.REPLACE).build());
        assertEquals(4, rep.payload().get("v").asInt());
        assertEquals(4, client.get("c3").payload().get("v").asInt());
    }

    // C4
    @Test
    void c4_enqueueManyInBatches() {
        List<TaskSpec> specs = new ArrayList<>();
        for (int i = 0; i < 12_000; i++) specs.add(TaskSpec.builder("c4").payload(i).delay(Duration.ofHours(1)).build());
        List<Task> stored = client.enqueueMany(specs);
        assertEquals(12_000, stored.size());
        assertEquals(11_999, stored.get(11_999).payload().asInt());
        assertEquals(12_000, client.getQueue("c4").count("scheduled"));
    }

    // C4: batches are also split at chronoqd's 1 MiB body limit
    @Test
    void c4_enqueueManySplitsLargeBodies() {
        String big = "x".repeat(8000);
        List<TaskSpec> specs = new ArrayList<>();
        for (int i = 0; i < 300; i++) specs.add(TaskSpec.builder("c4-large").id("large-" + i).payload(Map.of("i", i, "pad", big)).build());
        assertEquals(300, client.enqueueMany(specs).size());
        assertEquals(300, client.getQueue("c4-large").count("scheduled"));
        List<Task> l = client.claim("c4-large", 300, Duration.ofSeconds(30), Duration.ZERO);
        List<AckItem> acks = new ArrayList<>();
        for (Task t : l) acks.add(AckItem.fail(t.id(), t.token(), big, Duration.ofHours(1)));
        List<AckResult> r = client.ackMany(acks);
        assertEquals(300, r.size());
        assertTrue(r.stream().allMatch(AckResult::ok));
    }

    // C4: a bad task fails the whole batch, its field names the global index
    @Test
    void c4_errorNamesTheGlobalIndex() {
        List<TaskSpec> specs = new ArrayList<>();
        for (int i = 0; i < 20; i++) specs.add(TaskSpec.builder("c4-bad").payload(i).build());
        specs.set(15, TaskSpec.builder("c4-bad").maxAttempts(0).build());
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> client.enqueueMany(specs));
        assertEquals("tasks[15].max_attempts", e.field());
        assertEquals(0, client.list("c4-bad", null, null, 100, null).items().size());

        List<TaskSpec> big = new ArrayList<>();
        for (int i = 0; i < 10_005; i++) big.add(TaskSpec.builder("c4-big").build());
        big.set(10_003, TaskSpec.builder("c4-big").maxAttempts(0).build());
        InvalidArgumentException e2 = assertThrows(InvalidArgumentException.class, () -> client.enqueueMany(big));
        assertEquals("tasks[10003].max_attempts", e2.field());
        assertTrue(e2.getMessage().contains("tasks[10003]"), e2.getMessage());
    }

    // C5
    @Test
    void c5_claimExtendAck() {
        client.enqueue(TaskSpec.builder("c5").id("c5-a").payload(Map.of("x", 1)).build());
        List<Task> l = client.claim("c5", 10, Duration.ofSeconds(10), Duration.ofSeconds(5));
        assertEquals(1, l.size());
        Task t = l.get(0);
        assertTrue(t.token() > 0);
        assertEquals("running", client.get("c5-a").state());
        Instant until = client.extend(t.id(), t.token(), Duration.ofMinutes(10));
        assertTrue(until.isAfter(t.leaseUntil()));
        assertEquals(until, client.get("c5-a").leaseUntil());
        client.ack(t.id(), t.token());
        assertEquals("succeeded", client.get("c5-a").state());
    }

    // C5: fail with retry_in
    @Test
    void c5_failWithRetryIn() {
        client.enqueue(TaskSpec.builder("c5-fail").id("c5-f").build());
        Task t = client.claim("c5-fail", 1, Duration.ofSeconds(30), Duration.ZERO).get(0);
        client.fail(t.id(), t.token(), "S3 said 503", Duration.ofHours(1));
        Task g = client.get("c5-f");
        assertEquals("scheduled", g.state());
        assertEquals("S3 said 503", g.lastError());
        assertTrue(g.runAt().isAfter(Instant.now().plus(Duration.ofMinutes(50))));
    }

    // C16: getWithAttempts shows the attempt history; get leaves it out
    @Test
    void c16_getWithAttemptsShowsTheHistory() {
        client.enqueue(TaskSpec.builder("c16").id("c16-a").build());
        Task t = client.claim("c16", 1, Duration.ofSeconds(30), Duration.ZERO, List.of(), "host-a:1").tasks().get(0);
        client.fail(t.id(), t.token(), "S3 said 503", Duration.ofHours(1));
        assertNull(client.get("c16-a").attempts());
        List<Attempt> attempts = client.getWithAttempts("c16-a").attempts();
        assertEquals(1, attempts.size());
        Attempt a = attempts.get(0);
        assertEquals(1, a.attempt());
        assertEquals("failed", a.outcome());
        assertEquals("host-a:1", a.worker());
        assertEquals("S3 said 503", a.error());
        assertNull(a.response());
        assertNull(a.node());  // the test's chronoqd has no --node-id
        assertFalse(a.endedAt().isBefore(a.startedAt()));
    }

    // C15: a claim's worker name shows on the task, and stays after the ack; empty names nobody;
    // a bad name is invalid_argument on field worker
    @Test
    void c15_claimNamesTheWorker() {
        client.enqueue(TaskSpec.builder("c15").id("c15-a").build());
        client.enqueue(TaskSpec.builder("c15").id("c15-b").build());
        assertNull(client.get("c15-a").worker());
        Task t = client.claim("c15", 1, Duration.ofSeconds(30), Duration.ZERO, List.of(), "host-a:4242").tasks().get(0);
        assertEquals("host-a:4242", client.get(t.id()).worker());
        client.ack(t.id(), t.token());
        assertEquals("host-a:4242", client.get(t.id()).worker());
        Task anonymous = client.claim("c15", 1, Duration.ofSeconds(30), Duration.ZERO, List.of(), "").tasks().get(0);
        assertNull(client.get(anonymous.id()).worker());
        client.ack(anonymous.id(), anonymous.token());
        for (String bad : List.of("two\nlines", "x".repeat(201))) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                    () -> client.claim("c15", 1, null, Duration.ZERO, List.of(), bad));
            assertEquals("worker", e.field());
            assertEquals(400, e.status());
        }
    }

    // C6
    @Test
    void c6_ackManyWithFailures() {
        for (String id : List.of("c6-a", "c6-b", "c6-c")) client.enqueue(TaskSpec.builder("c6").id(id).build());
        List<Task> l = client.claim("c6", 3, Duration.ofSeconds(30), Duration.ZERO);
        assertEquals(3, l.size());
        long tok = l.get(0).token();
        List<AckResult> r = client.ackMany(List.of(AckItem.ok("c6-a", tok), AckItem.fail("c6-b", tok, "boom", Duration.ofHours(1)),
                AckItem.ok("c6-c", tok + 1000)));
        assertEquals(3, r.size());
        assertTrue(r.get(0).ok());
        assertTrue(r.get(1).ok());
        assertFalse(r.get(2).ok());
        assertInstanceOf(StaleTokenException.class, r.get(2).error());
        assertEquals("succeeded", client.get("c6-a").state());
        assertEquals("scheduled", client.get("c6-b").state());
        assertEquals("boom", client.get("c6-b").lastError());
        assertEquals("running", client.get("c6-c").state());
    }

    // C6: a claim carries acks and failures
    @Test
    void c6_claimCarriesFailures() {
        for (String id : List.of("c6c-a", "c6c-b", "c6c-c")) client.enqueue(TaskSpec.builder("c6c").id(id).build());
        List<Task> l = client.claim("c6c", 2, Duration.ofSeconds(30), Duration.ZERO);
        assertEquals(2, l.size());
        ClaimResult r = client.claim("c6c", 5, Duration.ofSeconds(30), Duration.ZERO,
                List.of(AckItem.ok(l.get(0)), AckItem.fail(l.get(1).id(), l.get(1).token(), "nope", Duration.ofHours(1))));
        assertEquals(2, r.acks().size());
        assertTrue(r.acks().get(0).ok() && r.acks().get(1).ok());
        assertEquals(1, r.tasks().size());
        assertEquals("succeeded", client.get(l.get(0).id()).state());
        assertEquals("nope", client.get(l.get(1).id()).lastError());
    }

    // C11
    @Test
    void c11_schedules() {
        Instant start = Instant.parse("2026-01-01T00:00:00Z");
        Schedule s = client.createSchedule(ScheduleSpec.cron("c11-purge", "c11", "0 0 3 * * *").tz("Asia/Seoul")
                .payload(Map.of("days", 30)).start(start).misfire("run_all").maxCatchup(7).overlap("queue_one")
                .dstGap("skip").dstRepeat("twice").priority(3).maxAttempts(2));
        assertEquals("c11-purge", s.name());
        assertEquals("c11", s.queue());
        assertEquals("Asia/Seoul", s.tz());
        assertEquals("0 0 3 * * *", s.cron());
        assertNull(s.everyMs());
        assertNotNull(s.nextRun());
        assertEquals(start, s.start());
        assertEquals("run_all", s.misfire());
        assertEquals(7, s.maxCatchup());
        assertEquals("queue_one", s.overlap());
        assertEquals("skip", s.dstGap());
        assertEquals("twice", s.dstRepeat());
        assertEquals(3, s.priority());
        assertEquals(2, s.maxAttempts());
        assertNull(s.target());
        assertNull(s.lastRun()); // no occurrence has finished
        assertEquals(0, s.runs());
        assertEquals(0, s.skipped());
        assertNotNull(s.createdAt());
        assertFalse(s.updatedAt().isBefore(s.createdAt()));
        assertThrows(ConflictException.class, () -> client.createSchedule(ScheduleSpec.cron("c11-purge", "c11", "0 0 3 * * *")));
        assertEquals(30, client.getSchedule("c11-purge").payload().get("days").asInt());
        client.putSchedule("c11-every", ScheduleSpec.every(null, "c11", Duration.ofHours(1)));
        Page<Schedule> page = client.listSchedules("c11", 100, null);
        assertEquals(List.of("c11-every", "c11-purge"), page.items().stream().map(Schedule::name).toList());
        assertTrue(client.pauseSchedule("c11-purge").paused());
        assertFalse(client.resumeSchedule("c11-purge").paused());
        List<Instant> next = client.nextOccurrences("c11-purge", 3);
        assertEquals(3, next.size());
        for (Instant i : next) assertEquals(18, i.atZone(java.time.ZoneOffset.UTC).getHour()); // 03:00 KST
        assertEquals(Duration.ofDays(1), Duration.between(next.get(0), next.get(1)));
        client.deleteSchedule("c11-purge");
        assertThrows(NotFoundException.class, () -> client.getSchedule("c11-purge"));
        client.deleteSchedule("c11-every");
    }

    @Test
    void queuesListPagingAndOperations() {
        QueueInfo q = client.configureQueue("ops-q", new QueueSettings().concurrency(4).maxAttempts(5)
                .rateLimit(100, Duration.ofSeconds(1)).maxInFlightPerKey(2).maxPendingPerKey(50)
                .backoff(new Backoff(Duration.ofSeconds(2), Duration.ofMinutes(3))).retention(Duration.ofHours(2)));
        assertEquals(4, q.concurrency());
        assertEquals(4, q.maxInFlight());
        assertEquals(5, q.maxAttempts());
        assertEquals(2, q.maxInFlightPerKey());
        assertEquals(50, q.maxPendingPerKey());
        assertEquals(new Backoff(Duration.ofSeconds(2), Duration.ofMinutes(3)), q.backoff());
        assertEquals(Duration.ofHours(2), q.retention());
        assertEquals(new RateLimit(100, Duration.ofSeconds(1)), q.rateLimit());
        assertFalse(q.webhooks());
        assertEquals(Duration.ZERO, q.oldestDueLateness()); // nothing is due
        assertEquals(0L, q.counts().get("scheduled"));
        assertNotNull(client.configureQueue("ops-q", new QueueSettings().reset("rate_limit")));
        assertNull(client.getQueue("ops-q").rateLimit());
        assertTrue(client.pauseQueue("ops-q").paused());
        assertFalse(client.resumeQueue("ops-q").paused());
        assertTrue(client.listQueues().stream().anyMatch(x -> x.name().equals("ops-q")));

        for (int i = 0; i < 5; i++) client.enqueue(TaskSpec.builder("ops-q").key(i % 2 == 0 ? "even" : "odd").build());
        assertEquals(5L, client.getQueue("ops-q").counts().get("scheduled"));
        Page<Task> p1 = client.list("ops-q", "scheduled", null, 2, null);
        assertEquals(2, p1.items().size());
        assertNotNull(p1.nextCursor());
        assertEquals(5, client.listAll("ops-q", null).size());
        assertEquals(3, client.list("ops-q", null, "even", 100, null).items().size());

        JsonNode h = client.health();
        assertEquals("ok", h.get("status").asText());
        assertFalse(client.version().isEmpty());
    }

    @Test
    void retryADeadTask() {
        client.enqueue(TaskSpec.builder("dead-q").id("dead-1").maxAttempts(1).build());
        Task t = client.claim("dead-q", 1, Duration.ofSeconds(30), Duration.ZERO).get(0);
        client.fail(t.id(), t.token(), "fatal", null);
        assertEquals("dead", client.get("dead-1").state());
        Task r = client.retry("dead-1");
        assertEquals("scheduled", r.state());
        assertEquals(0, r.attempt());
    }
}
