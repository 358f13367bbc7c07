package chronoq

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Handler runs one claimed task: returning nil acknowledges it, an error
// fails the attempt with the error's text (see RetryAfter), a panic fails
// it too.
type Handler func(ctx context.Context, task *Lease) error

// BatchHandler runs up to its max claimed tasks at once and returns one
// error per task, in order (nil: succeeded). A nil slice means every task
// succeeded; a slice of another length fails them all. Every outcome goes
// to chronoqd in one request.
type BatchHandler func(ctx context.Context, tasks []*Lease) []error

// RetryError is a handler error that chooses the retry delay.
type RetryError struct {
	// Err is the failure (its text becomes last_error).
	Err error
	// Delay is when to retry (0: the task's backoff).
	Delay time.Duration
}

// Error returns Err's text.
func (e *RetryError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RetryError) Unwrap() error { return e.Err }

// RetryAfter returns an error that fails the attempt with err's text and
// retries the task after delay instead of its backoff.
func RetryAfter(err error, delay time.Duration) error { return &RetryError{Err: err, Delay: delay} }

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Concurrency is the handlers running at once per queue (default 1);
	// for a batch handler, batches.
	Concurrency int
	// Lease is each claim's lease (default 30 s); a running task's lease is
	// extended every third of it.
	Lease time.Duration
	// Wait is how long a claim waits for a task (a long poll; default 5 s).
	// A stop waits for the claim in flight, so it takes up to this long.
	Wait time.Duration
	// Prefetch is how many tasks a claim may take beyond the free handler
	// slots (0: the default 4 x Concurrency; negative: none).
	Prefetch int
	// Claimers is how many claims per queue may be in flight at once
	// (default 1). Each claim waits for chronoqd's commit, and chronoqd
	// commits concurrent claims together, so short tasks flow faster with
	// more; each claimer claims at most its share of the queue's slots.
	Claimers int
	// AckLinger is how long an outcome waits for a claim to ride on before
	// it is sent alone to POST /v1/acks (default 5 ms).
	AckLinger time.Duration
	// FlushTimeout bounds sending the last outcomes at a stop (default 30 s).
	FlushTimeout time.Duration
	// Logger receives warnings (default: the log package's standard logger).
	Logger *log.Logger
	// WorkerName is the name each claim gives chronoqd (at most 200 bytes,
	// no control characters), shown as Task.Worker by GET /v1/tasks/{id}
	// and the dashboard (default: DefaultWorkerName()).
	WorkerName string
}

// maxWorkerName is chronoqd's limit on a claim's worker name, in bytes.
const maxWorkerName = 200

// DefaultWorkerName returns "<hostname>:<pid>", the hostname cut (on a
// UTF-8 character boundary) to keep it within chronoqd's 200 bytes.
func DefaultWorkerName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return workerName(host, os.Getpid())
}

// workerName returns "host:pid", host cut to fit maxWorkerName bytes.
func workerName(host string, pid int) string {
	suffix := ":" + strconv.Itoa(pid)
	if n := maxWorkerName - len(suffix); len(host) > n {
		for n > 0 && !utf8.RuneStart(host[n]) {
			n--
		}
		host = host[:n]
	}
	return host + suffix
}

// WorkerStats are a worker's counters (they only grow).
type WorkerStats struct {
	// Claimed counts tasks claimed.
	Claimed int64
	// Succeeded counts successes chronoqd recorded.
	Succeeded int64
	// Failed counts failures chronoqd recorded.
	Failed int64
	// AckRequests counts requests that carried outcomes (claims and acks).
	AckRequests int64
	// Extensions counts lease extensions.
	Extensions int64
	// LeasesLost counts leases found lost while their handler ran.
	LeasesLost int64
	// Refused counts outcomes chronoqd refused (stale leases).
	Refused int64
}

type registration struct {
	queue       string
	fn          Handler
	batchFn     BatchHandler
	max         int
	concurrency int
	limit       int // tasks (batches) claimed and unfinished, at most
	claimers    int // claim loops, each claiming at most limit/claimers
	// minClaim is the free slots worth a claim while every handler is busy
	// (half a claimer's share: fewer, larger claims).
	minClaim int
	// running counts tasks (batches) claimed and unfinished, and the slots
	// a claim in flight reserved (guarded by Worker.mu).
	running int
	room    *sync.Cond
	// Claimed work waiting for a handler (guarded by Worker.mu): tasks for
	// a Handler, batches for a BatchHandler; ready signals more, or done.
	tasks   []*Lease
	batches [][]*Lease
	done    bool // the claimers have stopped: no more work comes
	ready   *sync.Cond
}

// nextWork takes the next claimed work (under Worker.mu): one task, or one
// batch; false when there is none.
func (r *registration) nextWork() ([]*Lease, bool) {
	if len(r.batches) > 0 {
		b := r.batches[0]
		r.batches[0] = nil
		r.batches = r.batches[1:]
		return b, true
	}
	if len(r.tasks) > 0 {
		t := r.tasks[0:1:1]
		r.tasks = r.tasks[1:]
		if len(r.tasks) == 0 {
			r.tasks = nil
		}
		return t, true
	}
	return nil, false
}

// wantsClaim says whether a claim is worth sending (under Worker.mu): a
// handler is idle, or minClaim slots are free and the queue was not found
// drained (then only an idle handler sends a long poll).
func (r *registration) wantsClaim(drained bool) bool {
	return r.running < r.concurrency || (!drained && r.limit-r.running >= r.minClaim)
}

type leaseKey struct {
	id    string
	token uint64
}

type tracked struct {
	lease  *Lease
	nextAt time.Time
}

// Worker claims tasks of its queues and runs their handlers: one claiming
// goroutine per queue (Claimers) claims as many tasks as it has free
// handler slots plus a prefetch, long-polling only while a slot is free;
// while every handler is busy it waits until half its share of the slots
// is free, so that claims stay large. Outcomes of finished tasks ride on
// the next claim (or go to POST /v1/acks after AckLinger, or at once when
// every claim is waiting for its answer); running tasks' leases are
// extended every third of the lease.
// A key's tasks run in order, since chronoqd hands out a key's next task
// only once the previous one is acknowledged.
type Worker struct {
	c    *Client
	opts WorkerOptions
	regs []*registration
	byQ  map[string]*registration

	mu       sync.Mutex
	pending  []AckItem
	tracked  map[leaseKey]tracked
	stopping bool
	started  bool
	// claimLoops counts the claim loops; inFlight, those waiting for an
	// answer (an outcome lingers only if a loop may claim soon).
	claimLoops, inFlight int
	kick                 chan struct{}

	stats WorkerStats
}

// NewWorker returns a Worker of c; register handlers, then Run it.
func NewWorker(c *Client, opts WorkerOptions) *Worker {
	if opts.Concurrency < 1 {
		opts.Concurrency = 1
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Wait <= 0 {
		opts.Wait = 5 * time.Second
	}
	if opts.AckLinger <= 0 {
		opts.AckLinger = 5 * time.Millisecond
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = log.Default()
	}
	if opts.WorkerName == "" {
		opts.WorkerName = DefaultWorkerName()
	}
	return &Worker{c: c, opts: opts, byQ: map[string]*registration{}, tracked: map[leaseKey]tracked{},
		kick: make(chan struct{}, 1)}
}

// Handle runs fn for each task of queue, Concurrency at a time.
func (w *Worker) Handle(queue string, fn Handler) {
	prefetch := w.opts.Prefetch
	if prefetch == 0 {
		prefetch = 4 * w.opts.Concurrency
	} else if prefetch < 0 {
		prefetch = 0
	}
	w.add(&registration{queue: queue, fn: fn, max: 1, concurrency: w.opts.Concurrency,
		limit: w.opts.Concurrency + prefetch})
}

// HandleBatch runs fn on up to max (1-10,000) tasks of queue at a time,
// Concurrency batches at once.
func (w *Worker) HandleBatch(queue string, max int, fn BatchHandler) {
	if max < 1 || max > MaxBatch {
		panic(fmt.Sprintf("chronoq: batch max %d is not between 1 and %d", max, MaxBatch))
	}
	w.add(&registration{queue: queue, batchFn: fn, max: max, concurrency: w.opts.Concurrency,
		limit: w.opts.Concurrency})
}

func (w *Worker) add(r *registration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("chronoq: register handlers before the worker runs")
	}
	if _, ok := w.byQ[r.queue]; ok {
		panic(fmt.Sprintf("chronoq: queue %q already has a handler", r.queue))
	}
	r.room = sync.NewCond(&w.mu)
	r.ready = sync.NewCond(&w.mu)
	r.claimers = w.opts.Claimers
	if r.claimers < 1 {
		r.claimers = 1
	}
	r.minClaim = (r.limit + r.claimers - 1) / r.claimers / 2
	if r.minClaim < 1 {
		r.minClaim = 1
	}
	w.byQ[r.queue] = r
	w.regs = append(w.regs, r)
}

// Stats returns a snapshot of the worker's counters.
func (w *Worker) Stats() WorkerStats {
	return WorkerStats{
		Claimed:     atomic.LoadInt64(&w.stats.Claimed),
		Succeeded:   atomic.LoadInt64(&w.stats.Succeeded),
		Failed:      atomic.LoadInt64(&w.stats.Failed),
		AckRequests: atomic.LoadInt64(&w.stats.AckRequests),
		Extensions:  atomic.LoadInt64(&w.stats.Extensions),
		LeasesLost:  atomic.LoadInt64(&w.stats.LeasesLost),
		Refused:     atomic.LoadInt64(&w.stats.Refused),
	}
}

// Run runs the worker until ctx is done, then stops gracefully: no new
// claims (a claim in flight returns within Wait and its tasks run), the
// running and prefetched tasks finish, and their outcomes are sent. It
// returns nil after a stop, or the error that stopped the worker (a claim
// refused for good: a bad queue name, a wrong token).
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("chronoq: the worker was already run")
	}
	if len(w.regs) == 0 {
		w.mu.Unlock()
		return errors.New("chronoq: no handler registered")
	}
	w.started = true
	w.mu.Unlock()

	// Handlers get a context that ends only once the worker has stopped
	// waiting for them, so that a stop lets them finish.
	hctx, hcancel := context.WithCancel(context.Background())
	defer hcancel()

	var fatalOnce sync.Once
	var fatal error
	stopAll := func() {
		w.mu.Lock()
		w.stopping = true
		for _, r := range w.regs {
			r.room.Broadcast()
		}
		w.mu.Unlock()
	}
	innerCtx, innerCancel := context.WithCancel(ctx)
	defer innerCancel()
	go func() {
		<-innerCtx.Done()
		stopAll()
	}()

	var claimers, slots sync.WaitGroup
	for _, r := range w.regs {
		r := r
		for i := 0; i < r.concurrency; i++ {
			slots.Add(1)
			go func() {
				defer slots.Done()
				w.slotLoop(hctx, r)
			}()
		}
		var loops sync.WaitGroup
		w.mu.Lock()
		w.claimLoops += r.claimers
		w.mu.Unlock()
		for i := 0; i < r.claimers; i++ {
			loops.Add(1)
			go func() {
				defer loops.Done()
				defer func() {
					w.mu.Lock()
					w.claimLoops--
					w.mu.Unlock()
				}()
				if err := w.claimLoop(innerCtx, r); err != nil {
					fatalOnce.Do(func() { fatal = err })
					innerCancel()
				}
			}()
		}
		claimers.Add(1)
		go func() {
			defer claimers.Done()
			loops.Wait()
			w.mu.Lock()
			r.done = true
			r.ready.Broadcast()
			w.mu.Unlock()
		}()
	}
	bgDone := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); w.flushLoop(bgDone) }()
	go func() { defer bg.Done(); w.extendLoop(bgDone) }()

	claimers.Wait()
	slots.Wait()
	close(bgDone)
	bg.Wait()
	w.finalFlush()
	return fatal
}

// takePending takes the outcomes a request may carry (at most MaxBatch).
func (w *Worker) takePending() []AckItem {
	n := len(w.pending)
	if n > MaxBatch {
		n = MaxBatch
	}
	items := append([]AckItem(nil), w.pending[:n]...)
	w.pending = w.pending[n:]
	return items
}

func (w *Worker) putBack(items []AckItem) {
	if len(items) == 0 {
		return
	}
	w.mu.Lock()
	w.pending = append(items, w.pending...)
	w.mu.Unlock()
	w.poke()
}

func (w *Worker) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *Worker) claimLoop(ctx context.Context, r *registration) error {
	backoff := time.Second
	drained := false
	for {
		w.mu.Lock()
		for !w.stopping && !r.wantsClaim(drained) {
			r.room.Wait()
		}
		if w.stopping {
			w.mu.Unlock()
			return nil
		}
		var wait time.Duration
		if r.running < r.concurrency {
			wait = w.opts.Wait
		}
		// Reserve the slots this claim may fill, so that claimers in flight
		// together never claim past the limit.
		reserved := r.limit - r.running
		if share := (r.limit + r.claimers - 1) / r.claimers; reserved > share {
			reserved = share
		}
		max := reserved
		if r.batchFn != nil {
			max, reserved = r.max, 1
		}
		r.running += reserved
		acks := w.takePending()
		w.inFlight++
		w.mu.Unlock()

		// The claim is not cancelled by a stop: the tasks it leases run.
		cctx, cancel := context.WithTimeout(context.Background(), w.c.t.timeout+wait)
		res, err := w.c.Claim(cctx, r.queue, ClaimOptions{Max: max, Lease: w.opts.Lease, Wait: wait, Acks: acks,
			Worker: w.opts.WorkerName})
		cancel()
		w.mu.Lock()
		w.inFlight--
		w.mu.Unlock()
		got := 0
		if err == nil {
			got = len(res.Tasks)
			if r.batchFn != nil && got > 0 {
				got = 1
			}
		}
		if got < reserved {
			w.mu.Lock()
			r.running -= reserved - got
			r.room.Broadcast()
			w.mu.Unlock()
		}
		if err != nil {
			w.putBack(acks)
			if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrOutcomeUnknown) {
				w.opts.Logger.Printf("chronoq: claim on %s failed (retrying in %v): %v", r.queue, backoff, err)
				select {
				case <-ctx.Done():
					return nil
				case <-after(w.c.clock, backoff):
				}
				if backoff *= 2; backoff > 30*time.Second {
					backoff = 30 * time.Second
				}
				continue
			}
			return fmt.Errorf("chronoq: claim on %s: %w", r.queue, err)
		}
		backoff = time.Second
		if len(acks) > 0 {
			atomic.AddInt64(&w.stats.AckRequests, 1)
			w.checkResults(acks, res.Acks)
		}
		drained = wait == 0 && len(res.Tasks) == 0
		if len(res.Tasks) == 0 {
			continue
		}
		atomic.AddInt64(&w.stats.Claimed, int64(len(res.Tasks)))
		next := w.c.clock.Now().Add(w.opts.Lease / 3)
		w.mu.Lock()
		for _, l := range res.Tasks {
			w.tracked[leaseKey{l.ID, l.Token}] = tracked{lease: l, nextAt: next}
		}
		if r.batchFn != nil {
			r.batches = append(r.batches, res.Tasks)
		} else {
			r.tasks = append(r.tasks, res.Tasks...)
		}
		r.ready.Broadcast()
		w.mu.Unlock()
	}
}

func (w *Worker) checkResults(items []AckItem, results []AckResult) {
	for i, it := range items {
		if i >= len(results) {
			break
		}
		switch {
		case results[i].OK && it.Failure:
			atomic.AddInt64(&w.stats.Failed, 1)
		case results[i].OK:
			atomic.AddInt64(&w.stats.Succeeded, 1)
		default:
			atomic.AddInt64(&w.stats.Refused, 1)
			w.opts.Logger.Printf("chronoq: task %s: chronoqd refused its outcome: %v", it.ID, results[i].Err)
		}
	}
}

// slotLoop runs claimed work, one task (batch) at a time, until the
// claimers have stopped and no work is left.
func (w *Worker) slotLoop(ctx context.Context, r *registration) {
	var items []AckItem
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		leases, ok := r.nextWork()
		if !ok {
			if r.done {
				return
			}
			r.ready.Wait()
			continue
		}
		w.mu.Unlock()
		items = w.run(ctx, r, leases, items[:0])
		w.mu.Lock()
		for _, l := range leases {
			delete(w.tracked, leaseKey{l.ID, l.Token})
		}
		kick := len(w.pending) == 0 // else a flush is already coming
		w.pending = append(w.pending, items...)
		r.running--
		if r.batchFn == nil {
			r.running -= len(leases) - 1
		}
		if r.wantsClaim(false) {
			r.room.Broadcast()
		}
		if kick {
			w.poke()
		}
	}
}

const errorLimit = 4000

func failureOf(l *Lease, err error) AckItem {
	text := err.Error()
	if text == "" {
		text = fmt.Sprintf("%T", err)
	}
	if len(text) > errorLimit {
		text = text[:errorLimit]
	}
	var delay time.Duration
	var re *RetryError
	if errors.As(err, &re) {
		delay = re.Delay
	}
	return AckItem{ID: l.ID, Token: l.Token, Failure: true, Error: text, RetryIn: delay}
}

// run runs a handler on leases and appends their outcomes to items.
func (w *Worker) run(ctx context.Context, r *registration, leases []*Lease, buf []AckItem) (items []AckItem) {
	items = buf
	start := len(items)
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("panic: %v", p)
			items = items[:start]
			for _, l := range leases {
				items = append(items, failureOf(l, err))
			}
		}
	}()
	if r.batchFn == nil {
		l := leases[0]
		if err := r.fn(ctx, l); err != nil {
			return append(items, failureOf(l, err))
		}
		return append(items, Ack(l))
	}
	errs := r.batchFn(ctx, leases)
	if errs != nil && len(errs) != len(leases) {
		err := fmt.Errorf("batch handler returned %d results for %d tasks", len(errs), len(leases))
		for _, l := range leases {
			items = append(items, failureOf(l, err))
		}
		return items
	}
	for i, l := range leases {
		if errs != nil && errs[i] != nil {
			items = append(items, failureOf(l, errs[i]))
		} else {
			items = append(items, Ack(l))
		}
	}
	return items
}

func (w *Worker) send(items []AckItem) error {
	ctx, cancel := context.WithTimeout(context.Background(), w.c.t.timeout)
	defer cancel()
	results, err := w.c.AckMany(ctx, items)
	if err != nil {
		return err
	}
	atomic.AddInt64(&w.stats.AckRequests, 1)
	w.checkResults(items, results)
	return nil
}

func (w *Worker) flushLoop(done <-chan struct{}) {
	backoff := time.Second
	for {
		select {
		case <-done:
			return
		case <-w.kick:
		}
		// Give a claim about to be sent the chance to carry the outcomes
		// (none is when every claim loop waits for an answer).
		w.mu.Lock()
		linger := w.inFlight < w.claimLoops
		w.mu.Unlock()
		if linger {
			select {
			case <-done:
				return
			case <-after(w.c.clock, w.opts.AckLinger):
			}
		}
		w.mu.Lock()
		items := w.takePending()
		more := len(w.pending) > 0
		w.mu.Unlock()
		if more {
			w.poke()
		}
		if len(items) == 0 {
			continue
		}
		if err := w.send(items); err != nil {
			if errors.Is(err, ErrInvalidArgument) {
				w.opts.Logger.Printf("chronoq: chronoqd refused %d outcomes: %v", len(items), err)
				continue
			}
			w.mu.Lock()
			w.pending = append(items, w.pending...)
			w.mu.Unlock()
			w.opts.Logger.Printf("chronoq: could not send %d outcomes (retrying in %v): %v", len(items), backoff, err)
			select {
			case <-done:
				return
			case <-after(w.c.clock, backoff):
			}
			w.poke()
			if backoff *= 2; backoff > 30*time.Second {
				backoff = 30 * time.Second
			}
			continue
		}
		backoff = time.Second
	}
}

func (w *Worker) finalFlush() {
	deadline := w.c.clock.Now().Add(w.opts.FlushTimeout)
	delay := 200 * time.Millisecond
	for {
		w.mu.Lock()
		items := w.takePending()
		w.mu.Unlock()
		if len(items) == 0 {
			return
		}
		err := w.send(items)
		if err == nil || errors.Is(err, ErrInvalidArgument) {
			continue
		}
		w.mu.Lock()
		w.pending = append(items, w.pending...)
		n := len(w.pending)
		w.mu.Unlock()
		if w.c.clock.Now().Add(delay).After(deadline) {
			w.opts.Logger.Printf("chronoq: gave up sending %d outcomes: %v (the tasks run again once their leases lapse)", n, err)
			return
		}
		<-after(w.c.clock, delay)
		if delay *= 2; delay > 5*time.Second {
			delay = 5 * time.Second
		}
	}
}

func (w *Worker) extendLoop(done <-chan struct{}) {
	tick := w.opts.Lease / 6
	if tick > time.Second {
		tick = time.Second
	}
	if tick < 5*time.Millisecond {
		tick = 5 * time.Millisecond
	}
	// Every tick, extend the leases due (a third of the lease after the
	// claim or the last extension).
	t := w.c.clock.NewTimer(tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C():
		}
		now := w.c.clock.Now()
		var due []*Lease
		w.mu.Lock()
		for _, tr := range w.tracked {
			if !tr.nextAt.After(now) {
				due = append(due, tr.lease)
			}
		}
		w.mu.Unlock()
		for _, l := range due {
			k := leaseKey{l.ID, l.Token}
			w.mu.Lock()
			_, still := w.tracked[k]
			w.mu.Unlock()
			if !still {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), w.c.t.timeout)
			_, err := w.c.Extend(ctx, l.ID, l.Token, w.opts.Lease)
			cancel()
			next := w.c.clock.Now().Add(w.opts.Lease / 3)
			switch {
			case err == nil:
				atomic.AddInt64(&w.stats.Extensions, 1)
			case errors.Is(err, ErrStaleToken):
				atomic.AddInt64(&w.stats.LeasesLost, 1)
				w.opts.Logger.Printf("chronoq: task %s: lease lost, it may run elsewhere too: %v", l.ID, err)
			default:
				retry := w.opts.Lease / 3
				if retry > time.Second {
					retry = time.Second
				}
				next = w.c.clock.Now().Add(retry)
			}
			w.mu.Lock()
			if tr, ok := w.tracked[k]; ok {
				if errors.Is(err, ErrStaleToken) {
					delete(w.tracked, k)
				} else {
					tr.nextAt = next
					w.tracked[k] = tr
				}
			}
			w.mu.Unlock()
		}
		t.Reset(tick)
	}
}
