package dev.chronoq;

import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A keyed lock held until {@link #close()}:
 *
 * <pre>{@code
 * try (ChronoqLock lock = client.lock("invoice:42", Duration.ofSeconds(5), Duration.ofSeconds(30))) {
 *     writeInvoice(42, lock.token());   // the resource refuses tokens below its largest
 * }
 * }</pre>
 *
 * <p>While held, a daemon thread extends the lease every third of it; an extension refused with
 * {@code stale_token} marks the lock {@link #isLost() lost} (the lease lapsed and another holder
 * may have had it), and {@link #close()} then throws {@link LockLostException}. Other extension
 * errors (the server unreachable) are logged and tried again at the next turn.
 */
public final class ChronoqLock implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(ChronoqLock.class.getName());

    private final ChronoqClient client;
    private final String key;
    private final Duration lease;
    private final Object mu = new Object();
    private final CountDownLatch lostLatch = new CountDownLatch(1);
    /** The extension timer; null until the constructor has started it. */
    private volatile Timers.Periodic extender;
    private volatile LockGrant grant;
    private volatile boolean lost;
    private volatile boolean closed;
    private volatile int extensions;

    ChronoqLock(ChronoqClient client, String key, Duration wait, Duration lease, String owner) {
        this.client = client;
        this.key = key;
        this.lease = lease;
        this.grant = client.acquireLock(key, wait, lease, owner);
        this.extender = client.timers().every("chronoq-lock-" + key, Duration.ofMillis(Math.max(1, lease.toMillis() / 3)),
                this::extendOnce);
    }

    /**
     * @return the key
     */
    public String key() { return key; }

    /**
     * @return the fencing token of the grant
     */
    public long token() { return grant.token(); }

    /**
     * @return when the lease ends unless extended again
     */
    public Instant expiresAt() { return grant.expiresAt(); }

    /**
     * @return true once an extension or the release was refused: the lease had lapsed
     */
    public boolean isLost() { return lost; }

    /**
     * @return how many background extensions succeeded
     */
    public int extensions() { return extensions; }

    /**
     * Blocks until the lease is lost or the timeout passes.
     *
     * @param timeout how long to wait
     * @return whether it is lost
     * @throws InterruptedException if interrupted
     */
    public boolean awaitLost(Duration timeout) throws InterruptedException {
        return lostLatch.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
    }

    /**
     * @throws LockLostException if the lease was lost
     */
    public void check() {
        if (lost) throw lostError();
    }

    private LockLostException lostError() {
        return new LockLostException("the lock on " + key + " (token " + token() + ") was lost: its lease lapsed",
                "stale_token", "token", 409, null);
    }

    private void markLost(ChronoqException e) {
        if (!lost) LOG.warning("lost the lock on " + key + " (token " + token() + "): " + e.getMessage());
        lost = true;
        lostLatch.countDown();
    }

    /** A turn of the extension timer (every third of the lease). */
    private void extendOnce() {
        synchronized (mu) {
            if (closed || lost) return;
        }
        try {
            LockGrant g = client.extendLock(key, grant.token(), lease);
            grant = g;
            extensions++;
        } catch (StaleTokenException e) {
            markLost(e);
            Timers.Periodic x = extender;
            if (x != null) x.cancel(); // from its own run: stops the timer without waiting
        } catch (ChronoqException e) {
            LOG.log(Level.WARNING, "could not extend the lock on " + key + " (will retry): " + e);
        }
    }

    /**
     * Stops extending and releases the lock (a lost lock is not released).
     *
     * @throws LockLostException if the lease was lost while held
     */
    @Override
    public void close() {
        synchronized (mu) {
            if (closed) return;
            closed = true;
        }
        extender.cancel(); // waits for an extension in flight
        if (!lost) {
            try {
                client.releaseLock(key, grant.token());
            } catch (StaleTokenException e) {
                markLost(e);
            }
        }
        if (lost) throw lostError();
    }
}
