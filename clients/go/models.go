package chronoq

import (
	"encoding/json"
	"time"
)

// Task states.
const (
	StateScheduled = "scheduled"
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateCancelled = "cancelled"
	StateDead      = "dead"
)

// OnConflict decides what an enqueue with an ID that names an unfinished
// task does.
type OnConflict string

// OnConflict values.
const (
	// OnConflictReject fails with ErrConflict (the server's default).
	OnConflictReject OnConflict = "reject"
	// OnConflictIgnore returns the existing task unchanged.
	OnConflictIgnore OnConflict = "ignore"
	// OnConflictReplace gives the existing task the new run_at, payload and
	// options (ErrConflict if it is running).
	OnConflictReplace OnConflict = "replace"
)

// Backoff is a retry delay: Base doubling to Cap (full jitter).
type Backoff struct {
	// BaseMs is the first retry delay in milliseconds.
	BaseMs int64 `json:"base_ms"`
	// CapMs is the largest delay in milliseconds (0: the server's default).
	CapMs int64 `json:"cap_ms,omitempty"`
}

// Target is a webhook chronoqd delivers a task to itself.
type Target struct {
	// URL is the http or https address.
	URL string `json:"url"`
	// Method is POST (the default), PUT, PATCH, GET or DELETE.
	Method string `json:"method,omitempty"`
	// Headers are sent with the request.
	Headers map[string]string `json:"headers,omitempty"`
	// TimeoutMs is how long a delivery may take (default 10000).
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
}

// Attempt is one finished attempt of a task (Client.GetWithAttempts).
type Attempt struct {
	// Attempt is the task's attempt number at that claim (1 again after a
	// retry by hand).
	Attempt int `json:"attempt"`
	// StartedAt is the claim; EndedAt the ack, failure or lease lapse.
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at"`
	DurationMs int64     `json:"duration_ms"`
	// Node is the chronoqd that granted the claim (its --node-id); empty
	// when it has none.
	Node string `json:"node"`
	// Worker is the claim's worker, nil when it named none.
	Worker *string `json:"worker"`
	// Outcome is succeeded, failed or lease_expired.
	Outcome string `json:"outcome"`
	// Error is the failure's error and Response the webhook answer given
	// with it (their first 1,024 bytes), nil when none.
	Error    *string `json:"error"`
	Response *string `json:"response"`
}

// Task is a task as chronoqd stores it.
type Task struct {
	// ID is the task id (client-chosen or generated).
	ID string `json:"id"`
	// Queue is the task's queue.
	Queue string `json:"queue"`
	// Key is the ordering key, nil when none.
	Key *string `json:"key"`
	// Payload is the task's JSON payload.
	Payload json.RawMessage `json:"payload"`
	// RunAt is when it is (or was last) due.
	RunAt time.Time `json:"run_at"`
	// Attempt counts claims so far.
	Attempt int `json:"attempt"`
	// MaxAttempts is the attempt limit.
	MaxAttempts int `json:"max_attempts"`
	// State is scheduled, running, succeeded, cancelled or dead.
	State string `json:"state"`
	// Priority orders tasks due at the same instant (lower first).
	Priority int `json:"priority"`
	// LastError is the last failure's message, nil when none.
	LastError *string `json:"last_error"`
	// LastResponse is the last webhook answer ("HTTP 204"), for tasks with a Target.
	LastResponse *string `json:"last_response,omitempty"`
	// Worker names the worker that holds the task's lease, or last held it
	// (the Worker of the claim that took it); nil when no claim named one.
	Worker *string `json:"worker,omitempty"`
	// Attempts are its last finished attempts, oldest first: only from
	// GetWithAttempts.
	Attempts []Attempt `json:"attempts,omitempty"`
	// LeaseUntil is when a running task's (or a lease's) lease ends.
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	// Target is the webhook chronoqd delivers the task to, if any.
	Target *Target `json:"target,omitempty"`
	// CreatedAt is when the task was created.
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when it last changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// KeyString returns the task's key, or "" when it has none.
func (t *Task) KeyString() string {
	if t.Key == nil {
		return ""
	}
	return *t.Key
}

// Decode unmarshals the task's payload into v.
func (t *Task) Decode(v any) error { return json.Unmarshal(t.Payload, v) }

// Lease is a claimed task: the task with its fencing token and lease end.
type Lease struct {
	Task
	// Token is the fencing token of the claim.
	Token uint64 `json:"token"`
}

// TaskSpec is a task to enqueue. Only Queue is required.
type TaskSpec struct {
	// Queue is the queue's name.
	Queue string
	// Payload is any value encoded as JSON (a json.RawMessage or []byte
	// holding JSON is sent as is); nil sends none (the server's {}).
	Payload any
	// RunAt is when the task is due; zero with Delay zero means now.
	RunAt time.Time
	// Delay makes the task due this long from now (instead of RunAt).
	Delay time.Duration
	// ID is a client-chosen id (1-200 bytes, not starting with "_").
	ID string
	// OnConflict decides what happens when ID names an unfinished task.
	OnConflict OnConflict
	// MaxAttempts is the attempt limit (0: the queue's or engine's default).
	MaxAttempts int
	// Priority orders tasks due at the same instant (lower first).
	Priority int
	// Backoff is the retry delay (nil: the queue's or engine's default).
	Backoff *Backoff
	// Target makes chronoqd deliver the task to a webhook.
	Target *Target
	// Key is the ordering key ("" for none).
	Key string
}

// MarshalJSON encodes the spec as a POST /v1/tasks body.
func (s TaskSpec) MarshalJSON() ([]byte, error) {
	m := map[string]any{"queue": s.Queue}
	if s.Payload != nil {
		switch p := s.Payload.(type) {
		case []byte:
			m["payload"] = json.RawMessage(p)
		default:
			m["payload"] = p
		}
	}
	if !s.RunAt.IsZero() {
		m["run_at"] = FormatTime(s.RunAt)
	} else if s.Delay > 0 {
		m["delay_ms"] = s.Delay.Milliseconds()
	}
	if s.ID != "" {
		m["id"] = s.ID
	}
	if s.OnConflict != "" {
		m["on_conflict"] = s.OnConflict
	}
	if s.MaxAttempts != 0 {
		m["max_attempts"] = s.MaxAttempts
	}
	if s.Priority != 0 {
		m["priority"] = s.Priority
	}
	if s.Backoff != nil {
		m["backoff"] = s.Backoff
	}
	if s.Target != nil {
		m["target"] = s.Target
	}
	if s.Key != "" {
		m["key"] = s.Key
	}
	return json.Marshal(m)
}

// FormatTime writes t as chronoqd does: RFC 3339 UTC with milliseconds.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// TaskPage is one page of GET /v1/tasks.
type TaskPage struct {
	// Tasks are the page's tasks.
	Tasks []*Task `json:"tasks"`
	// NextCursor is the cursor of the next page ("" on the last).
	NextCursor string `json:"-"`
}

// ListOptions filter and page GET /v1/tasks.
type ListOptions struct {
	// Queue keeps one queue's tasks.
	Queue string
	// State keeps tasks in one state.
	State string
	// Key keeps one key's tasks.
	Key string
	// Limit is the page size, 1-1000 (0: the server's 100).
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
}

// ClaimOptions are the arguments of a claim.
type ClaimOptions struct {
	// Max is how many tasks to claim at most (0: 1).
	Max int
	// Lease is how long each task is leased (0: the server's 30 s).
	Lease time.Duration
	// Wait makes the claim wait (a long poll) until a task is due.
	Wait time.Duration
	// Acks are outcomes of earlier tasks, applied before the claim.
	Acks []AckItem
	// Worker names the claimer (at most 200 bytes, no control characters;
	// "": nobody): each task claimed shows it as Task.Worker.
	Worker string
}

// ClaimResult is a claim's answer.
type ClaimResult struct {
	// Tasks are the leased tasks.
	Tasks []*Lease `json:"tasks"`
	// Acks are the results of the claim's Acks, in order.
	Acks []AckResult `json:"acks"`
}

// AckItem is one outcome: a success, or a failure when Failure is set.
type AckItem struct {
	// ID is the task's id.
	ID string
	// Token is the lease's token.
	Token uint64
	// Failure makes the item fail the task's attempt with Error.
	Failure bool
	// Error is the failure's message (kept as the task's last_error).
	Error string
	// RetryIn is the failure's retry delay (0: the task's backoff).
	RetryIn time.Duration
}

// Ack returns the success outcome of a lease.
func Ack(l *Lease) AckItem { return AckItem{ID: l.ID, Token: l.Token} }

// Failure returns a failure outcome of a lease.
func Failure(l *Lease, message string, retryIn time.Duration) AckItem {
	return AckItem{ID: l.ID, Token: l.Token, Failure: true, Error: message, RetryIn: retryIn}
}

// MarshalJSON encodes the item as an entry of acks.
func (a AckItem) MarshalJSON() ([]byte, error) { return appendAck(nil, a), nil }

// AckResult is the result of one outcome.
type AckResult struct {
	// ID is the task's id.
	ID string
	// OK says the outcome was recorded.
	OK bool
	// Err is the reason it was not (a *Error, e.g. ErrStaleToken).
	Err *Error
}

// ackResultJSON is an AckResult as chronoqd writes it.
type ackResultJSON struct {
	ID    string     `json:"id"`
	OK    bool       `json:"ok"`
	Error *errorBody `json:"error"`
}

func (raw *ackResultJSON) into(r *AckResult) {
	r.ID, r.OK = raw.ID, raw.OK
	if !raw.OK {
		r.Err = errorFromJSON(raw.Error, 0, "")
	}
}

// UnmarshalJSON decodes {id, ok, error?}.
func (r *AckResult) UnmarshalJSON(data []byte) error {
	var raw ackResultJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	raw.into(r)
	return nil
}

// RateLimit allows at most Count claims per sliding PeriodMs.
type RateLimit struct {
	// Count is the number of claims.
	Count int `json:"count"`
	// PeriodMs is the window in milliseconds.
	PeriodMs int64 `json:"period_ms"`
}

// Queue is a queue with its counts and settings (nil settings: defaults).
type Queue struct {
	// Name is the queue's name.
	Name string `json:"name"`
	// Counts are the tasks by state (scheduled, running, succeeded, cancelled, dead).
	Counts map[string]int `json:"counts"`
	// Paused says claims get none of its tasks.
	Paused bool `json:"paused"`
	// Webhooks says chronoqd delivers the queue's tasks (it held tasks with a target).
	Webhooks bool `json:"webhooks"`
	// OldestDueLatenessMs is how late the oldest due task is.
	OldestDueLatenessMs *int64 `json:"oldest_due_lateness_ms"`
	// Concurrency caps the queue's running tasks (nil: no limit).
	Concurrency *int `json:"concurrency"`
	// MaxInFlight repeats Concurrency.
	MaxInFlight *int `json:"max_in_flight"`
	// MaxInFlightPerKey caps a key's started, unfinished tasks.
	MaxInFlightPerKey *int `json:"max_in_flight_per_key"`
	// MaxPendingPerKey caps a key's tasks waiting to start.
	MaxPendingPerKey *int `json:"max_pending_per_key"`
	// MaxAttempts is the default for tasks enqueued without one.
	MaxAttempts *int `json:"max_attempts"`
	// Backoff is the default retry delay.
	Backoff *Backoff `json:"backoff"`
	// RetentionMs is how long finished tasks stay visible.
	RetentionMs *int64 `json:"retention_ms"`
	// RateLimit caps the claims per period.
	RateLimit *RateLimit `json:"rate_limit"`
}

// QueueSettings change a queue (PUT /v1/queues/{queue}): nil fields keep
// their value; Reset names JSON fields to put back to their default
// ("rate_limit", "max_pending_per_key", ...).
type QueueSettings struct {
	// Concurrency caps the queue's running tasks (1-100,000).
	Concurrency *int
	// MaxInFlightPerKey caps a key's started, unfinished tasks.
	MaxInFlightPerKey *int
	// MaxPendingPerKey caps a key's tasks waiting to start (past it: ErrKeyBacklogFull).
	MaxPendingPerKey *int
	// MaxAttempts is the default for tasks enqueued without one.
	MaxAttempts *int
	// Backoff is the default retry delay.
	Backoff *Backoff
	// Retention is how long finished tasks stay visible.
	Retention *time.Duration
	// RateLimit caps the claims per period.
	RateLimit *RateLimit
	// Reset lists settings (by JSON name) to put back to their default.
	Reset []string
}

// Int returns a pointer to v, for the optional fields of QueueSettings.
func Int(v int) *int { return &v }

func (s QueueSettings) body() map[string]any {
	m := map[string]any{}
	if s.Concurrency != nil {
		m["concurrency"] = *s.Concurrency
	}
	if s.MaxInFlightPerKey != nil {
		m["max_in_flight_per_key"] = *s.MaxInFlightPerKey
	}
	if s.MaxPendingPerKey != nil {
		m["max_pending_per_key"] = *s.MaxPendingPerKey
	}
	if s.MaxAttempts != nil {
		m["max_attempts"] = *s.MaxAttempts
	}
	if s.Backoff != nil {
		m["backoff"] = s.Backoff
	}
	if s.Retention != nil {
		m["retention_ms"] = s.Retention.Milliseconds()
	}
	if s.RateLimit != nil {
		m["rate_limit"] = s.RateLimit
	}
	for _, name := range s.Reset {
		m[name] = nil
	}
	return m
}

// ScheduleSpec defines a schedule: exactly one of Cron, Every and FixedDelay.
type ScheduleSpec struct {
	// Name is the schedule's name (1-150 bytes of [A-Za-z0-9_.:-]).
	Name string
	// Queue receives the occurrences.
	Queue string
	// Cron is a cron expression, matched in TZ.
	Cron string
	// Every is a fixed rate.
	Every time.Duration
	// FixedDelay runs that long after the previous run finished.
	FixedDelay time.Duration
	// TZ is an IANA zone for Cron (default UTC).
	TZ string
	// DSTGap is "run_after" or "skip".
	DSTGap string
	// DSTRepeat is "once" or "twice".
	DSTRepeat string
	// Start is when the rule starts.
	Start time.Time
	// Payload is a JSON object (a map, a struct or a json.RawMessage).
	Payload any
	// Misfire is "skip", "run_once" or "run_all".
	Misfire string
	// MaxCatchup bounds run_all.
	MaxCatchup int
	// Overlap is "allow", "skip" or "queue_one".
	Overlap string
	// Priority of each occurrence.
	Priority int
	// MaxAttempts of each occurrence.
	MaxAttempts int
	// Target makes chronoqd deliver the occurrences.
	Target *Target
}

func (s ScheduleSpec) body(withName bool) map[string]any {
	m := map[string]any{"queue": s.Queue}
	if withName {
		m["name"] = s.Name
	}
	if s.Cron != "" {
		m["cron"] = s.Cron
	}
	if s.Every > 0 {
		m["every_ms"] = s.Every.Milliseconds()
	}
	if s.FixedDelay > 0 {
		m["fixed_delay_ms"] = s.FixedDelay.Milliseconds()
	}
	for k, v := range map[string]string{"tz": s.TZ, "dst_gap": s.DSTGap, "dst_repeat": s.DSTRepeat, "misfire": s.Misfire, "overlap": s.Overlap} {
		if v != "" {
			m[k] = v
		}
	}
	if !s.Start.IsZero() {
		m["start"] = FormatTime(s.Start)
	}
	if s.Payload != nil {
		m["payload"] = s.Payload
	}
	if s.MaxCatchup != 0 {
		m["max_catchup"] = s.MaxCatchup
	}
	if s.Priority != 0 {
		m["priority"] = s.Priority
	}
	if s.MaxAttempts != 0 {
		m["max_attempts"] = s.MaxAttempts
	}
	if s.Target != nil {
		m["target"] = s.Target
	}
	return m
}

// ScheduleRun is a schedule's latest finished occurrence.
type ScheduleRun struct {
	// TaskID is the occurrence's task id.
	TaskID string `json:"task_id"`
	// ScheduledFor is the occurrence's instant.
	ScheduledFor time.Time `json:"scheduled_for"`
	// State is succeeded, dead or cancelled.
	State string `json:"state"`
	// FinishedAt is when it finished.
	FinishedAt time.Time `json:"finished_at"`
	// Error is its last_error, if any.
	Error *string `json:"error"`
}

// Schedule is a schedule as chronoqd stores it.
type Schedule struct {
	// Name is the schedule's name.
	Name string `json:"name"`
	// Queue receives the occurrences.
	Queue string `json:"queue"`
	// Cron is the cron rule, if that is the rule.
	Cron *string `json:"cron,omitempty"`
	// EveryMs is the fixed rate, if that is the rule.
	EveryMs *int64 `json:"every_ms,omitempty"`
	// FixedDelayMs is the fixed delay, if that is the rule.
	FixedDelayMs *int64 `json:"fixed_delay_ms,omitempty"`
	// TZ is the cron rule's zone.
	TZ *string `json:"tz,omitempty"`
	// Start is when the rule starts, if set.
	Start *time.Time `json:"start"`
	// Payload is each occurrence's payload (plus scheduled_for).
	Payload json.RawMessage `json:"payload"`
	// Misfire is skip, run_once or run_all.
	Misfire string `json:"misfire"`
	// MaxCatchup bounds run_all.
	MaxCatchup int `json:"max_catchup"`
	// Overlap is allow, skip or queue_one.
	Overlap string `json:"overlap"`
	// DSTGap is run_after or skip, if set.
	DSTGap *string `json:"dst_gap"`
	// DSTRepeat is once or twice, if set.
	DSTRepeat *string `json:"dst_repeat"`
	// Priority of each occurrence.
	Priority int `json:"priority"`
	// MaxAttempts of each occurrence, if set.
	MaxAttempts *int `json:"max_attempts"`
	// Target of each occurrence, if any.
	Target *Target `json:"target"`
	// Paused says no occurrence is created.
	Paused bool `json:"paused"`
	// NextRun is when the next occurrence is due.
	NextRun *time.Time `json:"next_run"`
	// NextTaskID is the unclaimed next occurrence's task id.
	NextTaskID *string `json:"next_task_id"`
	// LastRun is the latest finished occurrence.
	LastRun *ScheduleRun `json:"last_run"`
	// Runs counts finished occurrences.
	Runs int64 `json:"runs"`
	// Skipped counts skipped occurrences.
	Skipped int64 `json:"skipped"`
	// CreatedAt is when the schedule was created.
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when it last changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// SchedulePage is one page of GET /v1/schedules.
type SchedulePage struct {
	// Schedules are the page's schedules, by name.
	Schedules []*Schedule
	// NextCursor is the cursor of the next page ("" on the last).
	NextCursor string
}

// LockGrant is a held lock: its fencing token and lease end.
type LockGrant struct {
	// Key is the lock's key.
	Key string `json:"key"`
	// Token is the grant's fencing token.
	Token uint64 `json:"token"`
	// ExpiresAt is when the lease ends.
	ExpiresAt time.Time `json:"expires_at"`
}

// LockInfo is a lock's state (GET /v1/locks/{key}).
type LockInfo struct {
	// Key is the lock's key.
	Key string `json:"key"`
	// Held says someone holds it.
	Held bool `json:"held"`
	// Owner is the holder's owner name, if any.
	Owner *string `json:"owner"`
	// ExpiresAt is when the holder's lease ends (nil when not held).
	ExpiresAt *time.Time `json:"expires_at"`
	// Waiters counts waiting acquisitions.
	Waiters int `json:"waiters"`
}
