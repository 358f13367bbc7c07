package chronoq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"chronoq"
)

// The worker tests run on the test-clock chronoqd (fakeTime): a worker
// long-polls for tasks (workerWait), which chronoqd hands over as soon as
// they are due, whatever the time; only a stop needs time to move, past
// the long poll in flight, and TestC14WorkerExtendsLeases moves it to make
// a handler outlive its lease.

// workerWait is the tests' workers' long poll.
const workerWait = 500 * time.Millisecond

func workerOpts(concurrency int) chronoq.WorkerOptions {
	return chronoq.WorkerOptions{Concurrency: concurrency, Wait: workerWait}
}

// runWorker runs w, a worker of a client of ft with long polls of
// workerWait, until the returned stop function is called (or the test
// ends). The stop stops the worker, waits until it has taken the stop, moves
// time past the long polls it has in flight until its claim loops have
// ended, and waits for Run to return, failing the test on its error.
func runWorker(t *testing.T, ft *fakeTime, w *chronoq.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := stopWorker(ft, w, done); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// stopWorker waits, after a stop, for the worker to take it, moves time
// past its long polls until its claim loops have ended, then waits for Run
// to return (on done). It returns an error saying what it timed out
// waiting for, or Run's.
func stopWorker(ft *fakeTime, w *chronoq.Worker, done <-chan error) error {
	end := time.Now().Add(deadline)
	for !chronoq.WorkerStopping(w) {
		if time.Now().After(end) {
			return fmt.Errorf("timed out after %v waiting for the worker to take the stop", deadline)
		}
		time.Sleep(time.Millisecond)
	}
	for chronoq.WorkerClaimLoops(w) > 0 {
		st, err := ft.srv.Clock()
		if err != nil {
			return err
		}
		if st.Waiting(st.Now.Add(workerWait)) { // a long poll of the worker's
			if _, err := ft.srv.Advance(workerWait); err != nil {
				return err
			}
			ft.clk.Advance(workerWait)
			continue
		}
		if time.Now().After(end) {
			return fmt.Errorf("timed out after %v waiting for the worker's claim loops to end", deadline)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("worker: %v", err)
		}
		return nil
	case <-time.After(deadline):
		return fmt.Errorf("timed out after %v waiting for the worker to stop", deadline)
	}
}

// C14: success acks; an error fails the task with its text.
func TestC14WorkerSuccessAndFailure(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, q := ft.machineTimersClient(), testCtx(t), newQueue(t)
	ok, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: map[string]bool{"fail": false}})
	must(t, err)
	bad, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: map[string]bool{"fail": true}, MaxAttempts: 1})
	must(t, err)
	retry, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: map[string]bool{"retry": true}})
	must(t, err)
	w := chronoq.NewWorker(c, workerOpts(4))
	w.Handle(q, func(ctx context.Context, l *chronoq.Lease) error {
		var p map[string]bool
		if err := l.Decode(&p); err != nil {
			return err
		}
		if p["fail"] {
			return fmt.Errorf("handler failed on %s", l.ID)
		}
		if p["retry"] {
			return chronoq.RetryAfter(errors.New("later"), time.Hour)
		}
		return nil
	})
	stop := runWorker(t, ft, w)
	waitState(t, c, ok.ID, chronoq.StateSucceeded)
	d := waitState(t, c, bad.ID, chronoq.StateDead)
	if d.LastError == nil || *d.LastError != "handler failed on "+bad.ID {
		t.Fatalf("last_error %v", d.LastError)
	}
	waitFor(t, "the retried task to be scheduled again with its error", func() bool {
		r, err := c.Get(ctx, retry.ID)
		must(t, err)
		return r.State == chronoq.StateScheduled && r.LastError != nil && *r.LastError == "later" &&
			r.RunAt.Equal(ft.now().Add(time.Hour))
	})
	// The counters count chronoqd's answers, which may ride on a long poll
	// that the stop ends.
	stop()
	if s := w.Stats(); s.Succeeded != 1 || s.Failed != 2 || s.Claimed != 3 || s.Refused != 0 {
		t.Fatalf("the worker's counters: %+v", s)
	}
}

// C14: a key's tasks run in order, one at a time, under many goroutines.
func TestC14WorkerKeyOrder(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, q := ft.machineTimersClient(), testCtx(t), newQueue(t)
	const keys, per = 4, 15
	var specs []chronoq.TaskSpec
	for i := 0; i < per; i++ {
		for k := 0; k < keys; k++ {
			specs = append(specs, chronoq.TaskSpec{Queue: q, Key: fmt.Sprintf("k%d", k), Payload: map[string]int{"key": k, "seq": i}})
		}
	}
	_, err := c.EnqueueMany(ctx, specs)
	must(t, err)
	var mu sync.Mutex
	seen := map[int][]int{}
	running := map[int]bool{}
	var overlaps, total int64
	w := chronoq.NewWorker(c, workerOpts(8))
	w.Handle(q, func(ctx context.Context, l *chronoq.Lease) error {
		var p map[string]int
		if err := l.Decode(&p); err != nil {
			return err
		}
		mu.Lock()
		if running[p["key"]] {
			atomic.AddInt64(&overlaps, 1)
		}
		running[p["key"]] = true
		seen[p["key"]] = append(seen[p["key"]], p["seq"])
		mu.Unlock()
		runtime.Gosched() // let another handler run meanwhile, if chronoqd let it
		mu.Lock()
		running[p["key"]] = false
		mu.Unlock()
		atomic.AddInt64(&total, 1)
		return nil
	})
	stop := runWorker(t, ft, w)
	waitFor(t, fmt.Sprintf("%d tasks to run", keys*per), func() bool { return atomic.LoadInt64(&total) == keys*per })
	stop()
	if overlaps != 0 {
		t.Fatalf("%d times a key's task started while another ran", overlaps)
	}
	for k := 0; k < keys; k++ {
		for i, s := range seen[k] {
			if s != i {
				t.Fatalf("key %d ran out of order: %v", k, seen[k])
			}
		}
	}
}

// C14: several claimers per queue never claim past concurrency + prefetch,
// and every task runs once.
func TestC14WorkerClaimersStayWithinTheLimit(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, q := ft.machineTimersClient(), testCtx(t), newQueue(t)
	const n = 20
	var specs []chronoq.TaskSpec
	for i := 0; i < n; i++ {
		specs = append(specs, chronoq.TaskSpec{Queue: q, Payload: i})
	}
	_, err := c.EnqueueMany(ctx, specs)
	must(t, err)
	release := make(chan struct{})
	var ran int64
	w := chronoq.NewWorker(c, chronoq.WorkerOptions{Concurrency: 1, Prefetch: 3, Claimers: 4,
		Wait: workerWait})
	w.Handle(q, func(ctx context.Context, l *chronoq.Lease) error {
		<-release
		atomic.AddInt64(&ran, 1)
		return nil
	})
	stop := runWorker(t, ft, w)
	// 1 running + 3 prefetched: the four claimers together stop there.
	waitFor(t, "4 tasks to be claimed", func() bool { return w.Stats().Claimed >= 4 })
	page, err := c.List(ctx, chronoq.ListOptions{Queue: q, State: chronoq.StateRunning, Limit: 100})
	must(t, err)
	if got := w.Stats().Claimed; got != 4 || len(page.Tasks) != 4 {
		t.Fatalf("claimed %d (chronoqd shows %d running), want 4: the claimers passed the limit", got, len(page.Tasks))
	}
	close(release)
	waitFor(t, fmt.Sprintf("chronoqd to count %d tasks succeeded", n), func() bool {
		qi, err := c.GetQueue(ctx, q)
		must(t, err)
		return qi.Counts["succeeded"] == n
	})
	// The last acknowledgements' answers may ride on a long poll that the
	// stop ends.
	stop()
	if got, s := atomic.LoadInt64(&ran), w.Stats(); got != n || s.Succeeded != n || s.Claimed != n {
		t.Fatalf("%d handler runs for %d tasks, counters %+v", got, n, s)
	}
}

// C14: a batch handler reports per-item results in one request.
func TestC14WorkerBatchHandler(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, q := ft.machineTimersClient(), testCtx(t), newQueue(t)
	var specs []chronoq.TaskSpec
	for i := 0; i < 6; i++ {
		specs = append(specs, chronoq.TaskSpec{Queue: q, Payload: i, MaxAttempts: 1})
	}
	tasks, err := c.EnqueueMany(ctx, specs)
	must(t, err)
	var batches int64
	w := chronoq.NewWorker(c, workerOpts(1))
	w.HandleBatch(q, 100, func(ctx context.Context, ls []*chronoq.Lease) []error {
		atomic.AddInt64(&batches, 1)
		errs := make([]error, len(ls))
		for i, l := range ls {
			var n int
			if err := l.Decode(&n); err != nil || n%2 == 1 {
				errs[i] = fmt.Errorf("odd %d", n)
			}
		}
		return errs
	})
	stop := runWorker(t, ft, w)
	for i, task := range tasks {
		if i%2 == 0 {
			waitState(t, c, task.ID, chronoq.StateSucceeded)
		} else {
			d := waitState(t, c, task.ID, chronoq.StateDead)
			if d.LastError == nil || *d.LastError != fmt.Sprintf("odd %d", i) {
				t.Fatalf("last_error %v", d.LastError)
			}
		}
	}
	stop()
	s := w.Stats()
	if atomic.LoadInt64(&batches) == 1 && s.AckRequests != 1 {
		t.Fatalf("one batch's outcomes took %d requests", s.AckRequests)
	}
	if s.Succeeded != 3 || s.Failed != 3 {
		t.Fatalf("stats %+v", s)
	}
}

// C14: a stop finishes running tasks and sends their outcomes; no new
// claims after it.
func TestC14WorkerStopFinishesRunningTasks(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, q := ft.machineTimersClient(), testCtx(t), newQueue(t)
	var specs []chronoq.TaskSpec
	for i := 0; i < 3; i++ {
		specs = append(specs, chronoq.TaskSpec{Queue: q, Payload: i})
	}
	tasks, err := c.EnqueueMany(ctx, specs)
	must(t, err)
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	var finished int64
	w := chronoq.NewWorker(c, chronoq.WorkerOptions{Concurrency: 3, Prefetch: -1, Wait: workerWait})
	w.Handle(q, func(ctx context.Context, l *chronoq.Lease) error {
		started <- struct{}{}
		<-release
		atomic.AddInt64(&finished, 1)
		return nil
	})
	stop := runWorker(t, ft, w)
	for i := 0; i < 3; i++ {
		select {
		case <-started:
		case <-time.After(deadline):
			t.Fatal("timed out waiting for three handlers to start")
		}
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// The stop ends the claim loops at once (every slot is busy: no claim
	// is in flight), then waits for the handlers.
	waitFor(t, "the stop to end the worker's claim loops", func() bool { return chronoq.WorkerClaimLoops(w) == 0 })
	late, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: "late"})
	must(t, err)
	select {
	case <-stopped:
		t.Fatal("the worker stopped while handlers ran")
	default:
	}
	close(release)
	select {
	case <-stopped:
	case <-time.After(deadline):
		t.Fatal("timed out waiting for the worker to stop")
	}
	if atomic.LoadInt64(&finished) != 3 {
		t.Fatalf("%d handlers finished", finished)
	}
	for _, task := range tasks {
		got, err := c.Get(ctx, task.ID)
		must(t, err)
		if got.State != chronoq.StateSucceeded {
			t.Fatalf("task %s is %s after the stop", task.ID, got.State)
		}
	}
	got, err := c.Get(ctx, late.ID)
	must(t, err)
	if got.State != chronoq.StateScheduled {
		t.Fatalf("a task enqueued after the stop was claimed: %s", got.State)
	}
}

// C14: a running handler's lease is extended in the background, a third
// of the lease after the claim and after each extension. On the test-clock
// chronoqd with the client's clock moved with it: the handler runs while
// four thirds of the lease pass, and the test waits for each extension's
// answer before it moves time again.
func TestC14WorkerExtendsLeases(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, q := ft.client(), testCtx(t), newQueue(t)
	task, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: 1})
	must(t, err)
	const lease = 30 * time.Second
	// The worker looks for leases to extend every tick: a sixth of the
	// lease, at most a second.
	const tick = time.Second
	w := chronoq.NewWorker(c, chronoq.WorkerOptions{Lease: lease, Wait: workerWait})
	var runs int64
	started, release := make(chan struct{}, 1), make(chan struct{})
	w.Handle(q, func(ctx context.Context, l *chronoq.Lease) error {
		atomic.AddInt64(&runs, 1)
		started <- struct{}{}
		<-release
		return nil
	})
	stop := runWorker(t, ft, w)
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before the worker's cleanup, should the test fail
	select {
	case <-started:
	case <-time.After(deadline):
		t.Fatal("timed out waiting for the handler to start")
	}
	running := waitState(t, c, task.ID, chronoq.StateRunning)
	if want := ft.now().Add(lease); running.LeaseUntil == nil || !running.LeaseUntil.Equal(want) {
		t.Fatalf("lease_until %v, want %v", running.LeaseUntil, want)
	}
	for i := int64(1); i <= 4; i++ {
		ft.waitTimer("the worker's next look at its leases", tick)
		if n := w.Stats().Extensions; n != i-1 {
			t.Fatalf("%d extensions before a third of the lease passed %d times", n, i)
		}
		ft.advance(lease / 3)
		// The tick fired: the worker extends the lease, then arms the next.
		waitFor(t, fmt.Sprintf("extension %d to be answered, or the worker's next tick", i), func() bool {
			return w.Stats().Extensions == i || ft.armed(tick)
		})
		if n := w.Stats().Extensions; n != i {
			t.Fatalf("%d extensions once a third of the lease passed %d times", n, i)
		}
		got, err := c.Get(ctx, task.ID)
		must(t, err)
		if want := ft.now().Add(lease); got.State != chronoq.StateRunning || got.LeaseUntil == nil || !got.LeaseUntil.Equal(want) {
			t.Fatalf("after extension %d the task is %s, lease_until %v, want %v", i, got.State, got.LeaseUntil, want)
		}
	}
	free()
	waitState(t, c, task.ID, chronoq.StateSucceeded)
	stop()
	s := w.Stats()
	if s.Extensions != 4 || s.LeasesLost != 0 || s.Refused != 0 || s.Succeeded != 1 || atomic.LoadInt64(&runs) != 1 {
		t.Fatalf("stats %+v, runs %d", s, runs)
	}
}

// C14: a claim refused for good (a bad queue name) stops the worker with
// the error.
func TestC14WorkerStopsOnABadQueue(t *testing.T) {
	c := newClient(t)
	w := chronoq.NewWorker(c, workerOpts(1))
	w.Handle("bad queue name!", func(ctx context.Context, l *chronoq.Lease) error { return nil })
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err := <-done:
		if !errors.Is(err, chronoq.ErrInvalidArgument) {
			t.Fatalf("Run() = %v", err)
		}
	case <-time.After(deadline):
		t.Fatal("timed out waiting for the worker to stop on a bad queue name")
	}
}

// C15: a worker names itself <hostname>:<pid> by default, and the name
// stays on the task it ran; WorkerName overrides it.
func TestC15WorkerNamesItself(t *testing.T) {
	host, err := os.Hostname()
	must(t, err)
	for _, tc := range []struct{ option, want string }{
		{"", host + ":" + strconv.Itoa(os.Getpid())},
		{"billing-7", "billing-7"},
	} {
		ft := newFakeTime(t)
		c, ctx, q := ft.machineTimersClient(), testCtx(t), newQueue(t)
		task, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: 1})
		must(t, err)
		opts := workerOpts(1)
		opts.WorkerName = tc.option
		w := chronoq.NewWorker(c, opts)
		w.Handle(q, func(ctx context.Context, l *chronoq.Lease) error { return nil })
		stop := runWorker(t, ft, w)
		done := waitState(t, c, task.ID, chronoq.StateSucceeded)
		stop()
		if done.Worker == nil || *done.Worker != tc.want {
			t.Fatalf("WorkerName %q: task %+v, want worker %q", tc.option, done, tc.want)
		}
	}
	if got, want := chronoq.DefaultWorkerName(), host+":"+strconv.Itoa(os.Getpid()); got != want {
		t.Fatalf("DefaultWorkerName() = %q, want %q", got, want)
	}
}

// C15: an absurdly long hostname is cut on a UTF-8 boundary to fit
// chronoqd's 200 bytes, keeping the pid.
func TestC15WorkerNameFits200Bytes(t *testing.T) {
	for _, host := range []string{strings.Repeat("\u00e9", 150), strings.Repeat("h", 300), "short"} {
		name := chronoq.WorkerName(host, 123456)
		if len(name) > 200 || !strings.HasSuffix(name, ":123456") || !utf8.ValidString(name) ||
			!strings.HasPrefix(host, strings.TrimSuffix(name, ":123456")) {
			t.Fatalf("WorkerName(%q) = %q (%d bytes)", host, name, len(name))
		}
	}
	if got := chronoq.WorkerName("h", 7); got != "h:7" {
		t.Fatalf("WorkerName(h, 7) = %q", got)
	}
}

// C15: a worker name chronoqd refuses stops the worker with
// invalid_argument on field worker.
func TestC15WorkerStopsOnABadName(t *testing.T) {
	c, q := newClient(t), newQueue(t)
	opts := workerOpts(1)
	opts.WorkerName = "bad\nname"
	w := chronoq.NewWorker(c, opts)
	w.Handle(q, func(ctx context.Context, l *chronoq.Lease) error { return nil })
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err := <-done:
		var e *chronoq.Error
		if !errors.Is(err, chronoq.ErrInvalidArgument) || !errors.As(err, &e) || e.Field != "worker" {
			t.Fatalf("Run() = %v", err)
		}
	case <-time.After(deadline):
		t.Fatal("timed out waiting for the worker to stop on a bad worker name")
	}
}
