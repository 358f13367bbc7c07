package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;

import java.time.Instant;
import java.time.OffsetDateTime;

/** JSON helpers. */
final class Json {
    private Json() {}

    static String text(JsonNode n, String f) {
        JsonNode v = n.get(f);
        return v == null || v.isNull() ? null : v.asText();
    }

    static Long lng(JsonNode n, String f) {
        JsonNode v = n.get(f);
        return v == null || v.isNull() ? null : v.asLong();
    }

    static Integer integer(JsonNode n, String f) {
        JsonNode v = n.get(f);
        return v == null || v.isNull() ? null : v.asInt();
    }

    static java.time.Duration millis(JsonNode n, String f) {
        Long ms = lng(n, f);
        return ms == null ? null : java.time.Duration.ofMillis(ms);
    }

    static Instant time(JsonNode n, String f) {
        String s = text(n, f);
        return s == null ? null : parseTime(s);
    }

    static Instant parseTime(String s) {
        try {
            return Instant.parse(s);
        } catch (RuntimeException e) {
            return OffsetDateTime.parse(s).toInstant();
        }
    }

    static String seg(String s) {
        return java.net.URLEncoder.encode(s, java.nio.charset.StandardCharsets.UTF_8).replace("+", "%20");
    }
}
