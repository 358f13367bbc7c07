package dev.chronoq;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/** Keyed locks: C8, C9, C10. */
class LockTest extends ServerTest {
    // C8
    @Test
    void c8_contentionWithWaitTimeout() throws Exception {
        LockGrant g = client.acquireLock("c8", Duration.ZERO, Duration.ofSeconds(60), "first");
        LockWaitTimeoutException e = assertThrows(LockWaitTimeoutException.class,
                () -> client.acquireLock("c8", Duration.ofMillis(300), Duration.ofSeconds(60), "second"));
        assertEquals("lock_wait_timeout", e.code());
        assertEquals("wait_ms", e.field());
        assertEquals(409, e.status());
        LockInfo info = client.getLock("c8");
        assertTrue(info.held());
        assertEquals("first", info.owner());
        // a waiter gets it at once when the holder releases
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

    // C8 with the scoped helper
    @Test
    void c8_helperContention() {
        try (ChronoqLock held = client.lock("c8-helper", Duration.ZERO, Duration.ofSeconds(30))) {
            assertThrows(LockWaitTimeoutException.class, () -> client.lock("c8-helper", Duration.ofMillis(200), Duration.ofSeconds(30)));
            assertTrue(held.token() > 0);
        }
        try (ChronoqLock again = client.lock("c8-helper", Duration.ZERO, Duration.ofSeconds(30))) {
            assertTrue(again.token() > 0);
        }
    }

    // C9
    @Test
    void c9_lapsedLeaseFreesTheLockAndTheTokenGrows() throws Exception {
        LockGrant g = client.acquireLock("c9", Duration.ZERO, Duration.ofMillis(300), null);
        Chronoqd.await("the lease to lapse", () -> !client.getLock("c9").held());
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

    // C10
    @Test
    void c10_theLeaseIsExtendedInTheBackground() throws Exception {
        try (ChronoqLock lock = client.lock("c10-ext", Duration.ZERO, Duration.ofMillis(900))) {
            Chronoqd.await("three background extensions", () -> lock.extensions() >= 3);
            // several leases' worth have passed, and it is still ours
            assertTrue(client.getLock("c10-ext").held());
            assertFalse(lock.isLost());
            assertThrows(LockWaitTimeoutException.class, () -> client.acquireLock("c10-ext", Duration.ZERO, Duration.ofSeconds(1), null));
        }
        assertFalse(client.getLock("c10-ext").held());
    }

    // C10: a lost lease is reported
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
}
