package chronoq_test

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"chronoq"
	"chronoq/internal/testserver"
)

// C16: https with a CA file. chronoqd serves TLS with a certificate of a
// throwaway CA; a client given that CA's file is answered, one trusting
// another CA (or the system's) is refused, naming the reason.
func TestHTTPSWithACAFile(t *testing.T) {
	dir := t.TempDir()
	must(t, testserver.MakeCerts(dir))
	s, err := testserver.StartWith("", "--tls-cert", filepath.Join(dir, "server.pem"),
		"--tls-key", filepath.Join(dir, "server.key"))
	must(t, err)
	s.StopAtEnd(t)
	if !strings.HasPrefix(s.URL, "https://127.0.0.1:") {
		t.Fatalf("chronoqd --tls-cert listens on %s, not https", s.URL)
	}
	ctx := testCtx(t)

	c, err := chronoq.New([]string{s.URL}, chronoq.WithCAFile(filepath.Join(dir, "ca.pem")))
	must(t, err)
	defer c.Close()
	h, err := c.Health(ctx)
	must(t, err)
	if h["status"] != "ok" {
		t.Fatalf("health: %v", h)
	}
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: newQueue(t), ID: "tls:go"})
	must(t, err)
	task, err := c.Get(ctx, "tls:go")
	must(t, err)
	if task.ID != "tls:go" {
		t.Fatalf("got %+v", task)
	}

	for _, opt := range []chronoq.Option{
		chronoq.WithCAFile(filepath.Join(dir, "other-ca.pem")),
		chronoq.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}), // the system's CAs
	} {
		other, err := chronoq.New([]string{s.URL}, opt)
		must(t, err)
		_, err = other.Health(context.Background())
		if !errors.Is(err, chronoq.ErrConnectionFailed) ||
			!strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("a client that does not trust the CA got %v", err)
		}
		other.Close()
	}
}

func TestBadCAFileOptions(t *testing.T) {
	if _, err := chronoq.New([]string{"https://127.0.0.1:1"}, chronoq.WithCAFile("/nonexistent/ca.pem")); err == nil ||
		!strings.Contains(err.Error(), "no such file") {
		t.Fatalf("a missing CA file: %v", err)
	}
	dir := t.TempDir()
	must(t, testserver.MakeCerts(dir))
	if _, err := chronoq.New([]string{"https://127.0.0.1:1"}, chronoq.WithCAFile(filepath.Join(dir, "other.key"))); err == nil ||
		!strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Fatalf("a CA file without a certificate: %v", err)
	}
}
