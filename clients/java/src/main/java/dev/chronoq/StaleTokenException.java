package dev.chronoq;

/**
 * 409 {@code stale_token}: the lease or lock is no longer the caller's (it lapsed, was redelivered or released); nothing was changed.
 *
 */
public class StaleTokenException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public StaleTokenException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
