package dev.chronoq;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;

import static org.junit.jupiter.api.Assertions.*;

/** Typed errors: C7, C12. */
class ErrorsTest extends ServerTest {
    // C7: on the test clock, the 200 ms lease lapses when the test moves time by 200 ms
    @Test
    void c7_staleToken() throws Exception {
        ChronoqClient client = tcClient;
        client.enqueue(TaskSpec.builder("c7").id("c7").build());
        Task first = client.claim("c7", 1, Duration.ofMillis(200), Duration.ZERO).get(0);
        time.advance(Duration.ofMillis(199));
        assertEquals("running", client.get("c7").state(), "the lease lapsed early");
        assertTrue(client.claim("c7", 1, Duration.ofSeconds(60), Duration.ZERO).isEmpty());
        time.advance(Duration.ofMillis(1)); // the lease lapses: claimable again, the first token is stale
        List<Task> again = client.claim("c7", 1, Duration.ofSeconds(60), Duration.ZERO);
        assertEquals(1, again.size(), "the task was not claimable once its lease lapsed");
        Task second = again.get(0);
        assertTrue(second.token() > first.token());
        StaleTokenException e = assertThrows(StaleTokenException.class, () -> client.ack("c7", first.token()));
        assertEquals("stale_token", e.code());
        assertEquals(409, e.status());
        assertEquals(tcServer.url, e.node());
        assertThrows(StaleTokenException.class, () -> client.fail("c7", first.token(), "x", null));
        assertThrows(StaleTokenException.class, () -> client.extend("c7", first.token(), Duration.ofSeconds(5)));
        Task g = client.get("c7");
        assertEquals("running", g.state());
        assertEquals(second.leaseUntil(), g.leaseUntil());
        client.ack("c7", second.token());
        assertEquals("succeeded", client.get("c7").state());
    }

    // C12
    @Test
    void c12_invalidArgumentNamesTheField() {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> client.enqueue(TaskSpec.builder("c12").maxAttempts(0).build()));
        assertEquals("invalid_argument", e.code());
        assertEquals("max_attempts", e.field());
        assertEquals(400, e.status());
        assertEquals(server.url, e.node());
        assertInstanceOf(ChronoqException.class, e);
    }

    // C12
    @Test
    void c12_notFound() {
        NotFoundException e = assertThrows(NotFoundException.class, () -> client.get("no-such-task"));
        assertEquals("not_found", e.code());
        assertEquals(404, e.status());
        assertThrows(NotFoundException.class, () -> client.cancel("no-such-task"));
        assertThrows(NotFoundException.class, () -> client.getSchedule("no-such-schedule"));
    }

    // C12
    @Test
    void c12_keyBacklogFull() {
        client.configureQueue("c12-bl", new QueueSettings().maxPendingPerKey(2));
        client.enqueue(TaskSpec.builder("c12-bl").key("k").build());
        client.enqueue(TaskSpec.builder("c12-bl").key("k").build());
        KeyBacklogFullException e = assertThrows(KeyBacklogFullException.class,
                () -> client.enqueue(TaskSpec.builder("c12-bl").key("k").build()));
        assertEquals("key_backlog_full", e.code());
        assertEquals("key", e.field());
        assertEquals(429, e.status());
        KeyBacklogFullException b = assertThrows(KeyBacklogFullException.class, () -> client.enqueueMany(List.of(
                TaskSpec.builder("c12-bl").key("other").build(), TaskSpec.builder("c12-bl").key("k").build())));
        assertEquals("tasks[1].key", b.field());
        assertEquals(2, client.getQueue("c12-bl").count("scheduled"));
    }

    // C2/C12: retrying a live task is failed_precondition
    @Test
    void failedPrecondition() {
        client.enqueue(TaskSpec.builder("c12-fp").id("c12-fp").build());
        FailedPreconditionException e = assertThrows(FailedPreconditionException.class, () -> client.retry("c12-fp"));
        assertEquals(409, e.status());
    }

    @Test
    void conflictOnScheduleName() {
        client.createSchedule(ScheduleSpec.every("dup", "q", Duration.ofHours(1)));
        ConflictException e = assertThrows(ConflictException.class,
                () -> client.createSchedule(ScheduleSpec.every("dup", "q", Duration.ofHours(1))));
        assertEquals("conflict", e.code());
    }

    // C12: the bearer token is sent; a wrong one is unauthorized
    @Test
    void tokenAndUnauthorized() throws Exception {
        try (Chronoqd secured = Chronoqd.start("s3cret")) {
            ChronoqClient good = ChronoqClient.builder().urls(secured.url).token("s3cret").build();
            assertEquals("t-1", good.enqueue(TaskSpec.builder("auth").id("t-1").build()).id());
            ChronoqClient bad = ChronoqClient.builder().urls(secured.url).token("wrong").build();
            ChronoqException e = assertThrows(ChronoqException.class, () -> bad.get("t-1"));
            assertEquals("unauthorized", e.code());
            assertEquals(401, e.status());
        }
    }
}
