package chronoq_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"chronoq"
)

// closedURL returns the URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// C13: with two URLs whose first is down, calls reach the second.
func TestC13FirstNodeDown(t *testing.T) {
	ctx := testCtx(t)
	c, err := chronoq.New([]string{closedURL(t), server.URL})
	must(t, err)
	defer c.Close()
	task, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: newQueue(t), Payload: 1})
	must(t, err)
	got, err := c.Get(ctx, task.ID)
	must(t, err)
	if got.ID != task.ID || c.CurrentURL() != server.URL {
		t.Fatalf("got %+v via %s", got, c.CurrentURL())
	}
}

// C13: with every URL down the error says so.
func TestC13EveryNodeDown(t *testing.T) {
	a, b := closedURL(t), closedURL(t)
	c, err := chronoq.New([]string{a, b}, chronoq.WithTimeout(5*time.Second))
	must(t, err)
	_, err = c.Enqueue(testCtx(t), chronoq.TaskSpec{Queue: "q", Payload: 1})
	var e *chronoq.Error
	if !errors.Is(err, chronoq.ErrConnectionFailed) || !errors.Is(err, chronoq.ErrUnavailable) || !errors.As(err, &e) {
		t.Fatalf("every node down: %v", err)
	}
	if !strings.Contains(e.Message, "no node answered") || !strings.Contains(e.Message, a) || !strings.Contains(e.Message, b) ||
		!strings.Contains(e.Message, "connection refused") {
		t.Fatalf("message does not say what happened: %s", e.Message)
	}
}

// C13: a node answering 503 is passed over.
func TestC13UnavailableNodeIsPassedOver(t *testing.T) {
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		_, _ = w.Write([]byte(`{"error":{"code":"not_leader","message":"no leader"}}`))
	}))
	defer fake.Close()
	c, err := chronoq.New([]string{fake.URL, server.URL})
	must(t, err)
	_, err = c.Enqueue(testCtx(t), chronoq.TaskSpec{Queue: newQueue(t), Payload: 1})
	must(t, err)
	only, err := chronoq.New([]string{fake.URL})
	must(t, err)
	_, err = only.Version(testCtx(t))
	var e *chronoq.Error
	if !errors.Is(err, chronoq.ErrUnavailable) || !errors.As(err, &e) || e.Code != "not_leader" || e.Status != 503 {
		t.Fatalf("503 only: %v", err)
	}
}

// C13: an answer lost after sending: a POST without a client id is not
// resent (outcome unknown); a GET moves on to the next node.
func TestC13AnswerLost(t *testing.T) {
	var hits int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt64(&hits, 1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer fake.Close()
	c, err := chronoq.New([]string{fake.URL, server.URL})
	must(t, err)
	ctx, q := testCtx(t), newQueue(t)
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: 1})
	if !errors.Is(err, chronoq.ErrOutcomeUnknown) {
		t.Fatalf("a lost enqueue without id: %v", err)
	}
	task, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: 1, ID: "lost:" + q})
	must(t, err)
	if task.ID != "lost:"+q || atomic.LoadInt64(&hits) < 2 {
		t.Fatalf("a lost enqueue with an id was not resent: %+v", task)
	}
}
