package chronoq

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"time"
)

// UserAgent is the User-Agent header the client sends.
const UserAgent = "chronoq-go/0.1.0"

// request is one API call as the transport sends it.
type request struct {
	method string
	path   string
	body   any // nil, []byte (encoded JSON) or a value to encode
	// resend: the call may be sent again after its answer was lost even
	// though it is a POST (a create with a client id, a call with a token,
	// a claim). GET, PUT, PATCH and DELETE always may.
	resend bool
	// extra is added to the client's timeout (a claim's or lock's wait).
	extra time.Duration
	// accept lists error statuses returned as answers (healthz's 503).
	accept []int
}

func (r *request) safeToResend() bool {
	switch r.method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return r.resend
}

type answer struct {
	status int
	body   []byte
	node   string
}

type transport struct {
	nodes   []string
	token   string
	timeout time.Duration
	http    *http.Client

	mu      sync.Mutex
	current int
}

func newTransport(urls []string, token string, timeout time.Duration, hc *http.Client, tlsCfg *tls.Config) (*transport, error) {
	var nodes []string
	for _, u := range urls {
		for _, part := range strings.Split(u, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			p, err := url.Parse(part)
			if err != nil {
				return nil, fmt.Errorf("chronoq: %q: %v", part, err)
			}
			if p.Scheme != "http" && p.Scheme != "https" {
				return nil, fmt.Errorf("chronoq: %q: the URL must start with http:// or https://", part)
			}
			if p.Host == "" {
				return nil, fmt.Errorf("chronoq: %q: no host", part)
			}
			if p.RawQuery != "" || p.Fragment != "" {
				return nil, fmt.Errorf("chronoq: %q: a server URL takes no query or fragment", part)
			}
			nodes = append(nodes, strings.TrimRight(part, "/"))
		}
	}
	if len(nodes) == 0 {
		return nil, errors.New("chronoq: no server URL given")
	}
	if hc == nil {
		tr := &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			TLSClientConfig:     tlsCfg,
		}
		hc = &http.Client{Transport: tr}
	}
	return &transport{nodes: nodes, token: token, timeout: timeout, http: hc}, nil
}

// errNotSent: the request did not reach the node in full; nothing was done.
type errNotSent struct{ err error }

func (e errNotSent) Error() string { return describe(e.err) }

// errAnswerLost: the request was sent in full; no complete answer came.
type errAnswerLost struct{ err error }

func (e errAnswerLost) Error() string { return describe(e.err) }

func describe(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	s := err.Error()
	if strings.Contains(s, "connection refused") {
		return "connection refused"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection closed without an answer"
	}
	return s
}

func (t *transport) attempt(ctx context.Context, node string, req *request, body []byte) (int, []byte, error) {
	actx, cancel := context.WithTimeout(ctx, t.timeout+req.extra)
	defer cancel()
	var wrote bool
	var wmu sync.Mutex
	trace := &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wmu.Lock()
				wrote = true
				wmu.Unlock()
			}
		},
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hreq, err := http.NewRequestWithContext(httptrace.WithClientTrace(actx, trace), req.method, node+req.path, rd)
	if err != nil {
		return 0, nil, errNotSent{err}
	}
	hreq.Header.Set("User-Agent", UserAgent)
	hreq.Header.Set("Accept", "application/json")
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if t.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.http.Do(hreq)
	if err != nil {
		wmu.Lock()
		sent := wrote
		wmu.Unlock()
		if sent {
			return 0, nil, errAnswerLost{err}
		}
		return 0, nil, errNotSent{err}
	}
	defer resp.Body.Close()
	data, err := readBody(resp)
	if err != nil {
		return 0, nil, errAnswerLost{err}
	}
	return resp.StatusCode, data, nil
}

// readBody reads an answer's body, into a buffer from bodies when its
// length is announced (io.ReadAll grows one from 512 bytes, copying a
// claim's answer ~8 times); release gives it back.
func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= maxPooledBody {
		var data []byte
		if p, ok := bodies.Get().(*[]byte); ok && cap(*p) >= int(n) {
			data = (*p)[:n]
		} else {
			data = make([]byte, n, n+n/4)
		}
		_, err := io.ReadFull(resp.Body, data)
		return data, err
	}
	return io.ReadAll(resp.Body)
}

// maxPooledBody bounds the answers whose buffers are reused.
const maxPooledBody = 1 << 20

// bodies holds answer buffers for reuse: a worker's claims would otherwise
// allocate one per claim, most of what its garbage collector has to do.
var bodies sync.Pool

// release gives back an answer's buffer once nothing refers to it.
func release(body []byte) {
	if cap(body) > 0 && cap(body) <= maxPooledBody+maxPooledBody/4 {
		bodies.Put(&body)
	}
}

func (t *transport) send(ctx context.Context, req *request) (*answer, error) {
	var body []byte
	switch b := req.body.(type) {
	case nil:
	case []byte:
		body = b
	default:
		var err error
		body, err = json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("chronoq: encoding the request: %w", err)
		}
	}
	t.mu.Lock()
	start := t.current
	t.mu.Unlock()
	n := len(t.nodes)
	var notes []string
	var lastUnavailable *Error
	lostAt := ""
	for i := 0; i < n; i++ {
		index := (start + i) % n
		node := t.nodes[index]
		status, data, err := t.attempt(ctx, node, req, body)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var lost errAnswerLost
			if errors.As(err, &lost) {
				if req.safeToResend() {
					notes = append(notes, fmt.Sprintf("%s: %v (after the request was sent)", node, err))
					lostAt = node
					continue
				}
				return nil, &Error{
					Code: "outcome_unknown", Node: node,
					Message: fmt.Sprintf("%s %s: %s: %v after the request was sent; it may or may not have been done (not resent: it is not safe to resend)",
						req.method, req.path, node, err),
				}
			}
			notes = append(notes, fmt.Sprintf("%s: %v", node, err))
			continue
		}
		accepted := false
		for _, s := range req.accept {
			if s == status {
				accepted = true
			}
		}
		if status == 503 && !accepted {
			e := decodeError(status, data, node)
			notes = append(notes, fmt.Sprintf("%s: 503 %v", node, e))
			lastUnavailable = e
			continue
		}
		t.mu.Lock()
		t.current = index
		t.mu.Unlock()
		if status >= 400 && !accepted {
			return nil, decodeError(status, data, node)
		}
		return &answer{status: status, body: data, node: node}, nil
	}
	if lastUnavailable != nil {
		if n > 1 {
			lastUnavailable.Message = "no node could do it: " + strings.Join(notes, "; ")
		}
		return nil, lastUnavailable
	}
	text := strings.Join(notes, "; ")
	if n > 1 {
		text = "no node answered: " + text
	}
	if lostAt != "" {
		return nil, &Error{Code: "outcome_unknown", Node: lostAt,
			Message: fmt.Sprintf("%s %s: %s; it may or may not have been done (it is safe to send again)", req.method, req.path, text)}
	}
	return nil, &Error{Code: "connection_failed", Node: t.nodes[start], Message: text}
}

func decodeError(status int, data []byte, node string) *Error {
	var env struct {
		Error *errorBody `json:"error"`
	}
	if err := json.Unmarshal(data, &env); err != nil || env.Error == nil {
		text := strings.TrimSpace(string(data))
		if len(text) > 500 {
			text = text[:500]
		}
		return errorFromJSON(&errorBody{Message: text}, status, node)
	}
	return errorFromJSON(env.Error, status, node)
}
