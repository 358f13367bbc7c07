package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

import java.time.Instant;

/**
 * A schedule as chronoqd returns it ({@link #raw()} has every field).
 *
 */
public final class Schedule {
    private final JsonNode raw;

    Schedule(JsonNode raw) { this.raw = raw; }

    /**
     * @return the name
     */
    public String name() { return Json.text(raw, "name"); }
    /**
     * @return the queue of its tasks
     */
    public String queue() { return Json.text(raw, "queue"); }
    /**
     * @return the cron expression, or null
     */
    public String cron() { return Json.text(raw, "cron"); }
    /**
     * @return the zone of the cron rule, or null
     */
    public String tz() { return Json.text(raw, "tz"); }
    /**
     * @return every_ms, or null
     */
    public Long everyMs() { return Json.lng(raw, "every_ms"); }
    /**
     * @return fixed_delay_ms, or null
     */
    public Long fixedDelayMs() { return Json.lng(raw, "fixed_delay_ms"); }
    /**
     * @return the payload
     */
    public JsonNode payload() { return raw.path("payload"); }
    /**
     * @return whether it is paused
     */
    public boolean paused() { return raw.path("paused").asBoolean(); }
    /**
     * @return when the next occurrence is due, or null
     */
    public Instant nextRun() { return Json.time(raw, "next_run"); }
    /**
     * @return the id of the unclaimed next occurrence, or null
     */
    public String nextTaskId() { return Json.text(raw, "next_task_id"); }
    /**
     * @return occurrences finished
     */
    public long runs() { return raw.path("runs").asLong(); }
    /**
     * @return the whole JSON object
     */
    public JsonNode raw() { return raw; }

    @Override
    public String toString() { return "Schedule" + raw; }
}
