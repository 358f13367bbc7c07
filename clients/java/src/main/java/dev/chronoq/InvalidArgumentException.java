package dev.chronoq;

/**
 * 400 {@code invalid_argument}: a malformed request; {@link #field()} names the field.
 *
 */
public class InvalidArgumentException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public InvalidArgumentException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
