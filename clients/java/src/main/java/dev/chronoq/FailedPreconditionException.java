package dev.chronoq;

/**
 * 409 {@code failed_precondition}: the task is in the wrong state (cancelling a running task, retrying a live one).
 *
 */
public class FailedPreconditionException extends ChronoqException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public FailedPreconditionException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
