package dev.chronoq;

import org.junit.jupiter.api.Test;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.*;

/** Failover rules with fake nodes: 503 moves on, a lost answer is resent only when safe (C13). */
class TransportTest {
    /** A fake node: reads each request's head and body, then answers {@code reply} (or closes when null). */
    static final class FakeNode implements AutoCloseable {
        final ServerSocket socket = new ServerSocket(0);
        final AtomicInteger requests = new AtomicInteger();
        final String url = "http://127.0.0.1:" + socket.getLocalPort();

        FakeNode(String reply) throws Exception {
            Thread t = new Thread(() -> {
                while (!socket.isClosed()) {
                    try (Socket s = socket.accept()) {
                        readRequest(s.getInputStream());
                        requests.incrementAndGet();
                        if (reply != null) {
                            OutputStream o = s.getOutputStream();
                            byte[] b = reply.getBytes(StandardCharsets.UTF_8);
                            o.write(("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: "
                                    + b.length + "\r\nConnection: close\r\n\r\n").getBytes(StandardCharsets.UTF_8));
                            o.write(b);
                            o.flush();
                        }
                    } catch (Exception ignored) {
                        // closed
                    }
                }
            }, "fake-node");
            t.setDaemon(true);
            t.start();
        }

        private static void readRequest(InputStream in) throws Exception {
            StringBuilder head = new StringBuilder();
            while (!head.toString().endsWith("\r\n\r\n")) {
                int c = in.read();
                if (c < 0) return;
                head.append((char) c);
            }
            int len = 0;
            for (String line : head.toString().split("\r\n")) {
                if (line.toLowerCase().startsWith("content-length:")) len = Integer.parseInt(line.substring(15).trim());
            }
            in.readNBytes(len);
        }

        @Override
        public void close() throws Exception { socket.close(); }
    }

    // C13: a 503 moves on to the next node
    @Test
    void c13_unavailableMovesToTheNextNode() throws Exception {
        try (FakeNode busy = new FakeNode("{\"error\":{\"code\":\"not_leader\",\"message\":\"no leader\"}}");
             Chronoqd server = Chronoqd.start()) {
            ChronoqClient client = ChronoqClient.builder().urls(busy.url, server.url).build();
            Task t = client.enqueue("tq", 1);
            assertEquals(1, busy.requests.get());
            assertEquals(server.url, client.currentUrl());
            assertEquals(t.id(), client.get(t.id()).id());
            // with only the busy node, the 503 is the error
            ChronoqClient only = ChronoqClient.builder().urls(busy.url).build();
            UnavailableException e = assertThrows(UnavailableException.class, () -> only.get("x"));
            assertEquals("not_leader", e.code());
            assertEquals(503, e.status());
        }
    }

    // C13: a lost answer: safe calls go on to the next node, an unsafe POST is outcome-unknown
    @Test
    void c13_lostAnswerIsResentOnlyWhenSafe() throws Exception {
        try (FakeNode mute = new FakeNode(null); Chronoqd server = Chronoqd.start()) {
            ChronoqClient client = ChronoqClient.builder().urls(mute.url, server.url).timeout(Duration.ofSeconds(20)).build();
            OutcomeUnknownException e = assertThrows(OutcomeUnknownException.class, () -> client.enqueue("tq", 1));
            assertEquals(mute.url, e.node());
            assertTrue(e.getMessage().contains("not safe to resend"), e.getMessage());
            assertEquals(0, server.client().listAll("tq", null).size());
            // a create with a client id is safe: resent to the next node
            Task t = client.enqueue(TaskSpec.builder("tq").id("safe-1").build());
            assertEquals("safe-1", t.id());
            assertEquals(server.url, client.currentUrl());
        }
    }
}
