package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

import java.time.Instant;

/** A schedule as chronoqd returns it: its rule, policies and what it ran. */
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
     * @return when the rule starts, or null when it was not set
     */
    public Instant start() { return Json.time(raw, "start"); }
    /**
     * @return skip, run_once or run_all
     */
    public String misfire() { return Json.text(raw, "misfire"); }
    /**
     * @return the most occurrences run_all catches up
     */
    public int maxCatchup() { return raw.path("max_catchup").asInt(); }
    /**
     * @return allow, skip or queue_one
     */
    public String overlap() { return Json.text(raw, "overlap"); }
    /**
     * @return run_after or skip, or null when not set
     */
    public String dstGap() { return Json.text(raw, "dst_gap"); }
    /**
     * @return once or twice, or null when not set
     */
    public String dstRepeat() { return Json.text(raw, "dst_repeat"); }
    /**
     * @return each occurrence's priority
     */
    public int priority() { return raw.path("priority").asInt(); }
    /**
     * @return each occurrence's max_attempts, or null for the queue's
     */
    public Integer maxAttempts() { return Json.integer(raw, "max_attempts"); }
    /**
     * @return each occurrence's webhook target, or null for none
     */
    public JsonNode target() { JsonNode t = raw.get("target"); return t == null || t.isNull() ? null : t; }
    /**
     * @return the latest finished occurrence, or null before the first
     */
    public ScheduleRun lastRun() {
        JsonNode r = raw.get("last_run");
        if (r == null || r.isNull()) return null;
        return new ScheduleRun(Json.text(r, "task_id"), Json.time(r, "scheduled_for"), Json.text(r, "state"),
                Json.time(r, "finished_at"), Json.text(r, "error"));
    }
    /**
     * @return how many occurrences were skipped (misfire or overlap)
     */
    public long skipped() { return raw.path("skipped").asLong(); }
    /**
     * @return when the schedule was created
     */
    public Instant createdAt() { return Json.time(raw, "created_at"); }
    /**
     * @return when it last changed
     */
    public Instant updatedAt() { return Json.time(raw, "updated_at"); }
    /**
     * @return the whole JSON object
     */
    public JsonNode raw() { return raw; }

    @Override
    public String toString() { return "Schedule" + raw; }
}
