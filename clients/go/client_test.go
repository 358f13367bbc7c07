package chronoq_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"chronoq"
)

// C1: every field round-trips and Get returns it.
func TestC1EnqueueEveryFieldAndGet(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	spec := chronoq.TaskSpec{
		Queue: q, Payload: map[string]any{"share": 42, "name": "x"}, RunAt: runAt,
		ID: "c1:" + q, MaxAttempts: 7, Priority: 3,
		Backoff: &chronoq.Backoff{BaseMs: 500, CapMs: 60000},
		Target:  &chronoq.Target{URL: "http://127.0.0.1:9/hook", Method: "PUT", Headers: map[string]string{"X-A": "b"}, TimeoutMs: 2000},
		Key:     "customer:7",
	}
	task, err := c.Enqueue(ctx, spec)
	must(t, err)
	got, err := c.Get(ctx, spec.ID)
	must(t, err)
	for _, tk := range []*chronoq.Task{task, got} {
		if tk.ID != spec.ID || tk.Queue != q || tk.MaxAttempts != 7 || tk.Priority != 3 ||
			tk.KeyString() != "customer:7" || !tk.RunAt.Equal(runAt) || tk.State != chronoq.StateScheduled {
			t.Fatalf("task does not round-trip: %+v", tk)
		}
		var p map[string]any
		must(t, tk.Decode(&p))
		if p["share"] != float64(42) || p["name"] != "x" {
			t.Fatalf("payload %s", tk.Payload)
		}
		if tk.Target == nil || tk.Target.URL != spec.Target.URL || tk.Target.Method != "PUT" || tk.Target.Headers["X-A"] != "b" {
			t.Fatalf("target %+v", tk.Target)
		}
	}
	// Delay instead of RunAt, and a raw JSON payload; no key.
	before := time.Now()
	d, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: json.RawMessage(`[1,2]`), Delay: time.Minute})
	must(t, err)
	if d.RunAt.Before(before.Add(50*time.Second)) || d.Key != nil || !bytes.Equal(d.Payload, []byte(`[1,2]`)) {
		t.Fatalf("delayed task %+v payload %s", d, d.Payload)
	}
	// List (paging with the iterator) finds both.
	it := c.Tasks(chronoq.ListOptions{Queue: q, Limit: 1})
	n := 0
	for it.Next(ctx) {
		n++
	}
	must(t, it.Err())
	if n != 2 {
		t.Fatalf("listed %d tasks, want 2", n)
	}
	page, err := c.List(ctx, chronoq.ListOptions{Queue: q, Key: "customer:7"})
	must(t, err)
	if len(page.Tasks) != 1 || page.NextCursor != "" {
		t.Fatalf("key filter: %+v", page)
	}
}

// C2: cancel and reschedule; cancelling a running task is failed_precondition.
func TestC2CancelAndReschedule(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	a, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Delay: time.Hour, Payload: 1})
	must(t, err)
	cancelled, err := c.Cancel(ctx, a.ID)
	must(t, err)
	if cancelled.State != chronoq.StateCancelled {
		t.Fatalf("state %s", cancelled.State)
	}
	b, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Delay: time.Hour, Payload: 1})
	must(t, err)
	newAt := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Millisecond)
	r, err := c.Reschedule(ctx, b.ID, newAt, 0, map[string]int{"v": 2})
	must(t, err)
	if !r.RunAt.Equal(newAt) || string(r.Payload) != `{"v":2}` {
		t.Fatalf("rescheduled %+v %s", r, r.Payload)
	}
	r, err = c.Reschedule(ctx, b.ID, time.Time{}, 0, nil)
	must(t, err)
	if r.RunAt.After(time.Now().Add(time.Minute)) || string(r.Payload) != `{"v":2}` {
		t.Fatalf("rescheduled to now: %+v %s", r, r.Payload)
	}
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Max: 1, Wait: 5 * time.Second})
	must(t, err)
	if len(res.Tasks) != 1 {
		t.Fatalf("claimed %d", len(res.Tasks))
	}
	_, err = c.Cancel(ctx, b.ID)
	var e *chronoq.Error
	if !errors.Is(err, chronoq.ErrFailedPrecondition) || !errors.As(err, &e) || e.Status != 409 {
		t.Fatalf("cancelling a running task: %v", err)
	}
}

// C3: on_conflict reject, ignore, replace.
func TestC3EnqueueOnConflict(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	id := "c3:" + q
	_, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, ID: id, Delay: time.Hour, Payload: 1})
	must(t, err)
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, ID: id, Delay: time.Hour, Payload: 2})
	if !errors.Is(err, chronoq.ErrConflict) {
		t.Fatalf("reject: %v", err)
	}
	ign, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, ID: id, Delay: time.Hour, Payload: 3, OnConflict: chronoq.OnConflictIgnore})
	must(t, err)
	if string(ign.Payload) != "1" {
		t.Fatalf("ignore returned %s", ign.Payload)
	}
	rep, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, ID: id, Delay: 2 * time.Hour, Payload: 4, OnConflict: chronoq.OnConflictReplace})
	must(t, err)
	got, err := c.Get(ctx, id)
	must(t, err)
	if string(rep.Payload) != "4" || string(got.Payload) != "4" {
		t.Fatalf("replace: %s / %s", rep.Payload, got.Payload)
	}
}

// C4: enqueue_many stores many tasks; a bad task fails its batch with an
// error naming its index in the caller's list.
func TestC4EnqueueManyInBatches(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	specs := make([]chronoq.TaskSpec, 10050)
	for i := range specs {
		specs[i] = chronoq.TaskSpec{Queue: q, Payload: i, Delay: time.Hour}
	}
	tasks, err := c.EnqueueMany(ctx, specs)
	must(t, err)
	if len(tasks) != len(specs) || string(tasks[10049].Payload) != "10049" {
		t.Fatalf("stored %d tasks", len(tasks))
	}
	qi, err := c.GetQueue(ctx, q)
	must(t, err)
	if qi.Counts["scheduled"] != len(specs) {
		t.Fatalf("queue counts %v", qi.Counts)
	}

	// One request: tasks[15].
	bad := make([]chronoq.TaskSpec, 20)
	for i := range bad {
		bad[i] = chronoq.TaskSpec{Queue: q + "-bad", Payload: i}
	}
	bad[15].MaxAttempts = 100000
	_, err = c.EnqueueMany(ctx, bad)
	var e *chronoq.Error
	if !errors.As(err, &e) || e.Code != "invalid_argument" || e.Field != "tasks[15].max_attempts" || e.Status != 400 {
		t.Fatalf("bad batch: %v", err)
	}
	// Split into two requests: the index is the caller's (10015), and the
	// first request's tasks come back stored.
	specs2 := make([]chronoq.TaskSpec, 10020)
	for i := range specs2 {
		specs2[i] = chronoq.TaskSpec{Queue: q + "-split", Payload: i, Delay: time.Hour}
	}
	specs2[10015].MaxAttempts = 100000
	stored, err := c.EnqueueMany(ctx, specs2)
	if !errors.As(err, &e) || e.Field != "tasks[10015].max_attempts" || !strings.Contains(e.Message, "tasks[10015]") {
		t.Fatalf("split batch: %v", err)
	}
	if len(stored) != chronoq.MaxBatch {
		t.Fatalf("stored %d before the error", len(stored))
	}
}

// C5: claim leases with a token, extend moves lease_until, ack succeeds.
func TestC5ClaimExtendAck(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	task, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: "x"})
	must(t, err)
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Max: 10, Lease: 10 * time.Second, Wait: 5 * time.Second})
	must(t, err)
	if len(res.Tasks) != 1 || res.Tasks[0].ID != task.ID || res.Tasks[0].Token == 0 || res.Tasks[0].LeaseUntil == nil {
		t.Fatalf("claim: %+v", res.Tasks)
	}
	l := res.Tasks[0]
	until, err := c.Extend(ctx, l.ID, l.Token, time.Hour)
	must(t, err)
	if !until.After(l.LeaseUntil.Add(30 * time.Minute)) {
		t.Fatalf("extend moved lease_until from %v to %v", l.LeaseUntil, until)
	}
	running, err := c.Get(ctx, l.ID)
	must(t, err)
	if running.State != chronoq.StateRunning || running.LeaseUntil == nil || !running.LeaseUntil.Equal(until) {
		t.Fatalf("running task %+v", running)
	}
	must(t, c.Ack(ctx, l.ID, l.Token))
	done, err := c.Get(ctx, l.ID)
	must(t, err)
	if done.State != chronoq.StateSucceeded {
		t.Fatalf("state %s", done.State)
	}
}

// GetWithAttempts shows the attempt history; Get leaves it out.
func TestGetWithAttemptsShowsTheHistory(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	_, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: 1})
	must(t, err)
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Wait: 5 * time.Second, Worker: "host-a:1"})
	must(t, err)
	l := res.Tasks[0]
	must(t, c.Fail(ctx, l.ID, l.Token, "S3 said 503", time.Hour))
	plain, err := c.Get(ctx, l.ID)
	must(t, err)
	if plain.Attempts != nil {
		t.Fatalf("attempts without asking: %+v", plain.Attempts)
	}
	got, err := c.GetWithAttempts(ctx, l.ID)
	must(t, err)
	if len(got.Attempts) != 1 {
		t.Fatalf("attempts %+v", got.Attempts)
	}
	a := got.Attempts[0]
	if a.Attempt != 1 || a.Outcome != "failed" || a.Worker == nil || *a.Worker != "host-a:1" ||
		a.Error == nil || *a.Error != "S3 said 503" || a.Response != nil || a.Node != "" ||
		a.EndedAt.Before(a.StartedAt) {
		t.Fatalf("attempt %+v", a)
	}
}

// C5: fail with retry_in makes the task scheduled again with last_error.
func TestC5FailWithRetryIn(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	_, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: 1})
	must(t, err)
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Wait: 5 * time.Second})
	must(t, err)
	l := res.Tasks[0]
	must(t, c.Fail(ctx, l.ID, l.Token, "S3 said 503", time.Hour))
	got, err := c.Get(ctx, l.ID)
	must(t, err)
	if got.State != chronoq.StateScheduled || got.LastError == nil || *got.LastError != "S3 said 503" ||
		got.RunAt.Before(time.Now().Add(50*time.Minute)) || got.Attempt != 1 {
		t.Fatalf("failed task %+v", got)
	}
}

// C15: a claim's worker name shows on the task (kept after the ack); an
// empty one names nobody; a bad one is invalid_argument on field worker.
func TestC15ClaimNamesTheWorker(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	for i := 0; i < 2; i++ {
		_, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: i})
		must(t, err)
	}
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Worker: "host-a:4242"})
	must(t, err)
	l := res.Tasks[0]
	running, err := c.Get(ctx, l.ID)
	must(t, err)
	if running.Worker == nil || *running.Worker != "host-a:4242" {
		t.Fatalf("running task %+v", running)
	}
	must(t, c.Ack(ctx, l.ID, l.Token))
	done, err := c.Get(ctx, l.ID)
	must(t, err)
	if done.Worker == nil || *done.Worker != "host-a:4242" {
		t.Fatalf("acknowledged task %+v", done)
	}
	res, err = c.Claim(ctx, q, chronoq.ClaimOptions{})
	must(t, err)
	anonymous, err := c.Get(ctx, res.Tasks[0].ID)
	must(t, err)
	if anonymous.Worker != nil {
		t.Fatalf("task claimed by nobody named shows worker %q", *anonymous.Worker)
	}
	for _, bad := range []string{"two\nlines", strings.Repeat("x", 201)} {
		_, err = c.Claim(ctx, q, chronoq.ClaimOptions{Worker: bad})
		var e *chronoq.Error
		if !errors.Is(err, chronoq.ErrInvalidArgument) || !errors.As(err, &e) || e.Field != "worker" || e.Status != 400 {
			t.Fatalf("claim with worker %q: %v", bad, err)
		}
	}
}

// C6: one ack_many reports successes and failures with a result per item.
func TestC6AckManyWithFailures(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	_, err := c.EnqueueMany(ctx, []chronoq.TaskSpec{{Queue: q, Payload: 1}, {Queue: q, Payload: 2}, {Queue: q, Payload: 3}})
	must(t, err)
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Max: 3, Wait: 5 * time.Second})
	must(t, err)
	if len(res.Tasks) != 3 {
		t.Fatalf("claimed %d", len(res.Tasks))
	}
	ls := res.Tasks
	results, err := c.AckMany(ctx, []chronoq.AckItem{
		chronoq.Ack(ls[0]),
		chronoq.Failure(ls[1], "boom", time.Hour),
		{ID: ls[2].ID, Token: ls[2].Token + 1000},
	})
	must(t, err)
	if len(results) != 3 || !results[0].OK || !results[1].OK || results[2].OK || !errors.Is(results[2].Err, chronoq.ErrStaleToken) {
		t.Fatalf("results %+v", results)
	}
	if tk := waitState(t, c, ls[0].ID, chronoq.StateSucceeded); tk == nil {
		t.Fatal("no task")
	}
	f, err := c.Get(ctx, ls[1].ID)
	must(t, err)
	if f.State != chronoq.StateScheduled || f.LastError == nil || *f.LastError != "boom" {
		t.Fatalf("failed task %+v", f)
	}
}

// C6: a claim's acks carry successes and failures; results come back.
func TestC6ClaimCarriesFailures(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	_, err := c.EnqueueMany(ctx, []chronoq.TaskSpec{{Queue: q, Payload: 1}, {Queue: q, Payload: 2}})
	must(t, err)
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Max: 2, Wait: 5 * time.Second})
	must(t, err)
	ls := res.Tasks
	res2, err := c.Claim(ctx, q, chronoq.ClaimOptions{Max: 1, Acks: []chronoq.AckItem{chronoq.Ack(ls[0]), chronoq.Failure(ls[1], "carried", time.Hour)}})
	must(t, err)
	if len(res2.Acks) != 2 || !res2.Acks[0].OK || !res2.Acks[1].OK || len(res2.Tasks) != 0 {
		t.Fatalf("claim with acks: %+v", res2)
	}
	f, err := c.Get(ctx, ls[1].ID)
	must(t, err)
	if f.State != chronoq.StateScheduled || *f.LastError != "carried" {
		t.Fatalf("failed task %+v", f)
	}
}

// C7: an old token is the stale-token error and changes nothing. On the
// test-clock chronoqd: the lease lapses when the test moves time past it.
func TestC7StaleToken(t *testing.T) {
	ft := newFakeTime(t)
	c, ctx, q := ft.client(), testCtx(t), newQueue(t)
	_, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Payload: 1})
	must(t, err)
	const lease = 30 * time.Second
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Lease: lease})
	must(t, err)
	if len(res.Tasks) != 1 {
		t.Fatalf("claimed %d tasks, want 1", len(res.Tasks))
	}
	old := res.Tasks[0]
	if want := ft.now().Add(lease); old.LeaseUntil == nil || !old.LeaseUntil.Equal(want) {
		t.Fatalf("lease_until %v, want %v", old.LeaseUntil, want)
	}
	// Until the lease lapses the task is not claimable.
	ft.advance(lease - time.Millisecond)
	r, err := c.Claim(ctx, q, chronoq.ClaimOptions{Lease: time.Minute})
	must(t, err)
	if len(r.Tasks) != 0 {
		t.Fatalf("the task was claimed again a millisecond before its lease lapsed: %+v", r.Tasks[0])
	}
	// Once it has lapsed it is claimed again: the first token is stale.
	ft.advance(time.Millisecond)
	r, err = c.Claim(ctx, q, chronoq.ClaimOptions{Lease: time.Minute})
	must(t, err)
	if len(r.Tasks) != 1 {
		t.Fatalf("claimed %d tasks once the lease lapsed, want 1", len(r.Tasks))
	}
	fresh := r.Tasks[0]
	if fresh.ID != old.ID || fresh.Token <= old.Token {
		t.Fatalf("token did not grow: %s %d then %s %d", old.ID, old.Token, fresh.ID, fresh.Token)
	}
	err = c.Ack(ctx, old.ID, old.Token)
	var e *chronoq.Error
	if !errors.Is(err, chronoq.ErrStaleToken) || !errors.As(err, &e) || e.Status != 409 || e.Code != "stale_token" {
		t.Fatalf("ack with an old token: %v", err)
	}
	got, err := c.Get(ctx, old.ID)
	must(t, err)
	if got.State != chronoq.StateRunning {
		t.Fatalf("the stale ack changed the task: %s", got.State)
	}
	must(t, c.Ack(ctx, fresh.ID, fresh.Token))
}

// C11: create, get, list, pause, resume, next and delete a cron schedule
// with a zone.
func TestC11Schedules(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	name := "sched-" + q
	s, err := c.CreateSchedule(ctx, chronoq.ScheduleSpec{Name: name, Queue: q, Cron: "0 0 3 * * *", TZ: "Asia/Seoul",
		Payload: map[string]int{"days": 30}})
	must(t, err)
	if s.Name != name || s.Cron == nil || *s.Cron != "0 0 3 * * *" || s.TZ == nil || *s.TZ != "Asia/Seoul" || s.NextRun == nil {
		t.Fatalf("created %+v", s)
	}
	if s.NextRun.UTC().Hour() != 18 {
		t.Fatalf("03:00 in Seoul is 18:00 UTC, got %v", s.NextRun)
	}
	_, err = c.CreateSchedule(ctx, chronoq.ScheduleSpec{Name: name, Queue: q, Cron: "0 0 3 * * *"})
	if !errors.Is(err, chronoq.ErrConflict) {
		t.Fatalf("a taken name: %v", err)
	}
	g, err := c.GetSchedule(ctx, name)
	must(t, err)
	if string(g.Payload) != `{"days":30}` {
		t.Fatalf("payload %s", g.Payload)
	}
	page, err := c.ListSchedules(ctx, q, 10, "")
	must(t, err)
	if len(page.Schedules) != 1 || page.Schedules[0].Name != name {
		t.Fatalf("list %+v", page)
	}
	next, err := c.NextOccurrences(ctx, name, 3)
	must(t, err)
	if len(next) != 3 || next[1].Sub(next[0]) != 24*time.Hour {
		t.Fatalf("next %v", next)
	}
	p, err := c.PauseSchedule(ctx, name)
	must(t, err)
	if !p.Paused {
		t.Fatal("not paused")
	}
	r, err := c.ResumeSchedule(ctx, name)
	must(t, err)
	if r.Paused {
		t.Fatal("still paused")
	}
	put, err := c.PutSchedule(ctx, chronoq.ScheduleSpec{Name: name, Queue: q, Every: time.Hour})
	must(t, err)
	if put.EveryMs == nil || *put.EveryMs != 3600000 {
		t.Fatalf("put %+v", put)
	}
	must(t, c.DeleteSchedule(ctx, name))
	_, err = c.GetSchedule(ctx, name)
	if !errors.Is(err, chronoq.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// C12: invalid_argument with field, not_found, key_backlog_full: typed
// errors with code, field and HTTP status.
func TestC12Errors(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	_, err := c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, MaxAttempts: 5000})
	var e *chronoq.Error
	if !errors.Is(err, chronoq.ErrInvalidArgument) || !errors.As(err, &e) || e.Status != 400 || e.Field != "max_attempts" {
		t.Fatalf("invalid argument: %v", err)
	}
	_, err = c.Get(ctx, "no-such-task-"+q)
	if !errors.Is(err, chronoq.ErrNotFound) || !errors.As(err, &e) || e.Status != 404 || e.Code != "not_found" || e.Node != server.URL {
		t.Fatalf("not found: %#v", err)
	}
	_, err = c.ConfigureQueue(ctx, q, chronoq.QueueSettings{MaxPendingPerKey: chronoq.Int(1)})
	must(t, err)
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Key: "busy", Delay: time.Minute})
	must(t, err)
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Key: "busy", Delay: time.Minute})
	if !errors.Is(err, chronoq.ErrKeyBacklogFull) || !errors.As(err, &e) || e.Status != 429 || e.Field != "key" || !strings.Contains(e.Message, "busy") {
		t.Fatalf("key backlog full: %v", err)
	}
	_, err = c.EnqueueMany(ctx, []chronoq.TaskSpec{{Queue: q, Payload: 1}, {Queue: q, Key: "busy"}})
	if !errors.As(err, &e) || e.Code != "key_backlog_full" || e.Field != "tasks[1].key" {
		t.Fatalf("key backlog full in a batch: %v", err)
	}
	if errors.Is(err, chronoq.ErrNotFound) {
		t.Fatal("a key_backlog_full error matches ErrNotFound")
	}
	_, err = c.ConfigureQueue(ctx, q, chronoq.QueueSettings{Reset: []string{"max_pending_per_key"}})
	must(t, err)
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, Key: "busy", Delay: time.Minute})
	must(t, err)
}

// C12: the classes of codes (no server needed).
func TestC12ErrorClasses(t *testing.T) {
	cases := []struct {
		err  *chronoq.Error
		is   []error
		isnt []error
	}{
		{&chronoq.Error{Code: "not_leader", Status: 503}, []error{chronoq.ErrUnavailable}, []error{chronoq.ErrNotFound}},
		{&chronoq.Error{Code: "connection_failed"}, []error{chronoq.ErrConnectionFailed, chronoq.ErrUnavailable}, []error{chronoq.ErrOutcomeUnknown}},
		{&chronoq.Error{Code: "leader_timeout", Status: 504}, []error{chronoq.ErrOutcomeUnknown}, []error{chronoq.ErrUnavailable}},
		{&chronoq.Error{Code: "already_exists", Status: 409}, []error{chronoq.ErrConflict}, nil},
		{&chronoq.Error{Code: "lock_wait_timeout", Status: 409}, []error{chronoq.ErrLockWaitTimeout}, []error{chronoq.ErrStaleToken}},
		{&chronoq.Error{Code: "some_new_code", Status: 404}, []error{chronoq.ErrNotFound}, nil},
		{&chronoq.Error{Code: "lock_lost"}, []error{chronoq.ErrLockLost, chronoq.ErrStaleToken}, nil},
	}
	for _, tc := range cases {
		wrapped := fmt.Errorf("wrapped: %w", tc.err)
		for _, target := range tc.is {
			if !errors.Is(wrapped, target) {
				t.Errorf("%v is not %v", tc.err, target)
			}
		}
		for _, target := range tc.isnt {
			if errors.Is(wrapped, target) {
				t.Errorf("%v is %v", tc.err, target)
			}
		}
	}
}

// Queues: configure, pause, resume, list; health and version.
func TestQueuesAndOperations(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	qi, err := c.ConfigureQueue(ctx, q, chronoq.QueueSettings{Concurrency: chronoq.Int(4), MaxAttempts: chronoq.Int(5),
		RateLimit: &chronoq.RateLimit{Count: 100, PeriodMs: 1000}})
	must(t, err)
	if qi.Concurrency == nil || *qi.Concurrency != 4 || qi.RateLimit == nil || qi.RateLimit.Count != 100 {
		t.Fatalf("configured %+v", qi)
	}
	p, err := c.PauseQueue(ctx, q)
	must(t, err)
	if !p.Paused {
		t.Fatal("not paused")
	}
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: q})
	must(t, err)
	res, err := c.Claim(ctx, q, chronoq.ClaimOptions{})
	must(t, err)
	if len(res.Tasks) != 0 {
		t.Fatal("a paused queue handed out a task")
	}
	r, err := c.ResumeQueue(ctx, q)
	must(t, err)
	if r.Paused {
		t.Fatal("still paused")
	}
	all, err := c.ListQueues(ctx)
	must(t, err)
	found := false
	for _, x := range all {
		found = found || x.Name == q
	}
	if !found {
		t.Fatalf("queue %s not listed", q)
	}
	h, err := c.Health(ctx)
	must(t, err)
	if h["status"] != "ok" {
		t.Fatalf("health %v", h)
	}
	v, err := c.Version(ctx)
	must(t, err)
	if v == "" {
		t.Fatal("no version")
	}
	// Retry of a dead task.
	_, err = c.Enqueue(ctx, chronoq.TaskSpec{Queue: q, ID: "dead:" + q, MaxAttempts: 1})
	must(t, err)
	res, err = c.Claim(ctx, q, chronoq.ClaimOptions{Max: 10, Wait: 5 * time.Second})
	must(t, err)
	for _, l := range res.Tasks {
		must(t, c.Fail(ctx, l.ID, l.Token, "last", 0))
	}
	waitState(t, c, "dead:"+q, chronoq.StateDead)
	again, err := c.Retry(ctx, "dead:"+q)
	must(t, err)
	if again.State != chronoq.StateScheduled {
		t.Fatalf("retried %+v", again)
	}
}
