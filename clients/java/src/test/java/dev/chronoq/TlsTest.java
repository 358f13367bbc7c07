package dev.chronoq;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.*;

/** https with a CA file: C16. */
class TlsTest {
    /** Writes a throwaway CA and a server certificate it signed into {@code dir} (tests/support/make-test-certs.sh). */
    static void makeCerts(Path dir) throws Exception {
        Path script = null;
        for (Path d = Path.of("").toAbsolutePath(); d != null && script == null; d = d.getParent()) {
            Path candidate = d.resolve("tests/support/make-test-certs.sh");
            if (Files.exists(candidate)) script = candidate;
        }
        assertNotNull(script, "tests/support/make-test-certs.sh not found above the working directory");
        Process p = new ProcessBuilder("bash", script.toString(), dir.toString()).redirectErrorStream(true).start();
        assertTrue(p.waitFor(Chronoqd.DEADLINE.toSeconds(), TimeUnit.SECONDS), "make-test-certs.sh did not end");
        assertEquals(0, p.exitValue(), new String(p.getInputStream().readAllBytes()));
    }

    // C16
    @Test
    void c16_httpsWithTheCaFile() throws Exception {
        Path certs = Files.createTempDirectory("chronoq-java-tls-");
        try {
            makeCerts(certs);
            try (Chronoqd server = Chronoqd.start(null, "--tls-cert", certs.resolve("server.pem").toString(),
                    "--tls-key", certs.resolve("server.key").toString())) {
                assertTrue(server.url.startsWith("https://127.0.0.1:"), server.url);
                ChronoqClient client = ChronoqClient.builder().urls(server.url).caFile(certs.resolve("ca.pem"))
                        .timeout(Duration.ofSeconds(60)).build();
                assertEquals("ok", client.health().get("status").asText());
                Task t = client.enqueue(TaskSpec.builder("c16").id("tls:java").payload(Map.of("a", 1)).build());
                assertEquals(t.id(), client.get("tls:java").id());

                // Another CA, and the JDK's: the handshake fails, naming why.
                for (ChronoqClient other : new ChronoqClient[] {
                        ChronoqClient.builder().urls(server.url).caFile(certs.resolve("other-ca.pem")).build(),
                        ChronoqClient.builder().urls(server.url).build()}) {
                    ConnectionFailedException e = assertThrows(ConnectionFailedException.class, other::health);
                    assertTrue(e.getMessage().contains("unable to find valid certification path"), e.getMessage());
                }
            }
        } finally {
            try (var s = Files.walk(certs)) {
                s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }

    @Test
    void badCaFile() throws Exception {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ChronoqClient.builder().urls("https://127.0.0.1:1").caFile(Path.of("/nonexistent/ca.pem")).build());
        assertTrue(e.getMessage().startsWith("caFile: cannot read /nonexistent/ca.pem"), e.getMessage());
        Path notPem = Files.createTempFile("chronoq-java-", ".pem");
        try {
            Files.writeString(notPem, "not a certificate\n");
            e = assertThrows(IllegalArgumentException.class,
                    () -> ChronoqClient.builder().urls("https://127.0.0.1:1").caFile(notPem).build());
            assertTrue(e.getMessage().contains("holds no PEM certificate"), e.getMessage());
        } finally {
            Files.delete(notPem);
        }
    }
}
