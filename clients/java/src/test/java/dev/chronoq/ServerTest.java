package dev.chronoq;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** A test class with a chronoqd of its own: started before its first test, stopped after its last. */
abstract class ServerTest {
    static Chronoqd server;
    static ChronoqClient client;

    @BeforeAll
    static void up() throws Exception {
        server = Chronoqd.start();
        client = server.client();
    }

    @AfterAll
    static void down() throws Exception {
        if (server != null) server.close();
        server = null;
        client = null;
    }
}
