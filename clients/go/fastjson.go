package chronoq

// Fast JSON paths for the calls a busy worker makes most: a claim's answer
// (its leases and acknowledgement results) is read, and its body and an
// acknowledgement list are written, without reflection. encoding/json
// spent more CPU on a claim than chronoqd did (docs/BENCHMARKS.md, "The Go
// client"). The reader takes chronoqd's own form of the answer; anything
// else (an escaped key, a null where a value is expected, a number with a
// fraction, a key differing only in case) makes it give up, and the answer
// is decoded by encoding/json instead, so that the result is always the
// one encoding/json gives (fastjson_test.go checks this on generated and
// fuzzed answers).

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// claimAnswer decodes a claim's answer into out, knowing the claim.
type claimAnswer struct {
	out  *ClaimResult
	max  int       // the most leases the answer can hold
	acks []AckItem // the outcomes the claim carried
}

func (a *claimAnswer) decodeAnswer(body []byte) error {
	if decodeClaimFast(body, a.out, a.max, a.acks) {
		return nil
	}
	*a.out = ClaimResult{}
	return json.Unmarshal(body, a.out)
}

// jsonReader reads one JSON document from b; each method returns false
// when the input is not in the form it takes. What it returns does not
// refer to b, except the raw values (payloads) until copyPayloads.
type jsonReader struct {
	b []byte
	i int
	// last queue and state strings read, reused while they repeat
	queue, state string
	// leaseUntil holds the leases' lease ends (one allocation for all)
	leaseUntil []time.Time
	// id is the last lease id read, until finishLeases makes it a string
	// (one allocation for all the ids)
	id []byte
	// acks are the outcomes whose results are read: a result's id is
	// most likely its item's, whose string it then shares.
	acks []AckItem
}

func (r *jsonReader) skipSpace() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next returns the next byte after white space (0 at the end).
func (r *jsonReader) next() byte {
	r.skipSpace()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

// eat consumes c if it is the next byte.
func (r *jsonReader) eat(c byte) bool {
	if r.next() == c {
		r.i++
		return true
	}
	return false
}

// literal consumes the literal word (null, true, false).
func (r *jsonReader) literal(word string) bool {
	r.skipSpace()
	end := r.i + len(word)
	if end > len(r.b) || string(r.b[r.i:end]) != word || (end < len(r.b) && !isDelimiter(r.b[end])) {
		return false
	}
	r.i = end
	return true
}

func isDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '}', ']', ':':
		return true
	}
	return false
}

// rawString reads a string without escapes and returns its bytes (valid
// UTF-8); false for a string with escapes or control characters.
func (r *jsonReader) rawString() ([]byte, bool) {
	if r.next() != '"' {
		return nil, false
	}
	start := r.i + 1
	ascii := true
	for j := start; j < len(r.b); j++ {
		c := r.b[j]
		switch {
		case c == '"':
			s := r.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			r.i = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return r.escapedString(start)
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, false
}

// escapedString reads the string starting at b[start] (after its quote)
// that holds escapes, through encoding/json.
func (r *jsonReader) escapedString(start int) ([]byte, bool) {
	j := start
	for j < len(r.b) && r.b[j] != '"' {
		if r.b[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(r.b) {
		return nil, false
	}
	var s string
	if json.Unmarshal(r.b[start-1:j+1], &s) != nil {
		return nil, false
	}
	r.i = j + 1
	return []byte(s), true
}

func (r *jsonReader) string() (string, bool) {
	s, ok := r.rawString()
	return string(s), ok
}

// stringOrNull reads a string or null (nil).
func (r *jsonReader) stringOrNull() (*string, bool) {
	if r.next() == 'n' {
		return nil, r.literal("null")
	}
	s, ok := r.string()
	return &s, ok
}

// repeated reads a string, returning *last when it has the same text (no
// allocation for the queue and state every lease repeats).
func (r *jsonReader) repeated(last *string) (string, bool) {
	s, ok := r.rawString()
	if !ok {
		return "", false
	}
	if string(s) != *last {
		*last = string(s)
	}
	return *last, true
}

// digits reads an integer without fraction or exponent.
func (r *jsonReader) digits() (neg bool, v uint64, ok bool) {
	r.skipSpace()
	if r.i < len(r.b) && r.b[r.i] == '-' {
		neg = true
		r.i++
	}
	start := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		d := uint64(r.b[r.i] - '0')
		if v > (1<<64-1-d)/10 {
			return false, 0, false
		}
		v = v*10 + d
		r.i++
	}
	n := r.i - start
	if n == 0 || (n > 1 && r.b[start] == '0') || (r.i < len(r.b) && !isDelimiter(r.b[r.i])) {
		return false, 0, false
	}
	return neg, v, true
}

func (r *jsonReader) int() (int, bool) {
	neg, v, ok := r.digits()
	if !ok || v > 1<<62 {
		return 0, false
	}
	if neg {
		return -int(v), true
	}
	return int(v), true
}

func (r *jsonReader) uint() (uint64, bool) {
	neg, v, ok := r.digits()
	return v, ok && !neg
}

// time reads a time in chronoqd's form, YYYY-MM-DDTHH:MM:SS[.fraction]Z.
func (r *jsonReader) time() (time.Time, bool) {
	s, ok := r.rawString()
	if !ok {
		return time.Time{}, false
	}
	return parseTimeFast(s)
}

// parseTimeFast parses what time.Parse(time.RFC3339, s) parses into the
// same time when s is in UTC ("Z") with at most 9 fraction digits.
func parseTimeFast(s []byte) (time.Time, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
		s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	num := func(p []byte) int {
		v := 0
		for _, c := range p {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(s[0:4]), num(s[5:7]), num(s[8:10])
	hour, minute, sec := num(s[11:13]), num(s[14:16]), num(s[17:19])
	nsec := 0
	if frac := s[19 : len(s)-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		if nsec = num(frac[1:]); nsec < 0 {
			return time.Time{}, false
		}
		for i := len(frac) - 1; i < 9; i++ {
			nsec *= 10
		}
	}
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 ||
		minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // past the month's last day
		return time.Time{}, false
	}
	return t, true
}

// skip reads any JSON value and returns its bytes (checked by
// encoding/json's validator, so that only a valid value is taken).
func (r *jsonReader) skip() ([]byte, bool) {
	r.skipSpace()
	start := r.i
	depth := 0
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case '"':
			for r.i++; r.i < len(r.b) && r.b[r.i] != '"'; r.i++ {
				if r.b[r.i] == '\\' {
					r.i++
				}
			}
			if r.i >= len(r.b) {
				return nil, false
			}
			if depth == 0 {
				r.i++
				return r.checked(start)
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // a scalar's end
				return r.checked(start)
			}
			if depth--; depth == 0 {
				r.i++
				return r.checked(start)
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return r.checked(start)
			}
		}
		r.i++
	}
	return r.checked(start)
}

// decode reads a value into v through encoding/json (for the rare nested
// objects: a webhook target, an error).
func (r *jsonReader) decode(v any) bool {
	raw, ok := r.skip()
	return ok && json.Unmarshal(raw, v) == nil
}

func (r *jsonReader) checked(start int) ([]byte, bool) {
	v := r.b[start:r.i:r.i]
	return v, len(v) > 0 && json.Valid(v)
}

// object reads an object, calling field for each key with the reader at
// its value; field returns false to give up.
func (r *jsonReader) object(field func(key []byte) bool) bool {
	if !r.eat('{') {
		return false
	}
	if r.eat('}') {
		return true
	}
	for {
		key, ok := r.rawString()
		if !ok || !r.eat(':') || !field(key) {
			return false
		}
		if r.eat('}') {
			return true
		}
		if !r.eat(',') {
			return false
		}
	}
}

// array reads an array, calling elem for each element.
func (r *jsonReader) array(elem func() bool) bool {
	if !r.eat('[') {
		return false
	}
	if r.eat(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if r.eat(']') {
			return true
		}
		if !r.eat(',') {
			return false
		}
	}
}

// unknown skips the value of a key the reader does not know, giving up on
// a key encoding/json would match to a known one regardless of case.
func (r *jsonReader) unknown(key []byte, known []string) bool {
	for _, k := range known {
		if strings.EqualFold(string(key), k) {
			return false
		}
	}
	_, ok := r.skip()
	return ok
}

var leaseKeys = []string{"id", "queue", "key", "payload", "run_at", "attempt", "max_attempts", "state",
	"priority", "last_error", "last_response", "worker", "lease_until", "target", "created_at", "updated_at",
	"token"}

// lease reads one lease (a task with its token) into l, but for its id
// (left in r.id).
func (r *jsonReader) lease(l *Lease) bool {
	r.id = nil
	return r.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "id":
			r.id, ok = r.rawString()
		case "queue":
			l.Queue, ok = r.repeated(&r.queue)
		case "key":
			l.Key, ok = r.stringOrNull()
		case "payload":
			var v []byte
			v, ok = r.skip()
			l.Payload = json.RawMessage(v)
		case "run_at":
			l.RunAt, ok = r.time()
		case "attempt":
			l.Attempt, ok = r.int()
		case "max_attempts":
			l.MaxAttempts, ok = r.int()
		case "state":
			l.State, ok = r.repeated(&r.state)
		case "priority":
			l.Priority, ok = r.int()
		case "last_error":
			l.LastError, ok = r.stringOrNull()
		case "last_response":
			l.LastResponse, ok = r.stringOrNull()
		case "worker":
			l.Worker, ok = r.stringOrNull()
		case "lease_until":
			if r.next() == 'n' {
				l.LeaseUntil, ok = nil, r.literal("null")
				break
			}
			var t time.Time
			if t, ok = r.time(); ok {
				if len(r.leaseUntil) == cap(r.leaseUntil) {
					r.leaseUntil = make([]time.Time, 0, 64)
				}
				r.leaseUntil = append(r.leaseUntil, t)
				l.LeaseUntil = &r.leaseUntil[len(r.leaseUntil)-1]
			}
		case "created_at":
			l.CreatedAt, ok = r.time()
		case "updated_at":
			l.UpdatedAt, ok = r.time()
		case "token":
			l.Token, ok = r.uint()
		case "target":
			ok = r.decode(&l.Target)
		default:
			return r.unknown(key, leaseKeys)
		}
		return ok
	})
}

var ackResultKeys = []string{"id", "ok", "error"}

// ackResult reads one {id, ok, error?}.
func (r *jsonReader) ackResult(a *AckResult, index int) bool {
	var raw ackResultJSON
	done := r.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "id":
			var id []byte
			if id, ok = r.rawString(); ok {
				if index < len(r.acks) && string(id) == r.acks[index].ID {
					raw.ID = r.acks[index].ID
				} else {
					raw.ID = string(id)
				}
			}
		case "ok":
			switch r.next() {
			case 't':
				raw.OK, ok = true, r.literal("true")
			case 'f':
				raw.OK, ok = false, r.literal("false")
			}
		case "error":
			ok = r.decode(&raw.Error)
		default:
			return r.unknown(key, ackResultKeys)
		}
		return ok
	})
	if done {
		raw.into(a)
	}
	return done
}

// finishLeases gives the leases their ids, from one string, and copies
// their payloads, which point into the answer's buffer, into one slice.
func finishLeases(leases []Lease, ids [][]byte) {
	var b strings.Builder
	total := 0
	for _, id := range ids {
		total += len(id)
	}
	b.Grow(total)
	for _, id := range ids {
		b.Write(id)
	}
	all, off := b.String(), 0
	for i, id := range ids {
		leases[i].ID = all[off : off+len(id)]
		off += len(id)
	}

	total = 0
	for i := range leases {
		total += len(leases[i].Payload)
	}
	payloads := make([]byte, 0, total)
	for i := range leases {
		p := leases[i].Payload
		if p == nil {
			continue
		}
		start := len(payloads)
		payloads = append(payloads, p...)
		leases[i].Payload = payloads[start:len(payloads):len(payloads)]
	}
}

var claimKeys = []string{"tasks", "acks"}

// decodeClaimFast decodes a claim's answer in chronoqd's form into out;
// false when it is not in that form (out is then partly filled). max and
// acks are the claim's: they size the allocations (0 and nil will do).
func decodeClaimFast(body []byte, out *ClaimResult, max int, acks []AckItem) bool {
	r := &jsonReader{b: body, acks: acks}
	ok := r.object(func(key []byte) bool {
		switch string(key) {
		case "tasks":
			if r.next() == 'n' {
				out.Tasks = nil
				return r.literal("null")
			}
			// The leases are allocated together; the pointers point into them.
			// (A lease takes over 128 bytes: a long poll for many that gets
			// few allocates for few.)
			n := max
			if n > len(body)/128 {
				n = len(body) / 128
			}
			leases := make([]Lease, 0, n)
			ids := make([][]byte, 0, n)
			r.leaseUntil = make([]time.Time, 0, n)
			if !r.array(func() bool {
				leases = append(leases, Lease{})
				ok := r.lease(&leases[len(leases)-1])
				ids = append(ids, r.id)
				return ok
			}) {
				return false
			}
			finishLeases(leases, ids)
			out.Tasks = make([]*Lease, len(leases))
			for i := range leases {
				out.Tasks[i] = &leases[i]
			}
			return true
		case "acks":
			if r.next() == 'n' {
				out.Acks = nil
				return r.literal("null")
			}
			results := make([]AckResult, 0, len(acks))
			if !r.array(func() bool {
				results = append(results, AckResult{})
				return r.ackResult(&results[len(results)-1], len(results)-1)
			}) {
				return false
			}
			out.Acks = results
			return true
		default:
			return r.unknown(key, claimKeys)
		}
	})
	return ok && r.next() == 0 && r.i == len(r.b)
}

// --- writing ---------------------------------------------------------------

// appendString appends s as a JSON string, as encoding/json writes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(s) // a string always encodes
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendAck appends one entry of acks.
func appendAck(b []byte, a AckItem) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, a.ID)
	b = append(b, `,"token":`...)
	b = strconv.AppendUint(b, a.Token, 10)
	if a.Failure || a.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, a.Error)
		if a.RetryIn > 0 {
			b = append(b, `,"retry_in_ms":`...)
			b = strconv.AppendInt(b, a.RetryIn.Milliseconds(), 10)
		}
	}
	return append(b, '}')
}

// appendAcks appends `"acks":[...]`.
func appendAcks(b []byte, items []AckItem) []byte {
	b = append(b, `"acks":[`...)
	for i, a := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAck(b, a)
	}
	return append(b, ']')
}
