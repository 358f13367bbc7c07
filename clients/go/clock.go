package chronoq

import "time"

// clock is the time source of everything the library schedules by itself:
// the lease extensions of a Worker and of a Lock, a worker's retry backoffs,
// its AckLinger and its last flush. A Client's clock is the machine's
// (realClock); the tests swap in a manual one (export_test.go) that moves
// only when a test says, together with chronoqd --test-clock. Request
// deadlines (WithTimeout, contexts) stay on the machine's clock: they guard
// against a server that does not answer, whatever the time.
type clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends on C() once d has passed.
	NewTimer(d time.Duration) clockTimer
}

// clockTimer is a clock's one-shot timer, as time.Timer.
type clockTimer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// after is time.After on clk.
func after(clk clock, d time.Duration) <-chan time.Time { return clk.NewTimer(d).C() }

// realClock is the machine's clock.
type realClock struct{}

// realTimer is a time.Timer.
type realTimer struct{ t *time.Timer }

func (realClock) Now() time.Time                      { return time.Now() }
func (realClock) NewTimer(d time.Duration) clockTimer { return realTimer{time.NewTimer(d)} }
func (t realTimer) C() <-chan time.Time               { return t.t.C }
func (t realTimer) Stop() bool                        { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool        { return t.t.Reset(d) }
