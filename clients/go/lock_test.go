package chronoq_test

import (
	"errors"
	"testing"
	"time"

	"chronoq"
)

// The lock tests run on the test-clock chronoqd (fakeTime): a wait runs out
// and a lease lapses when the test moves time, and the Lock helper's
// extensions fire when it moves the client's clock with it.

// C8: a second holder waits up to wait and gets lock_wait_timeout; after
// the release it acquires at once.
func TestC8LockContention(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, key := ft.client(), testCtx(t), "lock:"+newQueue(t)
	g, err := c.AcquireLock(ctx, key, 0, time.Minute, "first")
	must(t, err)
	const wait = 10 * time.Second
	second := make(chan error, 1)
	go func() {
		_, err := c.AcquireLock(ctx, key, wait, time.Minute, "second")
		second <- err
	}()
	ft.waitServerWait("the second acquisition", wait)
	// A millisecond before the wait's end it still waits.
	ft.advance(wait - time.Millisecond)
	if st, err := ft.srv.Clock(); err != nil || !st.Waiting(st.Now.Add(time.Millisecond)) {
		t.Fatalf("the second acquisition stopped waiting before its wait ran out: %+v %v", st, err)
	}
	select {
	case err := <-second:
		t.Fatalf("the second acquisition was answered before its wait ran out: %v", err)
	default:
	}
	ft.advance(time.Millisecond)
	select {
	case err = <-second:
	case <-time.After(deadline):
		t.Fatal("timed out waiting for the second acquisition's answer once its wait ran out")
	}
	var e *chronoq.Error
	if !errors.Is(err, chronoq.ErrLockWaitTimeout) || !errors.As(err, &e) || e.Field != "wait_ms" || e.Status != 409 {
		t.Fatalf("second holder: %v", err)
	}
	info, err := c.GetLock(ctx, key)
	must(t, err)
	if !info.Held || info.Owner == nil || *info.Owner != "first" {
		t.Fatalf("lock info %+v", info)
	}
	must(t, c.ReleaseLock(ctx, key, g.Token))
	g2, err := c.AcquireLock(ctx, key, 0, time.Minute, "second")
	must(t, err)
	if g2.Token <= g.Token {
		t.Fatalf("token did not grow: %d then %d", g.Token, g2.Token)
	}
	// A waiting acquisition gets the lock when it is released, with time
	// standing still.
	before := ft.now()
	third := make(chan error, 1)
	go func() {
		_, err := c.AcquireLock(ctx, key, wait, time.Minute, "third")
		third <- err
	}()
	ft.waitServerWait("the third acquisition", wait)
	li, err := c.GetLock(ctx, key)
	must(t, err)
	if li.Waiters != 1 {
		t.Fatalf("lock info %+v, want one waiter", li)
	}
	must(t, c.ReleaseLock(ctx, key, g2.Token))
	select {
	case err := <-third:
		must(t, err)
	case <-time.After(deadline):
		t.Fatal("timed out waiting for the waiting acquisition to get the lock")
	}
	if now := ft.now(); !now.Equal(before) {
		t.Fatalf("time moved from %v to %v", before, now)
	}
}

// C9: a lock whose lease lapses is free again; the next holder's fencing
// token is greater, and the old token is stale.
func TestC9LockLapseAndToken(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, key := ft.client(), testCtx(t), "lock:"+newQueue(t)
	const lease = 30 * time.Second
	g, err := c.AcquireLock(ctx, key, 0, lease, "")
	must(t, err)
	if want := ft.now().Add(lease); !g.ExpiresAt.Equal(want) {
		t.Fatalf("expires_at %v, want %v", g.ExpiresAt, want)
	}
	ft.advance(lease - time.Millisecond)
	li, err := c.GetLock(ctx, key)
	must(t, err)
	if !li.Held {
		t.Fatalf("the lock was freed a millisecond before its lease ended: %+v", li)
	}
	ft.advance(time.Millisecond)
	li, err = c.GetLock(ctx, key)
	must(t, err)
	if li.Held {
		t.Fatalf("the lock is held after its lease ended: %+v", li)
	}
	g2, err := c.AcquireLock(ctx, key, 0, time.Minute, "")
	must(t, err)
	if g2.Token <= g.Token {
		t.Fatalf("token did not grow: %d then %d", g.Token, g2.Token)
	}
	if _, err := c.ExtendLock(ctx, key, g.Token, time.Minute); !errors.Is(err, chronoq.ErrStaleToken) {
		t.Fatalf("extend with the old token: %v", err)
	}
	if err := c.ReleaseLock(ctx, key, g.Token); !errors.Is(err, chronoq.ErrStaleToken) {
		t.Fatalf("release with the old token: %v", err)
	}
	must(t, c.ReleaseLock(ctx, key, g2.Token))
}

// C10: the Lock helper (with defer) extends the lease in the background,
// every third of it, and releases at the end.
func TestC10LockHelper(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, key := ft.client(), testCtx(t), "lock:"+newQueue(t)
	const lease = 30 * time.Second
	func() {
		lk, err := c.Lock(ctx, key, time.Second, lease)
		must(t, err)
		defer func() { must(t, lk.Release(ctx)) }()
		if lk.Token() == 0 || lk.Key() != key {
			t.Fatalf("lock %d %s", lk.Token(), lk.Key())
		}
		if want := ft.now().Add(lease); !lk.ExpiresAt().Equal(want) {
			t.Fatalf("expires_at %v, want %v", lk.ExpiresAt(), want)
		}
		// Four thirds of the lease pass: only the extensions keep it.
		for i := 1; i <= 4; i++ {
			ft.waitTimer("the helper's next extension, a third of the lease on", lease/3)
			if n := lk.Extensions(); n != i-1 {
				t.Fatalf("%d extensions before the %s third of the lease ended", n, []string{"first", "second", "third", "fourth"}[i-1])
			}
			ft.advance(lease / 3)
			waitFor(t, "the helper's extension to be answered", func() bool { return lk.Extensions() == i })
			now := ft.now()
			if want := now.Add(lease); !lk.ExpiresAt().Equal(want) {
				t.Fatalf("extension %d: expires_at %v, want %v", i, lk.ExpiresAt(), want)
			}
			li, err := c.GetLock(ctx, key)
			must(t, err)
			if !li.Held || li.ExpiresAt == nil || !li.ExpiresAt.Equal(now.Add(lease)) || lk.Err() != nil {
				t.Fatalf("after extension %d: %+v (expires %v) %v", i, li, li.ExpiresAt, lk.Err())
			}
		}
	}()
	li, err := c.GetLock(ctx, key)
	must(t, err)
	if li.Held {
		t.Fatal("still held after Release")
	}
}

// C10: a lease lost meanwhile (here: released behind the helper's back) is
// reported by Lost and Err, and by Release, from the helper's next
// extension on.
func TestC10LockHelperReportsALostLease(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, key := ft.client(), testCtx(t), "lock:"+newQueue(t)
	const lease = 30 * time.Second
	lk, err := c.Lock(ctx, key, 0, lease)
	must(t, err)
	must(t, c.ReleaseLock(ctx, key, lk.Token()))
	ft.waitTimer("the helper's first extension", lease/3)
	select {
	case <-lk.Lost():
		t.Fatal("the lease was reported lost before the helper tried to extend it")
	default:
	}
	ft.advance(lease / 3)
	select {
	case <-lk.Lost():
	case <-time.After(deadline):
		t.Fatal("timed out waiting for the helper to notice the lost lease")
	}
	if !errors.Is(lk.Err(), chronoq.ErrLockLost) || !errors.Is(lk.Err(), chronoq.ErrStaleToken) {
		t.Fatalf("Err() = %v", lk.Err())
	}
	if err := lk.Release(ctx); !errors.Is(err, chronoq.ErrLockLost) {
		t.Fatalf("Release() = %v", err)
	}
}
