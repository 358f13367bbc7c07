package dev.chronoq;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/** Several URLs: C13. */
class FailoverTest {
    // C13
    @Test
    void c13_firstNodeDown() throws Exception {
        String down = "http://127.0.0.1:" + Chronoqd.freePort();
        try (Chronoqd server = Chronoqd.start()) {
            ChronoqClient client = ChronoqClient.builder().urls(down, server.url).timeout(Duration.ofSeconds(60)).build();
            Task t = client.enqueue("c13", Map.of("a", 1)); // POST without id: not sent to the first node, so moved on
            assertEquals(server.url, client.currentUrl());
            assertEquals(t.id(), client.get(t.id()).id());
            assertEquals(1, client.claim("c13", 1, Duration.ofSeconds(30), Duration.ZERO).size());
            // comma-separated form too
            ChronoqClient c2 = ChronoqClient.builder().urls(down + "," + server.url).build();
            assertEquals("ok", c2.health().get("status").asText());
        }
    }

    // C13
    @Test
    void c13_everyNodeDown() throws Exception {
        String a = "http://127.0.0.1:" + Chronoqd.freePort();
        String b = "http://127.0.0.1:" + Chronoqd.freePort();
        ChronoqClient client = ChronoqClient.builder().urls(a, b).timeout(Duration.ofSeconds(10)).build();
        ConnectionFailedException e = assertThrows(ConnectionFailedException.class, () -> client.get("x"));
        assertTrue(e.getMessage().startsWith("no node answered"), e.getMessage());
        assertTrue(e.getMessage().contains(a) && e.getMessage().contains(b), e.getMessage());
        assertTrue(e.getMessage().contains("connection refused"), e.getMessage());
        assertInstanceOf(UnavailableException.class, e);
        assertThrows(ConnectionFailedException.class, () -> client.enqueue("q", 1));
    }

    @Test
    void badUrlsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> ChronoqClient.builder().urls("ftp://x").build());
        assertThrows(IllegalArgumentException.class, () -> ChronoqClient.builder().urls("http://x:1/?a=b").build());
    }
}
