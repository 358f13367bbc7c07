package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"chronoq"
	"chronoq/internal/testserver"
)

// TestMain runs a worker node when started by the test as one (see
// startNode); otherwise it starts chronoqd and runs the tests.
func TestMain(m *testing.M) {
	if os.Getenv("SHAREDSTORE_NODE") != "" {
		c, err := chronoq.New([]string{os.Getenv("SHAREDSTORE_URL")})
		if err == nil {
			ctx, stop := signalContext()
			err = Work(ctx, c, os.Getenv("SHAREDSTORE_QUEUE"), Store{Dir: os.Getenv("SHAREDSTORE_DIR")},
				os.Getenv("SHAREDSTORE_NODE"), 4)
			stop()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func signalContext() (context.Context, func()) {
	return signalNotify()
}

// TestThreeNodesRunEveryTaskExactlyOnce: a producer enqueues 300 tasks with
// RunAt, 10 ms apart; three worker processes run them; every task ran
// exactly once, none before it was due. chronoqd runs on a test clock
// (--test-clock): the test moves its time over the tasks' due times, in
// steps, and waits after each for the tasks due by then to have run.
func TestThreeNodesRunEveryTaskExactlyOnce(t *testing.T) {
	const n, spacing, step = 300, 10 * time.Millisecond, 300 * time.Millisecond
	server, err := testserver.StartTestClock()
	if err != nil {
		t.Fatal(err)
	}
	server.StopAtEnd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c, err := chronoq.New([]string{server.URL})
	if err != nil {
		t.Fatal(err)
	}
	queue := fmt.Sprintf("sharedstore-%d", time.Now().UnixNano())
	dir := t.TempDir()
	var nodes []*exec.Cmd
	exited := make([]chan error, 0, 3)
	for _, name := range []string{"a", "b", "c"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SHAREDSTORE_NODE="+name, "SHAREDSTORE_URL="+server.URL,
			"SHAREDSTORE_QUEUE="+queue, "SHAREDSTORE_DIR="+dir)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, cmd)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		exited = append(exited, done)
	}
	defer func() {
		for i, cmd := range nodes {
			select {
			case <-exited[i]:
			default:
				_ = cmd.Process.Kill()
				<-exited[i]
			}
		}
	}()
	clk, err := server.Clock()
	if err != nil {
		t.Fatal(err)
	}
	start := clk.Now
	if err := Produce(ctx, c, queue, n, 10, start, n*spacing); err != nil {
		t.Fatal(err)
	}
	dueBy := func(at time.Time) int {
		due := int(at.Sub(start)/spacing) + 1
		if due > n {
			due = n
		}
		return due
	}
	// waitRan waits until the tasks due by now, and no others, have run.
	// chronoqd takes a task for a waiting claim up to claimAhead before it
	// is due and answers the claim at the due time, so such a task may be
	// running already, but none may have succeeded.
	const claimAhead = 10 * time.Millisecond
	waitRan := func(now time.Time) {
		due := dueBy(now)
		end := time.Now().Add(30 * time.Second)
		for {
			q, err := c.GetQueue(ctx, queue)
			if err != nil {
				t.Fatal(err)
			}
			if ran := q.Counts["succeeded"]; ran > due {
				t.Fatalf("at %v %d tasks ran, but only %d were due: %v", now.Sub(start), ran, due, q.Counts)
			}
			if taken := q.Counts["running"] + q.Counts["succeeded"]; taken > dueBy(now.Add(claimAhead)) {
				t.Fatalf("at %v %d tasks were taken, but only %d were due within %v: %v",
					now.Sub(start), taken, dueBy(now.Add(claimAhead)), claimAhead, q.Counts)
			}
			if q.Counts["succeeded"] == due {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("timed out after 30 s waiting for the %d tasks due at %v to succeed: %v", due, now.Sub(start), q.Counts)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitRan(start)
	for now := start; now.Sub(start) < n*spacing; {
		st, err := server.Advance(step)
		if err != nil {
			t.Fatal(err)
		}
		now = st.Now
		waitRan(now)
	}
	// Stop the nodes gracefully. Each waits for its claim in flight, a
	// long poll of a second of chronoqd's time: move time until they have
	// exited.
	for _, cmd := range nodes {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	end := time.Now().Add(30 * time.Second)
	for i := range nodes {
		for waiting := true; waiting; {
			select {
			case err := <-exited[i]:
				exited[i] <- err // for the deferred cleanup
				if err != nil {
					t.Errorf("node %d: %v", i, err)
				}
				waiting = false
			default:
				if time.Now().After(end) {
					t.Fatalf("timed out after 30 s waiting for node %d to stop", i)
				}
				if _, err := server.Advance(time.Second); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	runs := map[string]int{}
	byNode := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "doc-*.log"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			fields := strings.Fields(line)
			runs[fields[0]]++
			byNode[fields[1]]++
		}
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s-task-%d", queue, i)
		if runs[id] != 1 {
			t.Errorf("task %s ran %d times", id, runs[id])
		}
	}
	if len(runs) != n {
		t.Errorf("%d distinct tasks ran, want %d", len(runs), n)
	}
	t.Logf("runs per node: %v", byNode)
}
