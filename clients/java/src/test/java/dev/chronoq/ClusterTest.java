package dev.chronoq;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.*;

/** {@code cluster()}, and C13 with a real cluster: chronoqd --cluster nodes on PostgreSQL. */
class ClusterTest {
    /**
     * A store URL on the PostgreSQL cluster ctest starts (its URL is in the file
     * {@code $CHRONOQ_TEST_PG_URL_FILE}), in a schema of its own. Outside ctest, without it, the test is skipped.
     */
    static String pgStore() throws Exception {
        String file = System.getenv("CHRONOQ_TEST_PG_URL_FILE");
        Assumptions.assumeTrue(file != null && !file.isEmpty(),
                "CHRONOQ_TEST_PG_URL_FILE is not set: ctest sets it to the PostgreSQL cluster it starts");
        String url = Files.readString(Path.of(file)).strip();
        return url + (url.contains("?") ? "&" : "?") + "schema=java_cluster_" + ProcessHandle.current().pid() + "_"
                + System.nanoTime() % 1_000_000;
    }

    /** A node replaced quickly when it dies (heartbeats every 100 ms, a 1 s lease). */
    static Chronoqd node(String store, String id) throws Exception {
        return Chronoqd.start(null, "--cluster", "--store", store, "--node-id", id, "--heartbeat-ms", "100",
                "--lease-ms", "1000");
    }

    /** The node id of the leader the client's current node sees ("" for none yet, or no answer). */
    static String leaderOf(ChronoqClient c) {
        try {
            JsonNode leader = c.cluster().get("leader");
            return leader == null || leader.isNull() ? "" : leader.get("node_id").asText();
        } catch (ChronoqException e) {
            return "";
        }
    }

    // C13: cluster() names the leader and both nodes; a client given both URLs goes on through the other node
    // once the leader is killed (SIGKILL), and what it stored before is there.
    @Test
    void c13_clusterFailover() throws Exception {
        String store = pgStore();
        try (Chronoqd n1 = node(store, "n1")) {
            ChronoqClient one = n1.client();
            Chronoqd.await("n1 to lead", () -> leaderOf(one).equals("n1"));
            try (Chronoqd n2 = node(store, "n2")) {
                ChronoqClient c = ChronoqClient.builder().urls(n1.url, n2.url).timeout(Duration.ofSeconds(5)).build();
                Chronoqd.await("cluster() to list n1 and n2", () -> {
                    JsonNode info = c.cluster();
                    return info.get("node").asText().equals("n1") && info.get("role").asText().equals("leader")
                            && info.get("nodes").size() == 2;
                });
                String q = "c13-cluster-" + System.nanoTime();
                Task before = c.enqueue(TaskSpec.builder(q).id("before").payload(Map.of("n", 1)).build());

                n1.kill();
                // n2 leads once n1's session (or its 1 s lease) is gone; until then calls fail over or answer 503.
                Chronoqd.await("n2 to lead", () -> leaderOf(c).equals("n2"));
                assertEquals(n2.url, c.currentUrl());
                Task t = c.get(before.id());
                assertEquals("scheduled", t.state());
                assertEquals(1, t.payload().get("n").asInt());
                c.enqueue(TaskSpec.builder(q).id("after").build());
                assertEquals(2, c.claim(q, 10, Duration.ofMinutes(1), Duration.ZERO).size());
            }
        }
    }

    @Test
    void clusterOnASingleNodeIsNotFound() throws Exception {
        try (Chronoqd server = Chronoqd.start()) {
            assertThrows(NotFoundException.class, () -> server.client().cluster());
        }
    }
}
