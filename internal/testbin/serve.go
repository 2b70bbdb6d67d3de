package testbin

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ServeOptions says how Serve starts `readpast serve`.
type ServeOptions struct {
	// DatabaseURL is the store to serve; empty: a SQLite database in a
	// temporary folder of the test.
	DatabaseURL string
	// Token is the server's only (full-access) token; empty: one from
	// Token(t).
	Token string
	// Env is added to the server's environment (after this process's,
	// without its READPAST_ variables).
	Env []string
	// Args are added to the serve command's arguments.
	Args []string
}

// Server is a running `readpast serve`.
type Server struct {
	URL   string // http://127.0.0.1:port
	Token string
	Pid   int
	logs  func() string
}

// Logs returns what the server has written to its standard error so far.
func (s *Server) Logs() string { return s.logs() }

// Token returns a full-access token of 32 random bytes, hex-encoded.
func Token(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Environ is this process's environment without readpast's own variables.
func Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "READPAST_") {
			env = append(env, kv)
		}
	}
	return env
}

// Serve starts `readpast serve` on a free loopback port, waits until it
// listens, and stops it at the end of the test: SIGTERM to its process,
// then a check of its exit (SIGKILL after 30 seconds). The token goes in
// the environment, not in the arguments `ps` shows.
func (b *Readpast) Serve(t testing.TB, o ServeOptions) *Server {
	t.Helper()
	bin := b.Path(t)
	db := o.DatabaseURL
	if db == "" {
		db = filepath.Join(t.TempDir(), "readpast.db")
	}
	token := o.Token
	if token == "" {
		token = Token(t)
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--database-url", db}, o.Args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(Environ(), o.Env...), "READPAST_TOKENS="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log strings.Builder
	logs := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	addr := make(chan string, 1)
	exited := make(chan struct{}) // closed once waitErr is set
	var waitErr error
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			log.WriteString(line + "\n")
			mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				select {
				case addr <- rec.Addr:
				default:
				}
			}
		}
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("SIGTERM to readpast serve (pid %d): %v", cmd.Process.Pid, err)
		}
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("readpast serve exited with %v after SIGTERM\n%s", waitErr, logs())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("readpast serve (pid %d) did not stop within 30s of SIGTERM\n%s", cmd.Process.Pid, logs())
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs())
		}
	})
	select {
	case a := <-addr:
		return &Server{URL: fmt.Sprint("http://", a), Token: token, Pid: cmd.Process.Pid, logs: logs}
	case <-exited:
		t.Fatalf("readpast serve exited: %v\n%s", waitErr, logs())
	case <-time.After(time.Minute):
		t.Fatalf("readpast serve did not start within a minute\n%s", logs())
	}
	return nil
}

// Call sends a request to the server with its token and hdr, fails t
// unless the answer has status want, and decodes the answer into out
// (unless out is nil).
func (s *Server) Call(t testing.TB, method, path, body string, hdr map[string]string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}
