package dev.chronoq;

/**
 * Base class of every error of the chronoq client: an error answered by chronoqd (with its
 * {@link #code()}, {@link #field()} and HTTP {@link #status()}), or a failure to reach it.
 */
public class ChronoqException extends RuntimeException {
    private final String code;
    private final String field;
    private final int status;
    private final String node;

    /**
     * Creates an error.
     *
     * @param message the message
     * @param code chronoqd's error code ({@code invalid_argument}, ...), or a client code
     * @param field the field the error names, or null
     * @param status the HTTP status, or 0 when no answer came
     * @param node the URL of the node that answered (or failed), or null
     */
    public ChronoqException(String message, String code, String field, int status, String node) {
        super(message);
        this.code = code;
        this.field = field;
        this.status = status;
        this.node = node;
    }

    /**
     * @return chronoqd's error code, e.g. {@code invalid_argument}, {@code stale_token}
     */
    public String code() { return code; }

    /**
     * @return the field the error names ({@code tasks[3].run_at}), or null
     */
    public String field() { return field; }

    /**
     * @return the HTTP status of the answer, or 0 when no answer came
     */
    public int status() { return status; }

    /**
     * @return the URL of the node that gave the answer (or failed), or null
     */
    public String node() { return node; }

    @Override
    public String toString() {
        return getClass().getSimpleName() + ": " + code + ": " + getMessage()
                + (field != null ? " (field " + field + ")" : "") + (status != 0 ? " [HTTP " + status + "]" : "")
                + (node != null ? " at " + node : "");
    }

    /** Maps a code (and HTTP status, for unknown codes) to the exception class. */
    static ChronoqException of(String code, String message, String field, int status, String node) {
        if (code == null) code = "";
        switch (code) {
            case "invalid_argument": return new InvalidArgumentException(message, code, field, status, node);
            case "not_found": return new NotFoundException(message, code, field, status, node);
            case "conflict": case "already_exists": return new ConflictException(message, code, field, status, node);
            case "failed_precondition": case "aborted":
                return new FailedPreconditionException(message, code, field, status, node);
            case "stale_token": return new StaleTokenException(message, code, field, status, node);
            case "lock_wait_timeout": return new LockWaitTimeoutException(message, code, field, status, node);
            case "key_backlog_full": case "resource_exhausted":
                return new KeyBacklogFullException(message, code, field, status, node);
            case "unavailable": case "not_leader": case "leader_unavailable": case "store_unavailable":
            case "deadline_exceeded":
                return new UnavailableException(message, code, field, status, node);
            case "leader_timeout": case "leader_bad_response":
                return new OutcomeUnknownException(message, code, field, status, node);
            default: break;
        }
        if (code.isEmpty()) code = "http_" + status;
        switch (status) {
            case 400: return new InvalidArgumentException(message, code, field, status, node);
            case 404: return new NotFoundException(message, code, field, status, node);
            case 409: return new ConflictException(message, code, field, status, node);
            case 429: return new KeyBacklogFullException(message, code, field, status, node);
            case 503: return new UnavailableException(message, code, field, status, node);
            case 502: case 504: return new OutcomeUnknownException(message, code, field, status, node);
            default: return new ChronoqException(message, code, field, status, node);
        }
    }
}
