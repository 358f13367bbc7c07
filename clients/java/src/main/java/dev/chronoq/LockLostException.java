package dev.chronoq;

/**
 * A {@link ChronoqLock} whose lease lapsed: an extension or the release was refused with {@code stale_token}.
 *
 */
public class LockLostException extends StaleTokenException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public LockLostException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
