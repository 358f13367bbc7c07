package chronoq_test

import (
	"errors"
	"testing"

	"chronoq"
	"chronoq/internal/testserver"
)

// C12: a missing or wrong token is ErrUnauthorized (401); WithToken sends it.
func TestC12Unauthorized(t *testing.T) {
	s, err := testserver.StartWithToken("s3cret")
	must(t, err)
	s.StopAtEnd(t)
	ctx := testCtx(t)
	anon, err := chronoq.New([]string{s.URL})
	must(t, err)
	h, err := anon.Health(ctx)
	must(t, err)
	if h["status"] != "ok" {
		t.Fatalf("health without a token: %v", h)
	}
	_, err = anon.Version(ctx)
	var e *chronoq.Error
	if !errors.Is(err, chronoq.ErrUnauthorized) || !errors.As(err, &e) || e.Status != 401 {
		t.Fatalf("without a token: %v", err)
	}
	wrong, err := chronoq.New([]string{s.URL}, chronoq.WithToken("nope"))
	must(t, err)
	if _, err := wrong.Version(ctx); !errors.Is(err, chronoq.ErrUnauthorized) {
		t.Fatalf("with a wrong token: %v", err)
	}
	c, err := chronoq.New([]string{s.URL}, chronoq.WithToken("s3cret"))
	must(t, err)
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: "auth", Payload: 1})
	must(t, err)
}
