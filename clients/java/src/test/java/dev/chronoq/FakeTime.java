package dev.chronoq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Fake time for a client and a {@code chronoqd --test-clock} together: the client's timers (the lease
 * extensions of its workers and locks, {@link Timers}) and the server's clock move only by
 * {@link #advance}, and by the same amount. A timer runs in the thread that calls {@code advance},
 * once the server's time has reached the timer's due time, so that when {@code advance} returns
 * every extension due meanwhile has been sent and answered. Time stands still otherwise: nothing
 * here depends on how fast the machine is.
 */
final class FakeTime implements Timers {
    private final Chronoqd server;
    /** Milliseconds since this was made; the server's clock has moved by as much meanwhile. */
    private long now;
    private final List<Timer> timers = new ArrayList<>();

    private final class Timer implements Periodic {
        final String name;
        final long period;
        final Runnable task;
        long due;
        boolean cancelled;

        Timer(String name, long period, Runnable task) {
            this.name = name;
            this.period = period;
            this.task = task;
            this.due = now + period;
        }

        @Override
        public void cancel() {
            synchronized (FakeTime.this) { // a run in progress holds it: this waits for its end
                cancelled = true;
                timers.remove(this);
            }
        }

        @Override
        public String toString() { return name + " due at +" + due + " ms"; }
    }

    FakeTime(Chronoqd server) {
        this.server = server;
    }

    /** A client of the server on this fake time. */
    ChronoqClient client() {
        return ChronoqClient.builder().urls(server.url).timeout(Duration.ofSeconds(60)).timers(this).build();
    }

    @Override
    public synchronized Periodic every(String name, Duration period, Runnable task) {
        Timer t = new Timer(name, Math.max(1, period.toMillis()), task);
        timers.add(t);
        return t;
    }

    /** The timers not cancelled (for a test's messages and checks). */
    synchronized List<String> pending() {
        List<String> out = new ArrayList<>();
        for (Timer t : timers) out.add(t.toString());
        return out;
    }

    /**
     * Moves time by {@code d}: the server's clock in steps, to each due time of a client timer in turn, running
     * the timers due at each step (after the server has acted on it), then to the end.
     */
    synchronized void advance(Duration d) throws Exception {
        long target = now + d.toMillis();
        while (true) {
            long next = target;
            for (Timer t : timers) next = Math.min(next, t.due);
            if (next > now) {
                server.advanceClock(next - now);
                now = next;
            }
            List<Timer> due = new ArrayList<>();
            for (Timer t : timers) if (t.due <= now) due.add(t);
            if (due.isEmpty()) {
                if (now >= target) return;
                continue;
            }
            due.sort(Comparator.comparingLong(t -> t.due));
            for (Timer t : due) {
                if (t.cancelled) continue;
                t.task.run();
                t.due = now + t.period; // a fixed delay, as Timers.SYSTEM
            }
        }
    }
}
