package chronoq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"chronoq"
	"chronoq/internal/testserver"
)

// pgStore returns a store URL on the PostgreSQL cluster ctest starts (its
// URL is in the file $CHRONOQ_TEST_PG_URL_FILE) in a schema of its own.
// Run outside ctest, without that cluster, the test is skipped.
func pgStore(t *testing.T) string {
	file := os.Getenv("CHRONOQ_TEST_PG_URL_FILE")
	if file == "" {
		t.Skip("CHRONOQ_TEST_PG_URL_FILE is not set: ctest sets it to the PostgreSQL cluster it starts")
	}
	data, err := os.ReadFile(file)
	must(t, err)
	url := strings.TrimSpace(string(data))
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%sschema=go_cluster_%d_%d", url, sep, os.Getpid(), time.Now().UnixNano()%1000000)
}

// startNode starts a chronoqd --cluster node on store, replaced quickly
// when it dies (heartbeats every 100 ms, a 1 s lease).
func startNode(t *testing.T, store, id string) *testserver.Server {
	t.Helper()
	s, err := testserver.StartWith("", "--cluster", "--store", store, "--node-id", id,
		"--heartbeat-ms", "100", "--lease-ms", "1000")
	must(t, err)
	s.StopAtEnd(t)
	return s
}

// leaderOf returns the node id of the leader c's current node sees ("" for
// none yet).
func leaderOf(c *chronoq.Client) string {
	info, err := c.Cluster(context.Background())
	if err != nil {
		return ""
	}
	leader, _ := info["leader"].(map[string]any)
	id, _ := leader["node_id"].(string)
	return id
}

// C13 with a real cluster: two chronoqd --cluster nodes on PostgreSQL.
// Cluster() names the leader and both nodes; a client given both URLs goes
// on through the other node once the leader is killed (SIGKILL), and what
// it stored before is there.
func TestC13ClusterFailover(t *testing.T) {
	store := pgStore(t)
	n1 := startNode(t, store, "n1")
	one, err := chronoq.New([]string{n1.URL})
	must(t, err)
	waitFor(t, "n1 to lead", func() bool { return leaderOf(one) == "n1" })
	n2 := startNode(t, store, "n2")

	c, err := chronoq.New([]string{n1.URL, n2.URL}, chronoq.WithTimeout(5*time.Second))
	must(t, err)
	ctx := testCtx(t)
	waitFor(t, "Cluster() to list n1 and n2", func() bool {
		info, err := c.Cluster(ctx)
		must(t, err)
		nodes, _ := info["nodes"].([]any)
		return info["node"] == "n1" && info["role"] == "leader" && len(nodes) == 2
	})
	q := newQueue(t)
	before, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, ID: "before", Payload: map[string]int{"n": 1}})
	must(t, err)

	n1.Kill()
	// n2 takes over once n1's lease (1 s) has run out; until then calls
	// answer 503 not_leader or fail to connect, and the client says so.
	waitFor(t, "n2 to lead", func() bool { return leaderOf(c) == "n2" })
	if got := c.CurrentURL(); got != n2.URL {
		t.Fatalf("the client's current node is %s, want n2 (%s)", got, n2.URL)
	}
	task, err := c.Get(ctx, before.ID)
	must(t, err)
	if task.State != chronoq.StateScheduled || string(task.Payload) != `{"n":1}` {
		t.Fatalf("the task stored before the failover is %+v", task)
	}
	after, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, ID: "after"})
	must(t, err)
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Max: 10, Lease: time.Minute})
	must(t, err)
	if len(res.Tasks) != 2 {
		t.Fatalf("claimed %d tasks after the failover, want 2 (%s and %s)", len(res.Tasks), before.ID, after.ID)
	}
}

// Cluster() on a chronoqd that is not a cluster node: not found.
func TestClusterOnASingleNode(t *testing.T) {
	_, err := newClient(t).Cluster(testCtx(t))
	if !errors.Is(err, chronoq.ErrNotFound) {
		t.Fatalf("Cluster() = %v, want not_found", err)
	}
}
