package dev.chronoq;

import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Duration;

/**
 * One outcome for {@link ChronoqClient#ackMany} or a claim's acks: a success ({@link #ok}) or a
 * failure ({@link #fail}) with its error text and optional retry delay.
 *
 * @param id the task id
 * @param token the lease token
 * @param error null for a success, the error text for a failure
 * @param retryIn retry delay of a failure, or null for the backoff
 */
public record AckItem(String id, long token, String error, Duration retryIn) {
    /**
     * @param id task id
     * @param token lease token
     * @return a success
     */
    public static AckItem ok(String id, long token) { return new AckItem(id, token, null, null); }

    /**
     * @param id task id
     * @param token lease token
     * @param error text
     * @return a failure (backoff applies)
     */
    public static AckItem fail(String id, long token, String error) { return new AckItem(id, token, error, null); }

    /**
     * @param id task id
     * @param token token
     * @param error text
     * @param retryIn delay
     * @return a failure
     */
    public static AckItem fail(String id, long token, String error, Duration retryIn) {
        return new AckItem(id, token, error, retryIn);
    }

    /**
     * @param t a lease
     * @return a success for it
     */
    public static AckItem ok(Task t) { return ok(t.id(), t.token()); }

    ObjectNode toJson() {
        ObjectNode o = Transport.MAPPER.createObjectNode();
        o.put("id", id);
        o.put("token", token);
        if (error != null) {
            o.put("error", error);
            if (retryIn != null) o.put("retry_in_ms", retryIn.toMillis());
        }
        return o;
    }
}
