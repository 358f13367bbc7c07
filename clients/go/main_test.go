package chronoq_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"chronoq"
	"chronoq/internal/testserver"
)

// server is the chronoqd every test talks to, started by TestMain.
var server *testserver.Server

func TestMain(m *testing.M) {
	testserver.Main(m, &server)
}

// deadline is how long any wait of a test may take (chronoqd may run under
// ASan, several times slower).
const deadline = 30 * time.Second

func newClient(t *testing.T) *chronoq.Client {
	t.Helper()
	c, err := chronoq.New([]string{server.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var queueSeq int64

// newQueue returns a queue name no other test uses.
func newQueue(t *testing.T) string {
	return fmt.Sprintf("go-%s-%d-%d", t.Name(), time.Now().UnixNano()%1000000, atomic.AddInt64(&queueSeq, 1))
}

// waitFor polls cond until it returns true, failing the test with what it
// waited for if the deadline passes first.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", deadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitState waits until the task id is in state.
func waitState(t *testing.T, c *chronoq.Client, id, state string) *chronoq.Task {
	t.Helper()
	var last *chronoq.Task
	waitFor(t, fmt.Sprintf("task %s to be %s", id, state), func() bool {
		task, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		last = task
		return task.State == state
	})
	return last
}
