// Package chronoq is the Go client of chronoq, a durable timed-task engine:
// a Client for chronoqd's HTTP/JSON API (tasks, queues, schedules, claims,
// acknowledgements, keyed locks), a Worker that runs handlers on claimed
// tasks, and a Lock helper that keeps a lock's lease in the background.
//
// Every call takes a context.Context and returns an *Error on failure;
// compare it with errors.Is against ErrNotFound, ErrStaleToken, ...
package chronoq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

// MaxBatch is the most tasks (or acknowledgements) one request may carry.
const MaxBatch = 10000

// maxBody is chronoqd's request body limit.
const maxBody = 1 << 20

// Client talks to one chronoqd, or to several nodes of a cluster: a call
// goes to the current node and moves to the next at a connection failure
// or a 503; a call whose answer was lost after it was sent is sent to the
// next node only when that is safe (GET, PUT, PATCH, DELETE; POSTs with a
// token; claims; creates with a client id), else it returns
// ErrOutcomeUnknown. A Client is safe for concurrent use and keeps its
// connections alive.
type Client struct {
	t *transport
	// clock schedules its workers' and locks' timers (realClock, except
	// in tests: see clock.go).
	clock clock
}

type config struct {
	token   string
	timeout time.Duration
	http    *http.Client
	caFile  string
	tls     *tls.Config
}

// Option configures a Client.
type Option func(*config)

// WithToken sets the bearer token chronoqd requires (--token-file).
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTimeout sets how long a request may take (default 30 s); a claim's or
// lock's wait is added to it.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithHTTPClient makes the Client send through hc (its Timeout should be 0:
// the Client sets a deadline per request).
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.http = hc } }

// WithCAFile makes https nodes trusted when a CA certificate of the PEM file
// at path (a private CA) signed theirs, instead of the system's CAs. The
// certificate's host name is checked as always. New fails when the file
// cannot be read or holds no certificate.
func WithCAFile(path string) Option { return func(c *config) { c.caFile = path } }

// WithTLSConfig sets the TLS configuration of https nodes (default: the
// system's CAs, TLS 1.2 or later).
func WithTLSConfig(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// tlsConfig is what WithCAFile or WithTLSConfig asked for: nil for the
// defaults.
func (c *config) tlsConfig() (*tls.Config, error) {
	if c.caFile == "" {
		return c.tls, nil
	}
	if c.tls != nil {
		return nil, errors.New("chronoq: give WithCAFile or WithTLSConfig, not both")
	}
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, fmt.Errorf("chronoq: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("chronoq: CA file %s holds no PEM certificate", c.caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// New returns a Client of the nodes at urls ("http://host:7070" or
// "https://host:7070"; an item may hold several URLs separated by commas).
func New(urls []string, opts ...Option) (*Client, error) {
	cfg := config{timeout: 30 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil && cfg.http != nil {
		return nil, errors.New("chronoq: WithCAFile and WithTLSConfig do not apply to WithHTTPClient's client: set its transport's TLSClientConfig")
	}
	t, err := newTransport(urls, cfg.token, cfg.timeout, cfg.http, tlsCfg)
	if err != nil {
		return nil, err
	}
	return &Client{t: t, clock: realClock{}}, nil
}

// CurrentURL returns the node the next call goes to first.
func (c *Client) CurrentURL() string {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.t.nodes[c.t.current]
}

// Close closes the client's idle connections.
func (c *Client) Close() { c.t.http.CloseIdleConnections() }

func seg(s string) string { return url.PathEscape(s) }

// answerDecoder is an answer with its own decoding (a fast path).
type answerDecoder interface{ decodeAnswer(body []byte) error }

// call sends a request and decodes a 2xx answer's JSON into out (if not nil).
func (c *Client) call(ctx context.Context, req *request, out any) error {
	ans, err := c.t.send(ctx, req)
	if err != nil {
		return err
	}
	if out == nil || len(ans.body) == 0 {
		return nil
	}
	// The decoders copy what they keep (encoding/json does; the fast path
	// copies the payloads), so the buffer can serve the next answer.
	defer release(ans.body)
	if d, ok := out.(answerDecoder); ok {
		err = d.decodeAnswer(ans.body)
	} else {
		err = json.Unmarshal(ans.body, out)
	}
	if err != nil {
		return &Error{Code: "internal", Status: ans.status, Node: ans.node,
			Message: fmt.Sprintf("%s: answer is not the expected JSON: %v", ans.node, err)}
	}
	return nil
}

// --- tasks ----------------------------------------------------------------

// Enqueue stores one task (POST /v1/tasks) and returns it. It is resent
// after a lost answer only when spec.ID is set. Errors: ErrInvalidArgument
// (Field names the field), ErrConflict, ErrKeyBacklogFull.
func (c *Client) Enqueue(ctx context.Context, spec TaskSpec) (*Task, error) {
	var t Task
	err := c.call(ctx, &request{method: "POST", path: "/v1/tasks", body: spec, resend: spec.ID != ""}, &t)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// EnqueueMany stores many tasks (POST /v1/tasks/batch), in requests of up
// to MaxBatch tasks under chronoqd's 1 MiB body limit. Each request is
// stored whole or not at all; when one fails, the error's Field and Message
// name the task by its index in specs ("tasks[15].run_at") and the tasks
// the earlier requests stored are returned with it.
func (c *Client) EnqueueMany(ctx context.Context, specs []TaskSpec) ([]*Task, error) {
	stored := make([]*Task, 0, len(specs))
	for off := 0; off < len(specs); off += MaxBatch {
		end := off + MaxBatch
		if end > len(specs) {
			end = len(specs)
		}
		var err error
		stored, err = c.enqueueBatch(ctx, specs[off:end], off, stored)
		if err != nil {
			return stored, err
		}
	}
	return stored, nil
}

func (c *Client) enqueueBatch(ctx context.Context, specs []TaskSpec, offset int, stored []*Task) ([]*Task, error) {
	data, err := json.Marshal(map[string]any{"tasks": specs})
	if err != nil {
		return stored, fmt.Errorf("chronoq: encoding tasks: %w", err)
	}
	if len(data) > maxBody && len(specs) > 1 {
		half := len(specs) / 2
		stored, err = c.enqueueBatch(ctx, specs[:half], offset, stored)
		if err != nil {
			return stored, err
		}
		return c.enqueueBatch(ctx, specs[half:], offset+half, stored)
	}
	resend := true
	for _, s := range specs {
		if s.ID == "" {
			resend = false
		}
	}
	var out struct {
		Tasks []*Task `json:"tasks"`
	}
	if err := c.call(ctx, &request{method: "POST", path: "/v1/tasks/batch", body: data, resend: resend}, &out); err != nil {
		if e, ok := err.(*Error); ok {
			shiftBatchIndex(e, offset)
		}
		return stored, err
	}
	return append(stored, out.Tasks...), nil
}

// Get returns the task id (GET /v1/tasks/{id}); ErrNotFound if none.
func (c *Client) Get(ctx context.Context, id string) (*Task, error) {
	return c.getTask(ctx, "/v1/tasks/"+seg(id))
}

// GetWithAttempts is Get with the task's last finished attempts in
// Task.Attempts, oldest first (GET /v1/tasks/{id}?attempts=true).
func (c *Client) GetWithAttempts(ctx context.Context, id string) (*Task, error) {
	return c.getTask(ctx, "/v1/tasks/"+seg(id)+"?attempts=true")
}

func (c *Client) getTask(ctx context.Context, path string) (*Task, error) {
	var t Task
	if err := c.call(ctx, &request{method: "GET", path: path}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Cancel cancels a scheduled task (DELETE /v1/tasks/{id}) and returns it;
// ErrNotFound, or ErrFailedPrecondition when it is running or finished.
func (c *Client) Cancel(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := c.call(ctx, &request{method: "DELETE", path: "/v1/tasks/" + seg(id)}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Reschedule gives a scheduled task a new due time, and with a non-nil
// payload a new payload (PATCH /v1/tasks/{id}). runAt is used when not
// zero, else delay.
func (c *Client) Reschedule(ctx context.Context, id string, runAt time.Time, delay time.Duration, payload any) (*Task, error) {
	body := map[string]any{}
	if !runAt.IsZero() {
		body["run_at"] = FormatTime(runAt)
	} else {
		body["delay_ms"] = delay.Milliseconds()
	}
	if payload != nil {
		body["payload"] = payload
	}
	var t Task
	if err := c.call(ctx, &request{method: "PATCH", path: "/v1/tasks/" + seg(id), body: body}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Retry schedules a dead task again, now, with its attempts reset
// (POST /v1/tasks/{id}/retry). Not resent after a lost answer.
func (c *Client) Retry(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := c.call(ctx, &request{method: "POST", path: "/v1/tasks/" + seg(id) + "/retry"}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// List returns one page of tasks (GET /v1/tasks).
func (c *Client) List(ctx context.Context, opts ListOptions) (*TaskPage, error) {
	q := url.Values{}
	if opts.Queue != "" {
		q.Set("queue", opts.Queue)
	}
	if opts.State != "" {
		q.Set("state", opts.State)
	}
	if opts.Key != "" {
		q.Set("key", opts.Key)
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	path := "/v1/tasks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Tasks      []*Task `json:"tasks"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := c.call(ctx, &request{method: "GET", path: path}, &out); err != nil {
		return nil, err
	}
	p := &TaskPage{Tasks: out.Tasks}
	if out.NextCursor != nil {
		p.NextCursor = *out.NextCursor
	}
	return p, nil
}

// TaskIterator walks every task matching a filter, page by page:
//
//	it := client.Tasks(chronoq.ListOptions{Queue: "emails"})
//	for it.Next(ctx) {
//		use(it.Task())
//	}
//	if err := it.Err(); err != nil { ... }
type TaskIterator struct {
	c    *Client
	opts ListOptions
	page []*Task
	i    int
	done bool
	err  error
}

// Tasks returns an iterator over every task matching opts (Limit is the
// page size).
func (c *Client) Tasks(opts ListOptions) *TaskIterator { return &TaskIterator{c: c, opts: opts, i: -1} }

// Next moves to the next task, fetching a page when needed; false at the
// end or on an error (see Err).
func (it *TaskIterator) Next(ctx context.Context) bool {
	for {
		if it.err != nil {
			return false
		}
		if it.i+1 < len(it.page) {
			it.i++
			return true
		}
		if it.done {
			return false
		}
		p, err := it.c.List(ctx, it.opts)
		if err != nil {
			it.err = err
			return false
		}
		it.page, it.i = p.Tasks, -1
		if p.NextCursor == "" {
			it.done = true
		}
		it.opts.Cursor = p.NextCursor
	}
}

// Task returns the current task.
func (it *TaskIterator) Task() *Task { return it.page[it.i] }

// Err returns the error that ended the iteration, if any.
func (it *TaskIterator) Err() error { return it.err }

// --- workers --------------------------------------------------------------

// Claim leases up to opts.Max due tasks of queue
// (POST /v1/queues/{queue}/claim), first applying opts.Acks (their results
// are in ClaimResult.Acks). If it returns an error other than
// ErrInvalidArgument, send those outcomes again. Resent after a lost answer.
func (c *Client) Claim(ctx context.Context, queue string, opts ClaimOptions) (*ClaimResult, error) {
	max := opts.Max
	if max <= 0 {
		max = 1
	}
	body := make([]byte, 0, 64+64*len(opts.Acks))
	body = append(body, `{"max":`...)
	body = strconv.AppendInt(body, int64(max), 10)
	if opts.Lease > 0 {
		body = append(body, `,"lease_ms":`...)
		body = strconv.AppendInt(body, opts.Lease.Milliseconds(), 10)
	}
	if opts.Wait > 0 {
		body = append(body, `,"wait_ms":`...)
		body = strconv.AppendInt(body, opts.Wait.Milliseconds(), 10)
	}
	if opts.Worker != "" {
		body = append(body, `,"worker":`...)
		body = appendString(body, opts.Worker)
	}
	if len(opts.Acks) > 0 {
		body = appendAcks(append(body, ','), opts.Acks)
	}
	body = append(body, '}')
	var out ClaimResult
	err := c.call(ctx, &request{method: "POST", path: "/v1/queues/" + seg(queue) + "/claim", body: body,
		resend: true, extra: opts.Wait}, &claimAnswer{out: &out, max: max, acks: opts.Acks})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Ack acknowledges a claimed task: it succeeded (POST /v1/tasks/{id}/ack).
// ErrStaleToken when the lease is no longer the caller's.
func (c *Client) Ack(ctx context.Context, id string, token uint64) error {
	return c.call(ctx, &request{method: "POST", path: "/v1/tasks/" + seg(id) + "/ack",
		body: map[string]any{"token": token}, resend: true}, nil)
}

// Fail fails a claimed task's attempt (POST /v1/tasks/{id}/fail): it
// retries after retryIn (0: its backoff) or goes dead after its last
// attempt, keeping message as last_error.
func (c *Client) Fail(ctx context.Context, id string, token uint64, message string, retryIn time.Duration) error {
	body := map[string]any{"token": token, "error": message}
	if retryIn > 0 {
		body["retry_in_ms"] = retryIn.Milliseconds()
	}
	return c.call(ctx, &request{method: "POST", path: "/v1/tasks/" + seg(id) + "/fail", body: body, resend: true}, nil)
}

// Extend extends a claimed task's lease to lease from now
// (POST /v1/tasks/{id}/extend) and returns the new lease end.
func (c *Client) Extend(ctx context.Context, id string, token uint64, lease time.Duration) (time.Time, error) {
	var out struct {
		LeaseUntil time.Time `json:"lease_until"`
	}
	err := c.call(ctx, &request{method: "POST", path: "/v1/tasks/" + seg(id) + "/extend",
		body: map[string]any{"token": token, "lease_ms": lease.Milliseconds()}, resend: true}, &out)
	return out.LeaseUntil, err
}

// AckMany reports many outcomes (successes and failures) in one commit per
// MaxBatch items (POST /v1/acks) and returns one result per item, in order.
func (c *Client) AckMany(ctx context.Context, items []AckItem) ([]AckResult, error) {
	var results []AckResult
	for off := 0; off < len(items); off += MaxBatch {
		end := off + MaxBatch
		if end > len(items) {
			end = len(items)
		}
		var out struct {
			Results []AckResult `json:"results"`
		}
		body := appendAcks(append(make([]byte, 0, 16+64*(end-off)), '{'), items[off:end])
		body = append(body, '}')
		if err := c.call(ctx, &request{method: "POST", path: "/v1/acks", body: body, resend: true},
			&out); err != nil {
			return results, err
		}
		results = append(results, out.Results...)
	}
	return results, nil
}

// --- queues ---------------------------------------------------------------

// ListQueues returns every queue (GET /v1/queues).
func (c *Client) ListQueues(ctx context.Context) ([]*Queue, error) {
	var out struct {
		Queues []*Queue `json:"queues"`
	}
	if err := c.call(ctx, &request{method: "GET", path: "/v1/queues"}, &out); err != nil {
		return nil, err
	}
	return out.Queues, nil
}

// GetQueue returns one queue (GET /v1/queues/{queue}).
func (c *Client) GetQueue(ctx context.Context, name string) (*Queue, error) {
	return c.queueCall(ctx, "GET", "/v1/queues/"+seg(name), nil)
}

// ConfigureQueue changes a queue's settings (PUT /v1/queues/{queue}).
func (c *Client) ConfigureQueue(ctx context.Context, name string, s QueueSettings) (*Queue, error) {
	return c.queueCall(ctx, "PUT", "/v1/queues/"+seg(name), s.body())
}

// PauseQueue pauses a queue: claims get none of its tasks until resumed.
func (c *Client) PauseQueue(ctx context.Context, name string) (*Queue, error) {
	return c.queueCall(ctx, "POST", "/v1/queues/"+seg(name)+"/pause", nil)
}

// ResumeQueue resumes a paused queue.
func (c *Client) ResumeQueue(ctx context.Context, name string) (*Queue, error) {
	return c.queueCall(ctx, "POST", "/v1/queues/"+seg(name)+"/resume", nil)
}

func (c *Client) queueCall(ctx context.Context, method, path string, body any) (*Queue, error) {
	var q Queue
	if err := c.call(ctx, &request{method: method, path: path, body: body, resend: true}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// --- schedules ------------------------------------------------------------

// CreateSchedule creates a schedule (POST /v1/schedules); ErrConflict when
// the name is taken.
func (c *Client) CreateSchedule(ctx context.Context, spec ScheduleSpec) (*Schedule, error) {
	return c.scheduleCall(ctx, "POST", "/v1/schedules", spec.body(true))
}

// PutSchedule creates or replaces the schedule spec.Name
// (PUT /v1/schedules/{name}).
func (c *Client) PutSchedule(ctx context.Context, spec ScheduleSpec) (*Schedule, error) {
	return c.scheduleCall(ctx, "PUT", "/v1/schedules/"+seg(spec.Name), spec.body(false))
}

// GetSchedule returns a schedule; ErrNotFound if none.
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleCall(ctx, "GET", "/v1/schedules/"+seg(name), nil)
}

// DeleteSchedule deletes a schedule and its unclaimed next occurrence.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.call(ctx, &request{method: "DELETE", path: "/v1/schedules/" + seg(name)}, nil)
}

// PauseSchedule pauses a schedule.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleCall(ctx, "POST", "/v1/schedules/"+seg(name)+"/pause", nil)
}

// ResumeSchedule resumes a paused schedule.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleCall(ctx, "POST", "/v1/schedules/"+seg(name)+"/resume", nil)
}

// ListSchedules returns one page of schedules by name (queue "" for all,
// limit 0 for the server's 100).
func (c *Client) ListSchedules(ctx context.Context, queue string, limit int, cursor string) (*SchedulePage, error) {
	q := url.Values{}
	if queue != "" {
		q.Set("queue", queue)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/schedules"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out struct {
		Schedules  []*Schedule `json:"schedules"`
		NextCursor *string     `json:"next_cursor"`
	}
	if err := c.call(ctx, &request{method: "GET", path: path}, &out); err != nil {
		return nil, err
	}
	p := &SchedulePage{Schedules: out.Schedules}
	if out.NextCursor != nil {
		p.NextCursor = *out.NextCursor
	}
	return p, nil
}

// NextOccurrences returns a schedule's next count (1-1000) occurrences.
func (c *Client) NextOccurrences(ctx context.Context, name string, count int) ([]time.Time, error) {
	var out struct {
		Next []time.Time `json:"next"`
	}
	err := c.call(ctx, &request{method: "GET", path: "/v1/schedules/" + seg(name) + "/next?count=" + strconv.Itoa(count)}, &out)
	return out.Next, err
}

func (c *Client) scheduleCall(ctx context.Context, method, path string, body any) (*Schedule, error) {
	var s Schedule
	if err := c.call(ctx, &request{method: method, path: path, body: body, resend: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// --- locks ----------------------------------------------------------------

// AcquireLock acquires the lock key (POST /v1/locks/{key}/acquire), waiting
// up to wait (0: try once), leased for lease. ErrLockWaitTimeout when it
// stayed held. Not resent after a lost answer (ErrOutcomeUnknown instead).
func (c *Client) AcquireLock(ctx context.Context, key string, wait, lease time.Duration, owner string) (*LockGrant, error) {
	body := map[string]any{"wait_ms": wait.Milliseconds(), "lease_ms": lease.Milliseconds()}
	if owner != "" {
		body["owner"] = owner
	}
	var g LockGrant
	if err := c.call(ctx, &request{method: "POST", path: "/v1/locks/" + seg(key) + "/acquire", body: body, extra: wait}, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// ExtendLock extends a held lock's lease to lease from now; ErrStaleToken
// when token is not the key's current grant.
func (c *Client) ExtendLock(ctx context.Context, key string, token uint64, lease time.Duration) (*LockGrant, error) {
	var g LockGrant
	err := c.call(ctx, &request{method: "POST", path: "/v1/locks/" + seg(key) + "/extend",
		body: map[string]any{"token": token, "lease_ms": lease.Milliseconds()}, resend: true}, &g)
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// ReleaseLock releases a held lock; ErrStaleToken when token is not the
// key's current grant.
func (c *Client) ReleaseLock(ctx context.Context, key string, token uint64) error {
	return c.call(ctx, &request{method: "POST", path: "/v1/locks/" + seg(key) + "/release",
		body: map[string]any{"token": token}, resend: true}, nil)
}

// GetLock returns the lock's state (GET /v1/locks/{key}).
func (c *Client) GetLock(ctx context.Context, key string) (*LockInfo, error) {
	var li LockInfo
	if err := c.call(ctx, &request{method: "GET", path: "/v1/locks/" + seg(key)}, &li); err != nil {
		return nil, err
	}
	return &li, nil
}

// --- operations -----------------------------------------------------------

// Health returns the current node's GET /healthz answer, also when it is 503.
func (c *Client) Health(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	err := c.call(ctx, &request{method: "GET", path: "/healthz", accept: []int{503}}, &out)
	return out, err
}

// Version returns chronoqd's version (GET /v1/version).
func (c *Client) Version(ctx context.Context) (string, error) {
	var out struct {
		Version string `json:"version"`
	}
	err := c.call(ctx, &request{method: "GET", path: "/v1/version"}, &out)
	return out.Version, err
}

// Cluster returns the cluster's nodes and leader as the current node sees
// them (GET /v1/cluster; cluster mode only).
func (c *Client) Cluster(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	err := c.call(ctx, &request{method: "GET", path: "/v1/cluster"}, &out)
	return out, err
}
