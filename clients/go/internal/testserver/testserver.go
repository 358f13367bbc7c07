// Package testserver starts a real chronoqd for tests: on a free port, with
// a temporary data directory, stopped with SIGTERM. A chronoqd started with
// --test-clock (StartTestClock) keeps its time still until a test moves it
// (Clock, Advance).
package testserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// DefaultBinary is the chronoqd used when $CHRONOQD is not set: the
// checkout's developer build (build/dev, see the top-level Makefile).
func DefaultBinary() string {
	_, file, _, _ := runtime.Caller(0) // .../clients/go/internal/testserver/testserver.go
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	return filepath.Join(root, "build", "dev", "src", "server", "chronoqd")
}

// MakeCerts writes a throwaway CA and a server certificate it signed into
// dir, with the checkout's tests/support/make-test-certs.sh: ca.pem,
// server.pem and server.key (for chronoqd --tls-cert, --tls-key),
// other-ca.pem (a CA that signed nothing) and other.key.
func MakeCerts(dir string) error {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "tests", "support", "make-test-certs.sh")
	out, err := exec.Command("bash", script, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("make-test-certs.sh: %v: %s", err, out)
	}
	return nil
}

// Main starts chronoqd, runs the package's tests with *server set to it,
// stops it and exits with the tests' status: a test package's TestMain.
// Each atEnd runs after the tests (stopping servers the tests started
// lazily); an error fails the run.
func Main(m *testing.M, server **Server, atEnd ...func() error) {
	s, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting chronoqd:", err)
		os.Exit(1)
	}
	*server = s
	code := m.Run()
	for _, f := range atEnd {
		if err := f(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// StartTestClock is Start with --test-clock: chronoqd's time stands still
// until Advance moves it.
func StartTestClock() (*Server, error) { return StartWith("", "--test-clock") }

// ClockState is GET /v1/test/clock's answer: the server's time and the
// deadlines its threads wait for, earliest first.
type ClockState struct {
	Now   time.Time   `json:"now"`
	Waits []time.Time `json:"waits"`
}

// Waiting says whether one of the server's waits ends at t.
func (c ClockState) Waiting(t time.Time) bool {
	for _, w := range c.Waits {
		if w.Equal(t) {
			return true
		}
	}
	return false
}

// Clock returns the time of a --test-clock server and its waits.
func (s *Server) Clock() (ClockState, error) {
	return s.clockCall("GET", nil)
}

// Advance moves a --test-clock server's time forward by d (whole
// milliseconds); it returns once the server has acted on the new time (due
// tasks handed out, lapsed leases and locks freed, waits that ran out
// answered).
func (s *Server) Advance(d time.Duration) (ClockState, error) {
	return s.clockCall("POST", map[string]int64{"advance_ms": d.Milliseconds()})
}

func (s *Server) clockCall(method string, body any) (ClockState, error) {
	var st ClockState
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return st, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+"/v1/test/clock", rd)
	if err != nil {
		return st, err
	}
	client := http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s /v1/test/clock: %s: %s", method, resp.Status, data)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%s /v1/test/clock: %v: %s", method, err, data)
	}
	return st, nil
}

// Server is a running chronoqd.
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:PORT; https:// with --tls-cert).
	URL  string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
	// killed: Kill ended it, so its exit status says nothing.
	killed bool

	mu  sync.Mutex
	log strings.Builder
}

var listening = regexp.MustCompile(`listening on (https?://[0-9.]+:\d+)`)

// Start starts chronoqd ($CHRONOQD, else DefaultBinary) with --listen
// 127.0.0.1:0 and waits up to 30 s for its "listening on" line.
func Start() (*Server, error) { return StartWithToken("") }

// StartWithToken is Start with a bearer token every request but /healthz
// needs ("" for none).
func StartWithToken(token string) (*Server, error) { return StartWith(token) }

// StartWith is Start with a token ("" for none) and more arguments (a
// cluster node's --cluster --store ...).
func StartWith(token string, extra ...string) (*Server, error) {
	bin := os.Getenv("CHRONOQD")
	if bin == "" {
		bin = DefaultBinary()
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("chronoqd not found at %s (set CHRONOQD): %v", bin, err)
	}
	dir, err := os.MkdirTemp("", "chronoq-go-")
	if err != nil {
		return nil, err
	}
	args := []string{"--data", dir, "--listen", "127.0.0.1:0"}
	if token != "" {
		tf := filepath.Join(dir, "token")
		if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--token-file", tf)
	}
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHRONOQ_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{cmd: cmd, dir: dir, done: make(chan struct{})}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.log.WriteString(line + "\n")
			s.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil && !sent {
				urlc <- m[1]
				sent = true
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case u := <-urlc:
		s.URL = u
		return s, nil
	case <-s.done:
		err = fmt.Errorf("chronoqd exited before saying 'listening on': %s", s.Log())
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("chronoqd did not say 'listening on' within 30 s: %s", s.Log())
	}
	_ = s.Stop()
	return nil, err
}

// Log returns what chronoqd printed so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Kill ends chronoqd as a crash of its machine would (SIGKILL), waits for
// the exit and removes the data directory.
func (s *Server) Kill() {
	s.killed = true
	_ = s.cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}

// Stop sends SIGTERM, waits up to 30 s for the exit (then kills), and
// removes the data directory. Unless Kill ended it before, chronoqd must
// exit 0: an error says otherwise (a crash at shutdown, or a sanitizer's
// report: the tests run the ASan+UBSan build, whose LeakSanitizer checks at
// exit), with chronoqd's log.
func (s *Server) Stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		os.RemoveAll(s.dir)
		return fmt.Errorf("chronoqd did not exit within 30 s of SIGTERM: %s", s.Log())
	}
	os.RemoveAll(s.dir)
	if code := s.cmd.ProcessState.ExitCode(); code != 0 && !s.killed {
		return fmt.Errorf("chronoqd exited with %d after SIGTERM: %s", code, s.Log())
	}
	return nil
}

// StopAtEnd stops s when t ends, failing t if Stop fails.
func (s *Server) StopAtEnd(t testing.TB) {
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
}
