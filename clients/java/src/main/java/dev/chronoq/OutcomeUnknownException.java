package dev.chronoq;

/** The request was sent but its answer was lost, and it was not safe to resend: it may or may not have been done. */
public class OutcomeUnknownException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public OutcomeUnknownException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
