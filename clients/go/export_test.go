package chronoq

import (
	"sort"
	"sync"
	"time"
)

// Internals the tests (package chronoq_test) check against encoding/json.
var (
	DecodeClaimFast = decodeClaimFast
	ParseTimeFast   = parseTimeFast
	AppendString    = appendString
	WorkerName      = workerName
)

// UseClock makes c (and its workers and locks made afterwards) schedule by
// clk instead of the machine's clock.
func UseClock(c *Client, clk *ManualClock) { c.clock = clk }

// WorkerClaimLoops returns how many of w's claim loops are running (0 once
// a stop has ended them).
func WorkerClaimLoops(w *Worker) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claimLoops
}

// WorkerStopping says whether w has taken a stop (its claim loops claim
// no more).
func WorkerStopping(w *Worker) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

// ManualClock is a clock whose time moves only when Advance says; the
// timers whose deadline it reaches fire then, earliest first.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*manualTimer]struct{} // armed
}

// NewManualClock returns a ManualClock standing at now.
func NewManualClock(now time.Time) *ManualClock {
	return &ManualClock{now: now, timers: map[*manualTimer]struct{}{}}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer firing once the clock reaches Now()+d.
func (c *ManualClock) NewTimer(d time.Duration) clockTimer {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d and fires the timers it reaches.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	var due []*manualTimer
	for t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		c.fire(t)
	}
}

// Timers returns the deadlines of the armed timers, earliest first.
func (c *ManualClock) Timers() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ts []time.Time
	for t := range c.timers {
		ts = append(ts, t.at)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts
}

// fire sends the time on t's channel (dropped if the last one was not
// received, as time.Timer's) and disarms it (under c.mu).
func (c *ManualClock) fire(t *manualTimer) {
	delete(c.timers, t)
	select {
	case t.ch <- c.now:
	default:
	}
}

type manualTimer struct {
	c  *ManualClock
	ch chan time.Time
	at time.Time
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, armed := t.c.timers[t]
	delete(t.c.timers, t)
	return armed
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, armed := t.c.timers[t]
	t.at = t.c.now.Add(d)
	t.c.timers[t] = struct{}{}
	if d <= 0 {
		t.c.fire(t)
	}
	return armed
}
