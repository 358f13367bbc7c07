package dev.chronoq;

import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Duration;

/**
 * Settings for {@link ChronoqClient#configureQueue}: fields not set keep their value;
 * {@link #reset(String)} sends {@code null} for a field (back to its default).
 */
public final class QueueSettings {
    final ObjectNode json = Transport.MAPPER.createObjectNode();

    /**
     * @param n tasks of the queue running at once
     * @return this
     */
    public QueueSettings concurrency(int n) { json.put("concurrency", n); return this; }
    /**
     * @param n tasks of one key started and unfinished at once
     * @return this
     */
    public QueueSettings maxInFlightPerKey(int n) { json.put("max_in_flight_per_key", n); return this; }
    /**
     * @param n tasks of one key waiting to start, past which enqueues get key_backlog_full
     * @return this
     */
    public QueueSettings maxPendingPerKey(long n) { json.put("max_pending_per_key", n); return this; }
    /**
     * @param n default attempt limit
     * @return this
     */
    public QueueSettings maxAttempts(int n) { json.put("max_attempts", n); return this; }
    /**
     * @param b default backoff
     * @return this
     */
    public QueueSettings backoff(Backoff b) {
        ObjectNode o = json.putObject("backoff");
        o.put("base_ms", b.base().toMillis());
        if (b.cap() != null) o.put("cap_ms", b.cap().toMillis());
        return this;
    }
    /**
     * @param d how long finished tasks stay visible
     * @return this
     */
    public QueueSettings retention(Duration d) { json.put("retention_ms", d.toMillis()); return this; }
    /**
     * @param count claims
     * @param period per sliding period
     * @return this
     */
    public QueueSettings rateLimit(int count, Duration period) {
        ObjectNode o = json.putObject("rate_limit");
        o.put("count", count);
        o.put("period_ms", period.toMillis());
        return this;
    }
    /**
     * @param wireField the API field name ({@code rate_limit}, ...)
     * @return this, with the field sent as null
     */
    public QueueSettings reset(String wireField) { json.putNull(wireField); return this; }
}
