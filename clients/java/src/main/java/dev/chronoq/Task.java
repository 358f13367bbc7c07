package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * A task as chronoqd returns it; a claimed task (a lease) also has {@link #token()} and
 * {@link #leaseUntil()}.
 */
public final class Task {
    private final JsonNode raw;

    Task(JsonNode raw) { this.raw = raw; }

    /**
     * @return the task id
     */
    public String id() { return Json.text(raw, "id"); }
    /**
     * @return the queue
     */
    public String queue() { return Json.text(raw, "queue"); }
    /**
     * @return the ordering key, or null
     */
    public String key() { return Json.text(raw, "key"); }
    /**
     * @return the payload (a JSON tree; {@code NullNode} when none)
     */
    public JsonNode payload() { JsonNode p = raw.get("payload"); return p == null ? com.fasterxml.jackson.databind.node.NullNode.getInstance() : p; }
    /**
     * The payload converted with Jackson.
     *
     * @param type the class to convert to
     * @param <T> the type
     * @return the payload as {@code type}
     */
    public <T> T payloadAs(Class<T> type) { return Transport.MAPPER.convertValue(payload(), type); }
    /**
     * @return when it is (or was last) due
     */
    public Instant runAt() { return Json.time(raw, "run_at"); }
    /**
     * @return claims so far
     */
    public int attempt() { return raw.path("attempt").asInt(); }
    /**
     * @return the attempt limit
     */
    public int maxAttempts() { return raw.path("max_attempts").asInt(); }
    /**
     * @return {@code scheduled}, {@code running}, {@code succeeded}, {@code cancelled} or {@code dead} (null on a lease)
     */
    public String state() { return Json.text(raw, "state"); }
    /**
     * @return the priority (lower runs first)
     */
    public int priority() { return raw.path("priority").asInt(); }
    /**
     * @return the last failure's message, or null
     */
    public String lastError() { return Json.text(raw, "last_error"); }
    /**
     * @return the lease end (running tasks and leases), or null
     */
    public Instant leaseUntil() { return Json.time(raw, "lease_until"); }
    /**
     * @return the fencing token of a lease, or 0 when this is not a lease
     */
    public long token() { return raw.path("token").asLong(0); }
    /**
     * @return the webhook target as JSON, or null
     */
    public JsonNode target() { JsonNode t = raw.get("target"); return t == null || t.isNull() ? null : t; }
    /**
     * @return the last webhook answer, or null
     */
    public String lastResponse() { return Json.text(raw, "last_response"); }
    /**
     * @return the worker that holds the task's lease or last held it (the name its claim gave), or
     *     null when no claim named one
     */
    public String worker() { return Json.text(raw, "worker"); }
    /**
     * @return its last finished attempts, oldest first; null unless read with
     *     {@link ChronoqClient#getWithAttempts(String)}
     */
    public List<Attempt> attempts() {
        JsonNode a = raw.get("attempts");
        if (a == null || !a.isArray()) return null;
        List<Attempt> out = new ArrayList<>();
        for (JsonNode item : a) out.add(new Attempt(item));
        return out;
    }
    /**
     * @return creation time (null on a lease)
     */
    public Instant createdAt() { return Json.time(raw, "created_at"); }
    /**
     * @return last change (null on a lease)
     */
    public Instant updatedAt() { return Json.time(raw, "updated_at"); }
    /**
     * @return the whole JSON object as chronoqd sent it
     */
    public JsonNode raw() { return raw; }

    @Override
    public String toString() { return "Task" + raw; }
}
