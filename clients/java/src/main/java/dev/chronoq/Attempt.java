package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

import java.time.Instant;

/**
 * One finished attempt of a task ({@link ChronoqClient#getWithAttempts(String)}).
 */
public final class Attempt {
    private final JsonNode raw;

    Attempt(JsonNode raw) { this.raw = raw; }

    /**
     * @return the task's attempt number at that claim (1 again after a retry by hand)
     */
    public int attempt() { return raw.path("attempt").asInt(); }
    /**
     * @return the claim
     */
    public Instant startedAt() { return Json.time(raw, "started_at"); }
    /**
     * @return the acknowledgement, failure or lease lapse
     */
    public Instant endedAt() { return Json.time(raw, "ended_at"); }
    /**
     * @return endedAt - startedAt, in milliseconds
     */
    public long durationMs() { return raw.path("duration_ms").asLong(); }
    /**
     * @return the chronoqd that granted the claim (its {@code --node-id}), or null when it
     *     has none
     */
    public String node() { return Json.text(raw, "node"); }
    /**
     * @return the claim's worker, or null when it named none
     */
    public String worker() { return Json.text(raw, "worker"); }
    /**
     * @return {@code succeeded}, {@code failed} or {@code lease_expired}
     */
    public String outcome() { return Json.text(raw, "outcome"); }
    /**
     * @return the failure's error (its first 1,024 bytes), or null
     */
    public String error() { return Json.text(raw, "error"); }
    /**
     * @return the webhook answer given with it (its first 1,024 bytes), or null
     */
    public String response() { return Json.text(raw, "response"); }
    /**
     * @return the whole JSON object as chronoqd sent it
     */
    public JsonNode raw() { return raw; }

    @Override
    public String toString() { return "Attempt" + raw; }
}
