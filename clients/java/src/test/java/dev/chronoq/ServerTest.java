package dev.chronoq;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * A test class with two chronoqd of its own, started before its first test and stopped after its last:
 * {@link #server} on the machine's clock, and {@link #tcServer} ({@code --test-clock}), whose time moves only
 * when a test says, through {@link #time}, which moves the timers of {@link #tcClient} (lease extensions) by
 * the same amount. A test whose outcome depends on time passing (a lease that lapses, a wait that runs out,
 * an extension that must come before a lapse) uses the second; nothing sleeps for time to pass.
 */
abstract class ServerTest {
    static Chronoqd server;
    static ChronoqClient client;
    static Chronoqd tcServer;
    static FakeTime time;
    static ChronoqClient tcClient;

    @BeforeAll
    static void up() throws Exception {
        server = Chronoqd.start();
        client = server.client();
        tcServer = Chronoqd.startTestClock();
        time = new FakeTime(tcServer);
        tcClient = time.client();
    }

    @AfterAll
    static void down() throws Exception {
        try {
            if (server != null) server.close();
        } finally {
            if (tcServer != null) tcServer.close();
        }
        server = null;
        client = null;
        tcServer = null;
        time = null;
        tcClient = null;
    }
}
