package dev.chronoq;

/**
 * 503 {@code unavailable} (and {@code not_leader}, {@code store_unavailable}, ...): chronoqd could not do it now; retry.
 *
 */
public class UnavailableException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public UnavailableException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
