package dev.chronoq;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Keyed locks: C8, C9, C10. Waits that run out, leases that lapse and the background extension run on the test
 * clock ({@link ServerTest#tcServer}, {@link ServerTest#time}); nothing sleeps for time to pass.
 */
class LockTest extends ServerTest {
    /** The exception {@code f} failed with (it must fail within the deadline). */
    private static Throwable failure(CompletableFuture<?> f) throws Exception {
        try {
            f.get(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("it succeeded: " + f.get());
    }

    // C8: a 300 ms wait runs out when the test moves time by 300 ms, not before
    @Test
    void c8_contentionWithWaitTimeout() throws Exception {
        ChronoqClient client = tcClient;
        LockGrant g = client.acquireLock("c8", Duration.ZERO, Duration.ofSeconds(60), "first");
        CompletableFuture<LockGrant> second = CompletableFuture.supplyAsync(
                () -> client.acquireLock("c8", Duration.ofMillis(300), Duration.ofSeconds(60), "second"));
        tcServer.awaitServerWait("the second acquisition's 300 ms wait", Duration.ofMillis(300));
        time.advance(Duration.ofMillis(299));
        assertEquals(1, client.getLock("c8").waiters(), "the wait ended before its 300 ms");
        assertFalse(second.isDone(), "the wait ended before its 300 ms");
        time.advance(Duration.ofMillis(1));
        LockWaitTimeoutException e = assertInstanceOf(LockWaitTimeoutException.class, failure(second));
        assertEquals("lock_wait_timeout", e.code());
        assertEquals("wait_ms", e.field());
        assertEquals(409, e.status());
        LockInfo info = client.getLock("c8");
        assertTrue(info.held());
        assertEquals("first", info.owner());
        assertEquals(0, info.waiters());
        // a waiter gets it at once when the holder releases (time does not move)
        CompletableFuture<LockGrant> waiter = CompletableFuture.supplyAsync(
                () -> client.acquireLock("c8", Duration.ofSeconds(60), Duration.ofSeconds(60), "second"));
        Chronoqd.await("the second acquisition to wait", () -> client.getLock("c8").waiters() == 1);
        client.releaseLock("c8", g.token());
        LockGrant g2 = waiter.get(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS);
        assertTrue(g2.token() > g.token());
        client.releaseLock("c8", g2.token());
        // and after a release, acquiring with no wait succeeds at once
        LockGrant g3 = client.acquireLock("c8", Duration.ZERO, Duration.ofSeconds(60), null);
        client.releaseLock("c8", g3.token());
        assertFalse(client.getLock("c8").held());
    }

    // C8 with the scoped helper: its 200 ms wait runs out when the test moves time by 200 ms
    @Test
    void c8_helperContention() throws Exception {
        ChronoqClient client = tcClient;
        try (ChronoqLock held = client.lock("c8-helper", Duration.ZERO, Duration.ofSeconds(30))) {
            CompletableFuture<ChronoqLock> other = CompletableFuture.supplyAsync(
                    () -> client.lock("c8-helper", Duration.ofMillis(200), Duration.ofSeconds(30)));
            tcServer.awaitServerWait("the helper's 200 ms wait", Duration.ofMillis(200));
            assertFalse(other.isDone());
            time.advance(Duration.ofMillis(200));
            assertInstanceOf(LockWaitTimeoutException.class, failure(other));
            assertTrue(held.token() > 0);
            assertFalse(held.isLost());
        }
        try (ChronoqLock again = client.lock("c8-helper", Duration.ZERO, Duration.ofSeconds(30))) {
            assertTrue(again.token() > 0);
        }
        assertFalse(client.getLock("c8-helper").held());
    }

    // C9: a 300 ms lease lapses when the test moves time by 300 ms, not before
    @Test
    void c9_lapsedLeaseFreesTheLockAndTheTokenGrows() throws Exception {
        ChronoqClient client = tcClient;
        LockGrant g = client.acquireLock("c9", Duration.ZERO, Duration.ofMillis(300), null);
        assertEquals(tcServer.clockNow().plusMillis(300), g.expiresAt());
        time.advance(Duration.ofMillis(299));
        assertTrue(client.getLock("c9").held(), "the lease lapsed before its 300 ms");
        time.advance(Duration.ofMillis(1));
        assertFalse(client.getLock("c9").held(), "the lease did not lapse after its 300 ms");
        LockGrant g2 = client.acquireLock("c9", Duration.ZERO, Duration.ofSeconds(30), null);
        assertTrue(g2.token() > g.token(), g2 + " vs " + g);
        StaleTokenException e = assertThrows(StaleTokenException.class, () -> client.extendLock("c9", g.token(), Duration.ofSeconds(5)));
        assertEquals("token", e.field());
        assertThrows(StaleTokenException.class, () -> client.releaseLock("c9", g.token()));
        client.releaseLock("c9", g2.token());
    }

    // C10
    @Test
    void c10_tryWithResourcesHoldsAndReleases() {
        long token;
        try (ChronoqLock lock = client.lock("c10", Duration.ofSeconds(5), Duration.ofSeconds(30), "me")) {
            token = lock.token();
            assertTrue(token > 0);
            LockInfo info = client.getLock("c10");
            assertTrue(info.held());
            assertEquals("me", info.owner());
        }
        assertFalse(client.getLock("c10").held());
        assertThrows(StaleTokenException.class, () -> client.releaseLock("c10", token));
    }

    // C10: the lease (900 ms) is extended every third of it, as the test moves time; two leases' worth
    // later it is still ours
    @Test
    void c10_theLeaseIsExtendedInTheBackground() throws Exception {
        ChronoqClient client = tcClient;
        try (ChronoqLock lock = client.lock("c10-ext", Duration.ZERO, Duration.ofMillis(900))) {
            Instant start = tcServer.clockNow();
            assertEquals(start.plusMillis(900), lock.expiresAt());
            for (int i = 1; i <= 6; i++) {
                time.advance(Duration.ofMillis(300));
                assertEquals(i, lock.extensions(), "extensions after " + 300 * i + " ms");
                assertEquals(start.plusMillis(300L * i + 900), lock.expiresAt(), "the lease after " + 300 * i + " ms");
                assertTrue(client.getLock("c10-ext").held(), "the lock lapsed after " + 300 * i + " ms");
            }
            assertFalse(lock.isLost());
            assertThrows(LockWaitTimeoutException.class, () -> client.acquireLock("c10-ext", Duration.ZERO, Duration.ofSeconds(1), null));
        }
        assertFalse(client.getLock("c10-ext").held());
        assertTrue(time.pending().isEmpty(), "close() left a timer: " + time.pending());
        time.advance(Duration.ofMillis(900)); // no extension after close()
    }

    // C10: a lost lease is reported at close()
    @Test
    void c10_aLostLeaseIsReported() throws Exception {
        ChronoqLock lock = client.lock("c10-lost", Duration.ZERO, Duration.ofSeconds(30));
        // someone else releases it with our token (as if the lease had lapsed and moved on)
        client.releaseLock("c10-lost", lock.token());
        LockGrant other = client.acquireLock("c10-lost", Duration.ZERO, Duration.ofSeconds(30), null);
        assertThrows(LockLostException.class, lock::close);
        assertTrue(lock.isLost());
        assertTrue(client.getLock("c10-lost").held()); // the other holder's lock was not released
        client.releaseLock("c10-lost", other.token());
    }

    // C10: a background extension that is refused marks the lock lost at once, and the extensions stop
    @Test
    void c10_aRefusedExtensionMarksTheLockLost() throws Exception {
        ChronoqClient client = tcClient;
        ChronoqLock lock = client.lock("c10-refused", Duration.ZERO, Duration.ofMillis(900));
        client.releaseLock("c10-refused", lock.token()); // as if the lease had lapsed and moved on
        LockGrant other = client.acquireLock("c10-refused", Duration.ZERO, Duration.ofSeconds(30), null);
        assertFalse(lock.isLost());
        time.advance(Duration.ofMillis(300)); // the extension is refused
        assertTrue(lock.isLost());
        assertTrue(lock.awaitLost(Duration.ZERO));
        assertThrows(LockLostException.class, lock::check);
        assertEquals(0, lock.extensions());
        assertTrue(time.pending().isEmpty(), "the extensions did not stop: " + time.pending());
        assertThrows(LockLostException.class, lock::close);
        assertTrue(client.getLock("c10-refused").held()); // the other holder's lock was not released
        client.releaseLock("c10-refused", other.token());
    }
}
