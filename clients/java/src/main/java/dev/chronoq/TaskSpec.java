package dev.chronoq;

import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * What to enqueue: build with {@code TaskSpec.builder("queue").payload(...).delay(...).build()}.
 */
public final class TaskSpec {
    final String queue;
    final Object payload;
    final Instant runAt;
    final Duration delay;
    final String id;
    final OnConflict onConflict;
    final Integer maxAttempts;
    final Integer priority;
    final Backoff backoff;
    final Target target;
    final String key;

    private TaskSpec(Builder b) {
        this.queue = Objects.requireNonNull(b.queue, "queue");
        this.payload = b.payload;
        this.runAt = b.runAt;
        this.delay = b.delay;
        this.id = b.id;
        this.onConflict = b.onConflict;
        this.maxAttempts = b.maxAttempts;
        this.priority = b.priority;
        this.backoff = b.backoff;
        this.target = b.target;
        this.key = b.key;
        if (runAt != null && delay != null) throw new IllegalArgumentException("give runAt or delay, not both");
    }

    /**
     * @param queue the queue
     * @return a new builder
     */
    public static Builder builder(String queue) { return new Builder(queue); }

    /**
     * @return the client id, or null
     */
    public String id() { return id; }

    ObjectNode toJson() {
        ObjectNode o = Transport.MAPPER.createObjectNode();
        o.put("queue", queue);
        if (payload != null) o.set("payload", Transport.MAPPER.valueToTree(payload));
        if (runAt != null) o.put("run_at", runAt.toString());
        if (delay != null) o.put("delay_ms", delay.toMillis());
        if (id != null) o.put("id", id);
        if (onConflict != null) o.put("on_conflict", onConflict.wire());
        if (maxAttempts != null) o.put("max_attempts", maxAttempts);
        if (priority != null) o.put("priority", priority);
        if (backoff != null) {
            ObjectNode b = o.putObject("backoff");
            b.put("base_ms", backoff.base().toMillis());
            if (backoff.cap() != null) b.put("cap_ms", backoff.cap().toMillis());
        }
        if (target != null) o.set("target", targetJson(target));
        if (key != null) o.put("key", key);
        return o;
    }

    static ObjectNode targetJson(Target target) {
        ObjectNode t = Transport.MAPPER.createObjectNode();
        t.put("url", target.url());
        if (target.method() != null) t.put("method", target.method());
        if (target.headers() != null) t.set("headers", Transport.MAPPER.valueToTree(target.headers()));
        if (target.timeout() != null) t.put("timeout_ms", target.timeout().toMillis());
        return t;
    }

    /**
     * Builder of {@link TaskSpec}.
     *
     */
    public static final class Builder {
        private final String queue;
        private Object payload;
        private Instant runAt;
        private Duration delay;
        private String id;
        private OnConflict onConflict;
        private Integer maxAttempts;
        private Integer priority;
        private Backoff backoff;
        private Target target;
        private String key;

        private Builder(String queue) { this.queue = queue; }

        /**
         * @param payload any value Jackson can serialize (a Map, a POJO, a JsonNode)
         * @return this
         */
        public Builder payload(Object payload) { this.payload = payload; return this; }
        /**
         * @param runAt when it is due
         * @return this
         */
        public Builder runAt(Instant runAt) { this.runAt = runAt; return this; }
        /**
         * @param delay due this long from now
         * @return this
         */
        public Builder delay(Duration delay) { this.delay = delay; return this; }
        /**
         * @param id a client-chosen id (makes a retried enqueue safe)
         * @return this
         */
        public Builder id(String id) { this.id = id; return this; }
        /**
         * @param onConflict what to do when the id names an unfinished task
         * @return this
         */
        public Builder onConflict(OnConflict onConflict) { this.onConflict = onConflict; return this; }
        /**
         * @param maxAttempts attempt limit (1-1000)
         * @return this
         */
        public Builder maxAttempts(int maxAttempts) { this.maxAttempts = maxAttempts; return this; }
        /**
         * @param priority lower runs first
         * @return this
         */
        public Builder priority(int priority) { this.priority = priority; return this; }
        /**
         * @param backoff retry backoff
         * @return this
         */
        public Builder backoff(Backoff backoff) { this.backoff = backoff; return this; }
        /**
         * @param target webhook target
         * @return this
         */
        public Builder target(Target target) { this.target = target; return this; }
        /**
         * @param key ordering key
         * @return this
         */
        public Builder key(String key) { this.key = key; return this; }
        /**
         * @return the spec
         */
        public TaskSpec build() { return new TaskSpec(this); }
    }
}
