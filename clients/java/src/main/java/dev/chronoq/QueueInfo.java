package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;

/** A queue: counts by state, flags and settings (a null setting: the default). */
public final class QueueInfo {
    private final JsonNode raw;

    QueueInfo(JsonNode raw) { this.raw = raw; }

    /**
     * @return the name
     */
    public String name() { return Json.text(raw, "name"); }
    /**
     * @return whether it is paused
     */
    public boolean paused() { return raw.path("paused").asBoolean(); }
    /**
     * @param state a task state
     * @return how many tasks are in it
     */
    public long count(String state) { return raw.path("counts").path(state).asLong(); }
    /**
     * @return the concurrency setting, or null for none
     */
    public Integer concurrency() { return Json.integer(raw, "concurrency"); }
    /**
     * @return max_in_flight_per_key, or null for the default
     */
    public Integer maxInFlightPerKey() { return Json.integer(raw, "max_in_flight_per_key"); }
    /**
     * @return max_pending_per_key, or null for no limit
     */
    public Long maxPendingPerKey() { return Json.lng(raw, "max_pending_per_key"); }
    /**
     * @return max_attempts, or null for the engine default
     */
    public Integer maxAttempts() { return Json.integer(raw, "max_attempts"); }
    /**
     * @return the tasks by state (scheduled, running, succeeded, cancelled, dead)
     */
    public Map<String, Long> counts() {
        Map<String, Long> m = new LinkedHashMap<>();
        raw.path("counts").fields().forEachRemaining(e -> m.put(e.getKey(), e.getValue().asLong()));
        return m;
    }
    /**
     * @return whether chronoqd delivers the queue's tasks (it held tasks with a webhook target)
     */
    public boolean webhooks() { return raw.path("webhooks").asBoolean(); }
    /**
     * @return how late the oldest due task is (zero when none is due)
     */
    public Duration oldestDueLateness() { return Json.millis(raw, "oldest_due_lateness_ms"); }
    /**
     * @return max_in_flight (the same as {@link #concurrency()}), or null for no limit
     */
    public Integer maxInFlight() { return Json.integer(raw, "max_in_flight"); }
    /**
     * @return the default retry backoff, or null for the engine's
     */
    public Backoff backoff() {
        JsonNode b = raw.get("backoff");
        if (b == null || b.isNull()) return null;
        return new Backoff(Json.millis(b, "base_ms"), Json.millis(b, "cap_ms"));
    }
    /**
     * @return how long finished tasks stay visible, or null for the engine's default
     */
    public Duration retention() { return Json.millis(raw, "retention_ms"); }
    /**
     * @return the claim rate limit, or null for none
     */
    public RateLimit rateLimit() {
        JsonNode r = raw.get("rate_limit");
        if (r == null || r.isNull()) return null;
        return new RateLimit(r.path("count").asInt(), Json.millis(r, "period_ms"));
    }
    /**
     * @return the whole JSON object
     */
    public JsonNode raw() { return raw; }

    @Override
    public String toString() { return "QueueInfo" + raw; }
}
