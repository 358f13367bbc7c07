package dev.chronoq;

/**
 * 409 {@code lock_wait_timeout}: the lock stayed held by another for the whole wait; field {@code wait_ms}.
 *
 */
public class LockWaitTimeoutException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public LockWaitTimeoutException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
