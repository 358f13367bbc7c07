package dev.chronoq;

/** No node could be connected to (every URL down); the message lists what each node did. Nothing was done. */
public class ConnectionFailedException extends UnavailableException {
    /**
     * Creates the error.
     *
     * @param message the message
     * @param code the error code
     * @param field the field named, or null
     * @param status the HTTP status, or 0
     * @param node the node URL, or null
     */
    public ConnectionFailedException(String message, String code, String field, int status, String node) {
        super(message, code, field, status, node);
    }
}
