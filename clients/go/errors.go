package chronoq

import (
	"fmt"
	"regexp"
	"strconv"
)

// Error is every error the client returns for a failed call: the server's
// error (code, message, field and HTTP status) or one the client met by
// itself (Code "connection_failed" or "outcome_unknown", Status 0).
//
// Compare with errors.Is against the sentinel values (ErrNotFound,
// ErrStaleToken, ...), which match by code and class: a "not_leader" error
// is also ErrUnavailable, a "leader_timeout" error is also ErrOutcomeUnknown.
// Use errors.As to read the fields.
type Error struct {
	// Code is the server's error code ("not_found", "stale_token", ...) or a
	// client-side one ("connection_failed", "outcome_unknown").
	Code string
	// Message is the human-readable message.
	Message string
	// Field names the request field the error is about ("run_at",
	// "tasks[3].key"), or is empty.
	Field string
	// Status is the HTTP status of the answer, or 0 when no answer came.
	Status int
	// Node is the URL of the node that answered (or failed), when known.
	Node string
}

// Error returns "code: message (field F)".
func (e *Error) Error() string {
	s := e.Code + ": " + e.Message
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// Is reports whether target is an *Error whose Code is e's code or one of
// the classes e belongs to (see the sentinel values).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || t == nil {
		return false
	}
	for _, c := range e.classes() {
		if c == t.Code {
			return true
		}
	}
	return false
}

// classes returns e's code followed by the codes of the classes it belongs to.
func (e *Error) classes() []string {
	out := []string{e.Code}
	switch e.Code {
	case "already_exists":
		out = append(out, "conflict")
	case "aborted":
		out = append(out, "failed_precondition")
	case "resource_exhausted":
		out = append(out, "key_backlog_full")
	case "not_leader", "leader_unavailable", "store_unavailable", "connection_failed", "deadline_exceeded":
		out = append(out, "unavailable")
	case "leader_timeout", "leader_bad_response":
		out = append(out, "outcome_unknown")
	case "data_loss":
		out = append(out, "internal")
	case "invalid_argument", "unauthorized", "not_found", "method_not_allowed", "conflict",
		"failed_precondition", "stale_token", "lock_wait_timeout", "payload_too_large",
		"key_backlog_full", "request_header_fields_too_large", "unavailable", "internal",
		"outcome_unknown", "lock_lost":
	default:
		// An unknown code (a newer server's): its class follows the status.
		if c, ok := byStatus[e.Status]; ok {
			out = append(out, c)
		} else if e.Status >= 500 {
			out = append(out, "internal")
		}
	}
	if e.Code == "lock_lost" {
		out = append(out, "stale_token")
	}
	return out
}

var byStatus = map[int]string{
	400: "invalid_argument",
	401: "unauthorized",
	404: "not_found",
	405: "method_not_allowed",
	409: "failed_precondition",
	413: "payload_too_large",
	429: "key_backlog_full",
	431: "request_header_fields_too_large",
	503: "unavailable",
	504: "outcome_unknown",
}

// Sentinel errors, for errors.Is. Each matches every *Error of its code (and
// of the codes of its class).
var (
	// ErrInvalidArgument: 400, malformed JSON, a wrong type, a value out of
	// range or an unknown field; Field names it.
	ErrInvalidArgument = &Error{Code: "invalid_argument", Message: "invalid argument"}
	// ErrUnauthorized: 401, the bearer token is missing or wrong.
	ErrUnauthorized = &Error{Code: "unauthorized", Message: "unauthorized"}
	// ErrNotFound: 404, no such task, queue, schedule or endpoint.
	ErrNotFound = &Error{Code: "not_found", Message: "not found"}
	// ErrMethodNotAllowed: 405, the path exists, the method does not.
	ErrMethodNotAllowed = &Error{Code: "method_not_allowed", Message: "method not allowed"}
	// ErrConflict: 409, a client-chosen task id names an unfinished task
	// (OnConflict reject), or a new schedule's name is taken.
	ErrConflict = &Error{Code: "conflict", Message: "conflict"}
	// ErrFailedPrecondition: 409, the task is in the wrong state (cancelling
	// a running task, retrying a live one).
	ErrFailedPrecondition = &Error{Code: "failed_precondition", Message: "failed precondition"}
	// ErrStaleToken: 409, the lease or lock is no longer the caller's.
	ErrStaleToken = &Error{Code: "stale_token", Message: "stale token"}
	// ErrLockLost: a Lock's lease was lost (an extension was refused as
	// stale); it also matches ErrStaleToken.
	ErrLockLost = &Error{Code: "lock_lost", Message: "lock lost"}
	// ErrLockWaitTimeout: 409, the lock stayed held by another for the whole
	// wait; Field is "wait_ms".
	ErrLockWaitTimeout = &Error{Code: "lock_wait_timeout", Message: "lock wait timeout"}
	// ErrPayloadTooLarge: 413, the request body is over 1 MiB.
	ErrPayloadTooLarge = &Error{Code: "payload_too_large", Message: "payload too large"}
	// ErrKeyBacklogFull: 429, the task's key already has the queue's
	// max_pending_per_key tasks waiting to start; Field is "key".
	ErrKeyBacklogFull = &Error{Code: "key_backlog_full", Message: "key backlog full"}
	// ErrInternal: 500, a bug or a corrupt store, or an answer the client
	// does not understand.
	ErrInternal = &Error{Code: "internal", Message: "internal error"}
	// ErrUnavailable: 503 (unavailable, not_leader, leader_unavailable,
	// store_unavailable) or no node could be reached (ErrConnectionFailed):
	// retry later.
	ErrUnavailable = &Error{Code: "unavailable", Message: "unavailable"}
	// ErrConnectionFailed: no node could be connected to; nothing was sent.
	// It also matches ErrUnavailable.
	ErrConnectionFailed = &Error{Code: "connection_failed", Message: "connection failed"}
	// ErrOutcomeUnknown: the request was sent but its answer was lost; it
	// may or may not have been done.
	ErrOutcomeUnknown = &Error{Code: "outcome_unknown", Message: "outcome unknown"}
)

// errorFromJSON builds the *Error for an error object {code, message, field}.
func errorFromJSON(obj *errorBody, status int, node string) *Error {
	e := &Error{Status: status, Node: node}
	if obj != nil {
		e.Code, e.Message, e.Field = obj.Code, obj.Message, obj.Field
	}
	if e.Code == "" {
		if c, ok := byStatus[status]; ok {
			e.Code = c
		} else if status >= 500 {
			e.Code = "internal"
		} else {
			e.Code = "unknown"
		}
	}
	if e.Message == "" {
		e.Message = "HTTP " + strconv.Itoa(status)
	}
	return e
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

var batchField = regexp.MustCompile(`tasks\[(\d+)\]`)

// shiftBatchIndex rewrites "tasks[i]" to "tasks[i+offset]" in e's field and
// message, so that an error of a split batch names the caller's index.
func shiftBatchIndex(e *Error, offset int) {
	if offset == 0 {
		return
	}
	shift := func(s string) string {
		return batchField.ReplaceAllStringFunc(s, func(m string) string {
			n, _ := strconv.Atoi(batchField.FindStringSubmatch(m)[1])
			return fmt.Sprintf("tasks[%d]", n+offset)
		})
	}
	e.Field = shift(e.Field)
	e.Message = shift(e.Message)
}
