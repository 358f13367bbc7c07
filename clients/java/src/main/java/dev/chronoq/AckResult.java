package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The result of one outcome: {@code ok} (for a failure: it was recorded) or the error.
 *
 * @param id the task id
 * @param ok whether it was applied
 * @param error the error when not ok (a {@link StaleTokenException}, ...), else null
 */
public record AckResult(String id, boolean ok, ChronoqException error) {
    static AckResult from(JsonNode n, String node) {
        boolean ok = n.path("ok").asBoolean();
        ChronoqException e = null;
        if (!ok) {
            JsonNode err = n.path("error");
            e = ChronoqException.of(Json.text(err, "code"), Json.text(err, "message"), Json.text(err, "field"), 409, node);
        }
        return new AckResult(Json.text(n, "id"), ok, e);
    }
}
