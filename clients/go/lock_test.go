package chronoq_test

import (
	"errors"
	"testing"
	"time"

	"chronoq"
)

// C8: a second holder waits up to wait and gets lock_wait_timeout; after
// the release it acquires at once.
func TestC8LockContention(t *testing.T) {
	c, ctx, key := newClient(t), testCtx(t), "lock:"+newQueue(t)
	g, err := c.AcquireLock(ctx, key, 0, time.Minute, "first")
	must(t, err)
	_, err = c.AcquireLock(ctx, key, 200*time.Millisecond, time.Minute, "second")
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
	// A waiting acquisition gets the lock when it is released.
	done := make(chan error, 1)
	go func() {
		_, err := c.AcquireLock(ctx, key, deadline, time.Minute, "third")
		done <- err
	}()
	waitFor(t, "the third acquisition to wait", func() bool {
		li, err := c.GetLock(ctx, key)
		must(t, err)
		return li.Waiters == 1
	})
	must(t, c.ReleaseLock(ctx, key, g2.Token))
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(deadline):
		t.Fatal("timed out waiting for the waiting acquisition to get the lock")
	}
}

// C9: a lock whose lease lapses is free again; the next holder's fencing
// token is greater, and the old token is stale.
func TestC9LockLapseAndToken(t *testing.T) {
	c, ctx, key := newClient(t), testCtx(t), "lock:"+newQueue(t)
	g, err := c.AcquireLock(ctx, key, 0, 300*time.Millisecond, "")
	must(t, err)
	waitFor(t, "the lock's lease to lapse", func() bool {
		li, err := c.GetLock(ctx, key)
		must(t, err)
		return !li.Held
	})
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

// C10: the Lock helper (with defer) extends the lease in the background
// and releases at the end.
func TestC10LockHelper(t *testing.T) {
	c, ctx, key := newClient(t), testCtx(t), "lock:"+newQueue(t)
	func() {
		lk, err := c.Lock(ctx, key, time.Second, 600*time.Millisecond)
		must(t, err)
		defer func() { must(t, lk.Release(ctx)) }()
		if lk.Token() == 0 || lk.Key() != key {
			t.Fatalf("lock %d %s", lk.Token(), lk.Key())
		}
		first := lk.ExpiresAt()
		// Held well past its first lease: the extensions keep it.
		waitFor(t, "three background extensions", func() bool { return lk.Extensions() >= 3 })
		if !lk.ExpiresAt().After(first) {
			t.Fatalf("expires_at did not move: %v then %v", first, lk.ExpiresAt())
		}
		li, err := c.GetLock(ctx, key)
		must(t, err)
		if !li.Held || lk.Err() != nil {
			t.Fatalf("lock not held after extensions: %+v %v", li, lk.Err())
		}
	}()
	li, err := c.GetLock(ctx, key)
	must(t, err)
	if li.Held {
		t.Fatal("still held after Release")
	}
}

// C10: a lease lost meanwhile (here: released behind the helper's back) is
// reported by Lost and Err, and by Release.
func TestC10LockHelperReportsALostLease(t *testing.T) {
	c, ctx, key := newClient(t), testCtx(t), "lock:"+newQueue(t)
	lk, err := c.Lock(ctx, key, 0, 300*time.Millisecond)
	must(t, err)
	must(t, c.ReleaseLock(ctx, key, lk.Token()))
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
