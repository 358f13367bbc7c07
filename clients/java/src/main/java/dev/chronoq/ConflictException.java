package dev.chronoq;

/**
 * 409 {@code conflict}: a client id names an unfinished task ({@code on_conflict=reject}), or a schedule name is taken.
 *
 */
public class ConflictException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public ConflictException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
