package dev.chronoq;

/**
 * 404 {@code not_found}: no such task, queue, schedule or endpoint.
 *
 */
public class NotFoundException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public NotFoundException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
