// Command chronoq-go-bench measures workload W2 with the Go client:
// enqueue N due-now tasks with EnqueueMany, then drain them with a Worker
// running a no-op handler, and print one JSON line with the throughput
// measured from the first claim to the last acknowledgement. By default
// the worker claims as chronoq-bench's W2 over HTTP does: 4 claims of
// about 256 tasks in flight (4 claimers sharing 8 + 1024 slots).
//
//	chronoq-go-bench -url http://127.0.0.1:7070 -n 50000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"chronoq"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:7070", "chronoqd URL(s), comma-separated")
	n := flag.Int("n", 50000, "tasks")
	concurrency := flag.Int("concurrency", 8, "handler goroutines")
	prefetch := flag.Int("prefetch", 1024, "tasks claimed beyond the free handlers")
	claimers := flag.Int("claimers", 4, "claims in flight at once")
	queue := flag.String("queue", fmt.Sprintf("bench-w2-%d", time.Now().UnixNano()), "queue")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the drain to this file")
	flag.Parse()
	if err := run(*url, *queue, *n, *concurrency, *prefetch, *claimers, *timeout, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "chronoq-go-bench:", err)
		os.Exit(1)
	}
}

func run(url, queue string, n, concurrency, prefetch, claimers int, timeout time.Duration, cpuprofile string) error {
	c, err := chronoq.New([]string{url})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	specs := make([]chronoq.TaskSpec, n)
	for i := range specs {
		specs[i] = chronoq.TaskSpec{Queue: queue, Payload: i}
	}
	t0 := time.Now()
	if _, err := c.EnqueueMany(ctx, specs); err != nil {
		return err
	}
	enqueueS := time.Since(t0).Seconds()
	// The enqueue's garbage is not the drain's: collect it and give its
	// memory back now, instead of in the background during the drain.
	specs = nil
	debug.FreeOSMemory()

	var handled int64
	w := chronoq.NewWorker(c, chronoq.WorkerOptions{Concurrency: concurrency, Prefetch: prefetch, Claimers: claimers,
		Wait: time.Second})
	w.Handle(queue, func(ctx context.Context, l *chronoq.Lease) error {
		atomic.AddInt64(&handled, 1)
		return nil
	})
	// The profile covers the drain only.
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	wctx, stop := context.WithCancel(ctx)
	// As chronoq-bench, from the first claim (the worker's first act).
	first := time.Now()
	var runErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); runErr = w.Run(wctx) }()
	// The last acknowledgement: chronoqd counts every task succeeded (an
	// acknowledgement riding on a long-polling claim is applied at once,
	// while the worker hears of it only when the claim returns).
	var last time.Time
	for {
		if atomic.LoadInt64(&handled) >= int64(n) {
			q, err := c.GetQueue(ctx, queue)
			if err == nil && q.Counts["succeeded"] >= n {
				last = time.Now()
				break
			}
		}
		if ctx.Err() != nil {
			stop()
			wg.Wait()
			return fmt.Errorf("timed out: %+v", w.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	wg.Wait()
	if runErr != nil {
		return runErr
	}
	secs := last.Sub(first).Seconds()
	s := w.Stats()
	out := map[string]any{
		"workload":      "W2",
		"client":        "go",
		"tasks":         n,
		"concurrency":   concurrency,
		"prefetch":      prefetch,
		"claimers":      claimers,
		"tasks_per_s":   int64(float64(n) / secs),
		"drain_s":       secs,
		"enqueue_s":     enqueueS,
		"enqueue_per_s": int64(float64(n) / enqueueS),
		"ack_requests":  s.AckRequests,
		"refused":       s.Refused,
		"failed":        s.Failed,
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
