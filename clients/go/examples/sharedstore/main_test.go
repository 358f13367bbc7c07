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
	testserver.Main(m, &server)
}

var server *testserver.Server

func signalContext() (context.Context, func()) {
	return signalNotify()
}

// TestThreeNodesRunEveryTaskExactlyOnce: a producer enqueues 300 tasks with
// RunAt; three worker processes run them; every task ran exactly once.
func TestThreeNodesRunEveryTaskExactlyOnce(t *testing.T) {
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c, err := chronoq.New([]string{server.URL})
	if err != nil {
		t.Fatal(err)
	}
	queue := fmt.Sprintf("sharedstore-%d", time.Now().UnixNano())
	dir := t.TempDir()
	var nodes []*exec.Cmd
	for _, name := range []string{"a", "b", "c"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SHAREDSTORE_NODE="+name, "SHAREDSTORE_URL="+server.URL,
			"SHAREDSTORE_QUEUE="+queue, "SHAREDSTORE_DIR="+dir)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, cmd)
	}
	defer func() {
		for _, cmd := range nodes {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
	}()
	if err := Produce(ctx, c, queue, n, 10, time.Second); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(30 * time.Second)
	for {
		q, err := c.GetQueue(ctx, queue)
		if err != nil {
			t.Fatal(err)
		}
		if q.Counts["succeeded"] == n {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("timed out after 30 s waiting for %d tasks to succeed: %v", n, q.Counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Stop the nodes gracefully.
	for _, cmd := range nodes {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, cmd := range nodes {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("node %d: %v", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out after 30 s waiting for node %d to stop", i)
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
