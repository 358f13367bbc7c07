package dev.chronoq;

/**
 * 429 {@code key_backlog_full}: the task's key already has the queue's {@code max_pending_per_key} tasks waiting; field {@code key}.
 *
 */
public class KeyBacklogFullException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public KeyBacklogFullException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
