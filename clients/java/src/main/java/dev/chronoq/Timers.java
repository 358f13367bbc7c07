package dev.chronoq;

import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The time source of the library's timers: the lease extensions of {@link ChronoqWorker} and
 * {@link ChronoqLock}. Package-private, not part of the API: {@link #SYSTEM} (the machine's clock)
 * unless a test gives {@code ChronoqClient.Builder.timers(...)} a fake one, whose time moves only
 * when the test says, so that an extension runs exactly when the test moves time.
 */
interface Timers {
    /** The machine's clock: a daemon thread per timer. */
    Timers SYSTEM = new SystemTimers();

    /**
     * Runs {@code task} every {@code period}, the first time one period from now, each run one
     * period after the end of the one before (a fixed delay).
     *
     * @param name the name of the thread that runs it (for thread dumps)
     * @param period the period, positive
     * @param task what to run; it should not throw
     * @return the handle that stops it
     */
    Periodic every(String name, Duration period, Runnable task);

    /** A timer started by {@link Timers#every}. */
    interface Periodic {
        /**
         * Stops the timer: no run starts once this returns. A run in progress is waited for,
         * unless this is called from that run.
         */
        void cancel();
    }

    /** {@link #SYSTEM}: a single-thread {@link ScheduledExecutorService} per timer. */
    final class SystemTimers implements Timers {
        private SystemTimers() {}

        @Override
        public Periodic every(String name, Duration period, Runnable task) {
            AtomicReference<Thread> thread = new AtomicReference<>();
            ScheduledExecutorService exec = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, name);
                t.setDaemon(true);
                thread.set(t);
                return t;
            });
            long ms = Math.max(1, period.toMillis());
            exec.scheduleWithFixedDelay(task, ms, ms, TimeUnit.MILLISECONDS);
            return () -> {
                exec.shutdown(); // drops the periodic task; a run in progress goes on to its end
                if (Thread.currentThread() == thread.get()) return;
                try {
                    while (!exec.awaitTermination(1, TimeUnit.SECONDS)) {
                        // an extension in flight: bounded by the client's timeout
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            };
        }
    }
}
