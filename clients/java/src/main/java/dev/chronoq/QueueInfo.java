package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A queue: counts by state, paused flag and settings ({@link #raw()} has every field).
 *
 */
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
     * @return the whole JSON object
     */
    public JsonNode raw() { return raw; }

    @Override
    public String toString() { return "QueueInfo" + raw; }
}
