package chronoq_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"chronoq"
	"chronoq/internal/testserver"
)

// server is the chronoqd most tests talk to, started by TestMain. Its time
// is the machine's: no test on it waits for time to pass.
var server *testserver.Server

// clockServer is a chronoqd --test-clock, whose time moves only when a
// test says (see fakeTime), started by the first test that needs it and
// stopped by TestMain.
var (
	clockServer     *testserver.Server
	clockServerErr  error
	clockServerOnce sync.Once
)

func TestMain(m *testing.M) {
	testserver.Main(m, &server, func() error {
		if clockServer == nil {
			return nil
		}
		return clockServer.Stop()
	})
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

// fakeTime is a test's time: the test-clock chronoqd's, and a manual clock
// for the client's own timers (lease extensions of workers and locks,
// ack lingering, backoffs), standing at the server's time and moved
// together with it by advance. Nothing in a test that uses it waits for
// time to pass: it waits for events (a server-side wait to begin, a timer
// to be armed, a request to be answered), each with a deadline.
type fakeTime struct {
	t   *testing.T
	srv *testserver.Server
	clk *chronoq.ManualClock
}

// newFakeTime starts the test-clock chronoqd if no test has yet, and
// returns a manual clock standing at its time.
func newFakeTime(t *testing.T) *fakeTime {
	t.Helper()
	clockServerOnce.Do(func() { clockServer, clockServerErr = testserver.StartTestClock() })
	if clockServerErr != nil {
		t.Fatalf("starting chronoqd --test-clock: %v", clockServerErr)
	}
	st, err := clockServer.Clock()
	must(t, err)
	return &fakeTime{t: t, srv: clockServer, clk: chronoq.NewManualClock(st.Now)}
}

// client returns a client of the test-clock chronoqd scheduling by f's
// manual clock.
func (f *fakeTime) client() *chronoq.Client {
	f.t.Helper()
	c, err := chronoq.New([]string{f.srv.URL})
	must(f.t, err)
	chronoq.UseClock(c, f.clk)
	f.t.Cleanup(c.Close)
	return c
}

// machineTimersClient returns a client of the test-clock chronoqd whose
// own timers (a worker's ack lingering, its backoffs) keep the machine's
// clock: for a worker test in which only chronoqd's time matters (time
// moves to end the long polls of a stop), so that outcomes flow without
// the test moving time.
func (f *fakeTime) machineTimersClient() *chronoq.Client {
	f.t.Helper()
	c, err := chronoq.New([]string{f.srv.URL})
	must(f.t, err)
	f.t.Cleanup(c.Close)
	return c
}

// now returns the server's time (the manual clock's too).
func (f *fakeTime) now() time.Time {
	f.t.Helper()
	st, err := f.srv.Clock()
	must(f.t, err)
	if !st.Now.Equal(f.clk.Now()) {
		f.t.Fatalf("the server's time %v is not the client's %v", st.Now, f.clk.Now())
	}
	return st.Now
}

// advance moves the server's time by d (returning once chronoqd has acted
// on it: lapsed leases and locks freed, waits that ran out answered), then
// the client's, firing its timers that fall due.
func (f *fakeTime) advance(d time.Duration) {
	f.t.Helper()
	st, err := f.srv.Advance(d)
	must(f.t, err)
	f.clk.Advance(d)
	if !st.Now.Equal(f.clk.Now()) {
		f.t.Fatalf("after advancing %v the server's time is %v, the client's %v", d, st.Now, f.clk.Now())
	}
}

// waitServerWait waits until one of chronoqd's waits ends at now+d: a
// claim's or lock's wait of d has begun.
func (f *fakeTime) waitServerWait(what string, d time.Duration) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("chronoqd to wait %v for %s", d, what), func() bool {
		st, err := f.srv.Clock()
		must(f.t, err)
		return st.Waiting(st.Now.Add(d))
	})
}

// armed says whether the client has a timer armed for now+d.
func (f *fakeTime) armed(d time.Duration) bool {
	at := f.clk.Now().Add(d)
	for _, t := range f.clk.Timers() {
		if t.Equal(at) {
			return true
		}
	}
	return false
}

// waitTimer waits until the client has a timer armed for now+d (a
// background loop has scheduled its next step).
func (f *fakeTime) waitTimer(what string, d time.Duration) {
	f.t.Helper()
	end := time.Now().Add(deadline)
	for !f.armed(d) {
		if time.Now().After(end) {
			f.t.Fatalf("timed out after %v waiting for %s: a timer for %v later (%v); armed: %v",
				deadline, what, d, f.clk.Now().Add(d), f.clk.Timers())
		}
		time.Sleep(time.Millisecond)
	}
}
