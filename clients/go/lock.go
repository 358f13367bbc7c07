package chronoq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lock is a held keyed lock whose lease a goroutine extends every third of
// the lease until Release. Use it with defer:
//
//	lk, err := client.Lock(ctx, "invoice:42", 5*time.Second, 30*time.Second)
//	if err != nil { return err }
//	defer lk.Release(context.Background())
//	writeInvoice(42, lk.Token())
//
// If an extension is refused (the lease lapsed, say while chronoqd could not
// be reached), Lost is closed and Err returns an error matching ErrLockLost
// and ErrStaleToken: another holder may have the lock.
type Lock struct {
	c     *Client
	key   string
	lease time.Duration

	mu         sync.Mutex
	grant      LockGrant
	err        error
	extensions int
	released   bool

	lost chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Lock acquires the lock key, waiting up to wait (0: try once;
// ErrLockWaitTimeout if it stayed held), leased for lease, and starts
// extending it in the background. Release it when done.
func (c *Client) Lock(ctx context.Context, key string, wait, lease time.Duration) (*Lock, error) {
	return c.LockOwned(ctx, key, wait, lease, "")
}

// LockOwned is Lock with an owner name shown to others by GetLock.
func (c *Client) LockOwned(ctx context.Context, key string, wait, lease time.Duration, owner string) (*Lock, error) {
	g, err := c.AcquireLock(ctx, key, wait, lease, owner)
	if err != nil {
		return nil, err
	}
	l := &Lock{c: c, key: key, lease: lease, grant: *g,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.extendLoop()
	return l, nil
}

// Key returns the lock's key.
func (l *Lock) Key() string { return l.key }

// Token returns the grant's fencing token: pass it to the resource the lock
// guards, which refuses tokens below the largest it has seen.
func (l *Lock) Token() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grant.Token
}

// ExpiresAt returns when the lease ends unless extended again.
func (l *Lock) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grant.ExpiresAt
}

// Extensions returns how many background extensions succeeded.
func (l *Lock) Extensions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extensions
}

// Lost is closed once the lease is known lost.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err returns nil while the lock is held, or the error (matching
// ErrLockLost) once its lease was lost.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Lock) markLost(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = &Error{Code: "lock_lost", Field: "token",
		Message: fmt.Sprintf("the lock on %s (token %d) was lost: %v", l.key, l.grant.Token, cause)}
	close(l.lost)
}

func (l *Lock) extendLoop() {
	defer close(l.done)
	interval := l.lease / 3
	if interval < time.Millisecond {
		interval = time.Millisecond
	}
	timer := l.c.clock.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-timer.C():
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.lease)
		g, err := l.c.ExtendLock(ctx, l.key, l.Token(), l.lease)
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			l.grant = *g
			l.extensions++
			l.mu.Unlock()
			timer.Reset(interval)
		case errors.Is(err, ErrStaleToken):
			l.markLost(err)
			return
		default:
			// Unreachable or stopping: try again soon; the lease may survive.
			retry := interval
			if retry > time.Second {
				retry = time.Second
			}
			timer.Reset(retry)
		}
	}
}

// Release stops the extensions and releases the lock. It returns the lost
// lease's error (matching ErrLockLost) if the lease was lost, or the
// release's error; releasing twice does nothing.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	if err := l.Err(); err != nil {
		return err
	}
	err := l.c.ReleaseLock(ctx, l.key, l.Token())
	if err != nil && errors.Is(err, ErrStaleToken) {
		l.markLost(err)
		return l.Err()
	}
	return err
}
