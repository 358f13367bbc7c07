package chronoq_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"chronoq"
)

// The fast path must give exactly what encoding/json gives, or give up.

// checkClaimDecoding fails the test if the fast path took body and its
// result differs from encoding/json's (or encoding/json refuses body).
// It returns whether the fast path took it.
func checkClaimDecoding(t *testing.T, body []byte) bool {
	t.Helper()
	var ref chronoq.ClaimResult
	refErr := json.Unmarshal(body, &ref)
	// Without what the claim asked, and with it (the result ids "a" and
	// "b" of two outcomes then share the outcomes' strings).
	hints := []struct {
		max  int
		acks []chronoq.AckItem
	}{{0, nil}, {2, []chronoq.AckItem{{ID: "a", Token: 1}, {ID: "b", Token: 2}}}}
	var took []bool
	for _, h := range hints {
		var fast chronoq.ClaimResult
		ok := chronoq.DecodeClaimFast(body, &fast, h.max, h.acks)
		took = append(took, ok)
		if !ok {
			continue
		}
		if refErr != nil {
			t.Fatalf("fast path took %q, which encoding/json refuses: %v", body, refErr)
		}
		if !reflect.DeepEqual(fast, ref) {
			fj, _ := json.Marshal(fast)
			rj, _ := json.Marshal(ref)
			t.Fatalf("fast path and encoding/json differ on %q:\nfast: %s\nref:  %s", body, fj, rj)
		}
	}
	if took[0] != took[1] {
		t.Fatalf("the fast path took %q only with the claim's hints or only without", body)
	}
	return took[0]
}

// A lease as chronoqd writes it, then variations of it.
const canonicalLease = `{"id":"_01a217c96ef50000","queue":"q","key":null,"payload":{"i":1},` +
	`"run_at":"2026-11-26T12:16:46.837Z","attempt":1,"max_attempts":25,"state":"running","token":1,` +
	`"lease_until":"2026-11-26T12:17:16.862Z"}`

var claimBodies = []struct {
	name string
	body string
	fast bool // the fast path must take it
}{
	{"canonical", `{"tasks":[` + canonicalLease + `]}`, true},
	{"two leases and ack results", `{"tasks":[` + canonicalLease + `,` + canonicalLease + `],"acks":[` +
		`{"id":"a","ok":true},{"id":"b","ok":false,"error":{"code":"stale_token","message":"m","field":"acks[1].token"}}]}`, true},
	{"no tasks", `{"tasks":[]}`, true},
	{"null tasks", `{"tasks":null,"acks":null}`, true},
	{"empty acks", `{"tasks":[],"acks":[]}`, true},
	{"every task field", `{"tasks":[{"id":"x","queue":"q","key":"k","payload":[1,"a\"]}",{"b":null}],` +
		`"run_at":"2026-01-31T23:59:59Z","attempt":3,"max_attempts":5,"state":"running","priority":-7,` +
		`"last_error":"boom","last_response":"HTTP 500","worker":"host-1:42","lease_until":null,` +
		`"target":{"url":"http://h/x","method":"PUT","headers":{"A":"b"},"timeout_ms":5},` +
		`"created_at":"2026-01-01T00:00:00.1Z","updated_at":"2026-01-01T00:00:00.123456789Z","token":18446744073709551615}]}`, true},
	{"white space", " {\n\t\"tasks\" : [ {\"id\" : \"x\" , \"payload\" : { \"a\" : [ 1 , 2 ] } , \"token\" : 2 } ] } \n", true},
	{"escapes and unicode", `{"tasks":[{"id":"caf\u00e9 \"x\"\n","queue":"é","key":"\ud83d\ude00","payload":"\\","token":3}]}`, true},
	{"unknown fields", `{"tasks":[{"id":"x","future":{"a":[1,{"b":"}"}]},"more":-1.5e3,"token":4}],"next":"x"}`, true},
	{"payload null", `{"tasks":[{"id":"x","payload":null,"token":5}]}`, true},
	{"payload string with brackets", `{"tasks":[{"id":"x","payload":"]}{[","token":6}]}`, true},
	{"target null", `{"tasks":[{"id":"x","target":null,"token":7}]}`, true},
	{"duplicate keys", `{"tasks":[{"id":"x","id":"y","key":"a","key":null,"token":8}]}`, true},
	{"duplicate targets merge", `{"tasks":[{"id":"x","target":{"url":"a","method":"PUT"},"target":{"url":"b"}}],` +
		`"acks":[{"id":"a","ok":false,"error":{"code":"c","field":"f"},"error":{"message":"m"}}]}`, true},
	// Forms the fast path leaves to encoding/json (which may refuse them).
	{"key differing in case", `{"tasks":[{"ID":"x","token":1}]}`, false},
	{"time with an offset", `{"tasks":[{"id":"x","run_at":"2026-11-26T12:16:46+09:00"}]}`, false},
	{"time with ten fraction digits", `{"tasks":[{"id":"x","run_at":"2026-11-26T12:16:46.1234567891Z"}]}`, false},
	{"null time", `{"tasks":[{"id":"x","run_at":null}]}`, false},
	{"fraction", `{"tasks":[{"id":"x","attempt":1.0}]}`, false},
	{"leading zero", `{"tasks":[{"id":"x","attempt":01}]}`, false},
	{"negative token", `{"tasks":[{"id":"x","token":-1}]}`, false},
	{"token too large", `{"tasks":[{"id":"x","token":18446744073709551616}]}`, false},
	{"null lease", `{"tasks":[null]}`, false},
	{"bad payload", `{"tasks":[{"id":"x","payload":{"a":}}]}`, false},
	{"bad literal", `{"tasks":[{"id":"x","payload":nul}]}`, false},
	{"invalid UTF-8", "{\"tasks\":[{\"id\":\"\xff\"}]}", false},
	{"control character", "{\"tasks\":[{\"id\":\"a\x01\"}]}", false},
	{"day past the month", `{"tasks":[{"id":"x","run_at":"2026-02-30T00:00:00Z"}]}`, false},
	{"hour 24", `{"tasks":[{"id":"x","run_at":"2026-02-03T24:00:00Z"}]}`, false},
	{"trailing garbage", `{"tasks":[]}x`, false},
	{"truncated", `{"tasks":[{"id":"x"`, false},
	{"not an object", `[]`, false},
	{"ok as a string", `{"acks":[{"id":"a","ok":"true"}]}`, false},
}

func TestFastClaimDecodingMatchesEncodingJSON(t *testing.T) {
	for _, tc := range claimBodies {
		t.Run(tc.name, func(t *testing.T) {
			took := checkClaimDecoding(t, []byte(tc.body))
			if tc.fast && !took {
				t.Fatalf("the fast path gave up on %s", tc.body)
			}
			if !tc.fast && took {
				t.Fatalf("the fast path took %s, which it should leave to encoding/json", tc.body)
			}
		})
	}
}

// Every prefix and every one-byte change of the bodies above: whatever the
// fast path takes decodes as encoding/json decodes it.
func TestFastClaimDecodingOnDamagedBodies(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte(`{}[],:"\ 0123456789.-+eEtruefalsn` + "\x00\xc3\xa9")
	for _, tc := range claimBodies {
		b := []byte(tc.body)
		for n := 0; n < len(b); n++ {
			checkClaimDecoding(t, b[:n])
		}
		for i := 0; i < 400; i++ {
			d := append([]byte(nil), b...)
			d[rng.Intn(len(d))] = alphabet[rng.Intn(len(alphabet))]
			checkClaimDecoding(t, d)
		}
	}
}

func FuzzFastClaimDecoding(f *testing.F) {
	for _, tc := range claimBodies {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkClaimDecoding(t, body) })
}

// The times chronoqd writes parse as time.Parse(time.RFC3339) parses them.
func TestParseTimeFastMatchesTimeParse(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 20000; i++ {
		tm := time.Unix(rng.Int63n(1<<34), rng.Int63n(1e9)).UTC()
		for _, layout := range []string{"2006-01-02T15:04:05Z", "2006-01-02T15:04:05.000Z",
			"2006-01-02T15:04:05.000000Z", time.RFC3339Nano} {
			s := tm.Format(layout)
			got, ok := chronoq.ParseTimeFast([]byte(s))
			want, err := time.Parse(time.RFC3339, s)
			if !ok || err != nil || got != want {
				t.Fatalf("%s: fast %v %v, time.Parse %v %v", s, got, ok, want, err)
			}
		}
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "abc", "_01a217c96ef50000", `a"b`, `a\b`, "a\nb", "<&>", "é", "\u2028",
		"\xff", "tab\t", strings.Repeat("x", 300)} {
		want, _ := json.Marshal(s)
		if got := chronoq.AppendString([]byte("p"), s); string(got) != "p"+string(want) {
			t.Fatalf("%q: got %s, want p%s", s, got, want)
		}
	}
}

// C5: a real claim's answer, with payloads and keys that need escapes,
// takes the fast path and decodes as encoding/json decodes it.
func TestC5ClaimAnswerTakesTheFastPath(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	payloads := []any{map[string]any{"i": 1}, "caf\u00e9 \"quoted\"\n", []any{1.5, nil, true, "}]"}, nil,
		map[string]any{"deep": map[string]any{"a": []any{"<&>"}}}}
	for i, p := range payloads {
		spec := chronoq.TaskSpec{Queue: q, Payload: p, Priority: i - 2}
		if i%2 == 0 {
			spec.Key = "k\u00e9y\"\\" + string(rune('a'+i))
		}
		_, err := c.Enqueue(ctx, spec)
		must(t, err)
	}
	resp, err := http.Post(server.URL+"/v1/queues/"+q+"/claim", "application/json",
		bytes.NewReader([]byte(`{"max":10,"lease_ms":60000}`)))
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	if resp.StatusCode != 200 {
		t.Fatalf("claim: HTTP %d: %s", resp.StatusCode, body)
	}
	if !checkClaimDecoding(t, body) {
		t.Fatalf("the fast path gave up on chronoqd's answer %s", body)
	}
	var res chronoq.ClaimResult
	chronoq.DecodeClaimFast(body, &res, 10, nil)
	if len(res.Tasks) != len(payloads) || res.Tasks[0].LeaseUntil == nil {
		t.Fatalf("claimed %d of %d tasks: %s", len(res.Tasks), len(payloads), body)
	}
}

// Answer buffers are reused: the leases of one claim keep their payloads
// while later claims are read.
func TestC5LeasesOutliveTheAnswerBuffer(t *testing.T) {
	c, ctx, q := newClient(t), testCtx(t), newQueue(t)
	var specs []chronoq.TaskSpec
	for i := 0; i < 60; i++ {
		specs = append(specs, chronoq.TaskSpec{Queue: q, Payload: strings.Repeat(string(rune('a'+i%26)), 50+i)})
	}
	_, err := c.EnqueueMany(ctx, specs)
	must(t, err)
	var kept []*chronoq.Lease
	for len(kept) < len(specs) {
		res, err := c.Claim(ctx, q, chronoq.ClaimOptions{Max: 7, Lease: time.Minute})
		must(t, err)
		if len(res.Tasks) == 0 {
			t.Fatalf("claimed %d of %d tasks, then none", len(kept), len(specs))
		}
		kept = append(kept, res.Tasks...)
	}
	seen := map[string]bool{}
	for _, l := range kept {
		var p string
		must(t, l.Decode(&p))
		if len(p) < 50 || strings.Count(p, p[:1]) != len(p) || seen[p] {
			t.Fatalf("task %s has payload %q after later claims", l.ID, p)
		}
		seen[p] = true
	}
}
