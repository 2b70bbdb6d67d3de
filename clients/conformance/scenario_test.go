package conformance_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// protocol is the first line every driver writes: its hello names it.
const protocol = "readpast-conformance/1"

// scenario is one file of scenarios/: steps run in order against one
// driver process.
type scenario struct {
	Name        string `json:"-"`
	Description string `json:"description"`
	// Exclusive scenarios measure time: they run while no other scenario
	// runs, on any store or driver, so that the rest of the suite does not
	// load the machine under them.
	Exclusive bool   `json:"exclusive,omitempty"`
	Steps     []step `json:"steps"`
}

// step is one operation and what it must give.
type step struct {
	// Op is the driver operation, or "sleep" (done by the runner).
	Op string `json:"op"`
	// Note says what the step checks, for people and failure messages.
	Note string `json:"note,omitempty"`
	// Args are sent to the driver after ${variables} are replaced.
	Args map[string]any `json:"args,omitempty"`
	// Seconds is how long a sleep step sleeps.
	Seconds float64 `json:"seconds,omitempty"`
	// Expect is what the value must match; ExpectError what the error
	// must match. With neither, the step must succeed.
	Expect      json.RawMessage `json:"expect,omitempty"`
	ExpectError json.RawMessage `json:"expect_error,omitempty"`
	// Save names variables to set from the value: name -> path
	// ("jobs.0.token").
	Save map[string]string `json:"save,omitempty"`
	// TimeoutSeconds bounds the step (default 60).
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// loadScenarios reads every scenarios/*.json, strictly: an unknown field
// or a step without an op fails the test.
func loadScenarios(t *testing.T) []*scenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("scenarios", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios in scenarios/*.json")
	}
	var out []*scenario
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sc scenario
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		sc.Name = strings.TrimSuffix(filepath.Base(f), ".json")
		if len(sc.Steps) == 0 {
			t.Fatalf("%s: no steps", f)
		}
		for i, st := range sc.Steps {
			if st.Op == "" {
				t.Fatalf("%s: step %d has no op", f, i+1)
			}
			if st.Expect != nil && st.ExpectError != nil {
				t.Fatalf("%s: step %d has both expect and expect_error", f, i+1)
			}
		}
		out = append(out, &sc)
	}
	return out
}

// reply is one line a driver writes for a request.
type reply struct {
	Seq   int             `json:"seq"`
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value"`
	Error json.RawMessage `json:"error"`
}

// session is one driver process speaking the protocol.
type session struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	stderr *lockedBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit, once done is closed
	hello  map[string]any
}

// lockedBuffer collects a process's standard error.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSession starts argv with env and reads its hello.
func startSession(t *testing.T, argv, env []string) *session {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	// A group of its own: a driver that hangs is killed with the worker
	// processes it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &session{cmd: cmd, lines: make(chan string, 16), stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	var err error
	if s.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the driver %q: %v", argv, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.close(t) })
	line, err := s.next(30 * time.Second)
	if err != nil {
		t.Fatalf("driver %q: no hello: %v\nstderr:\n%s", argv, err, s.stderr.String())
	}
	if err := json.Unmarshal([]byte(line), &s.hello); err != nil || s.hello["hello"] != protocol {
		t.Fatalf("driver %q: the first line is not a %s hello: %s\nstderr:\n%s", argv, protocol, line, s.stderr.String())
	}
	return s
}

// next returns the driver's next line of output.
func (s *session) next(timeout time.Duration) (string, error) {
	select {
	case line, ok := <-s.lines:
		if !ok {
			<-s.done
			return "", fmt.Errorf("the driver exited: %v", s.err)
		}
		return line, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("no answer within %s", timeout)
	}
}

// close ends stdin and waits for the driver to exit (killing it after 15
// seconds); an exit other than 0 fails t.
func (s *session) close(t *testing.T) {
	_ = s.in.Close()
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		t.Errorf("the driver (pid %d) did not exit within 15s of the end of its input: killed with its process group", s.cmd.Process.Pid)
	}
	if s.err != nil {
		t.Errorf("the driver exited with %v\nstderr:\n%s", s.err, s.stderr.String())
	}
}

// call sends one request and returns the driver's reply.
func (s *session) call(seq int, op string, args any, timeout time.Duration) (reply, error) {
	req, err := json.Marshal(map[string]any{"seq": seq, "op": op, "args": args})
	if err != nil {
		return reply{}, err
	}
	if _, err := s.in.Write(append(req, '\n')); err != nil {
		return reply{}, fmt.Errorf("writing to the driver: %w", err)
	}
	line, err := s.next(timeout)
	if err != nil {
		return reply{}, err
	}
	var r reply
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return reply{}, fmt.Errorf("the driver's answer is not JSON: %w: %.500s", err, line)
	}
	if r.Seq != seq {
		return reply{}, fmt.Errorf("the driver answered request %d, want %d: %.500s", r.Seq, seq, line)
	}
	return r, nil
}

// run runs sc's steps on a new driver session and fails t at the first
// step whose outcome does not match (later steps build on it).
func (sc *scenario) run(t *testing.T, argv, env []string, vars map[string]any) {
	s := startSession(t, argv, env)
	for i, st := range sc.Steps {
		where := fmt.Sprintf("step %d (%s)", i+1, st.Op)
		if st.Note != "" {
			where += ": " + st.Note
		}
		if st.Op == "sleep" {
			time.Sleep(time.Duration(st.Seconds * float64(time.Second)))
			continue
		}
		args, err := resolve(map[string]any(st.Args), vars)
		if err != nil {
			t.Fatalf("%s: args: %v", where, err)
		}
		if args == nil {
			args = map[string]any{}
		}
		timeout := 60 * time.Second
		if st.TimeoutSeconds > 0 {
			timeout = time.Duration(st.TimeoutSeconds * float64(time.Second))
		}
		started := time.Now()
		r, err := s.call(i+1, st.Op, args, timeout)
		now := time.Now()
		if err != nil {
			t.Fatalf("%s: %v\ndriver stderr:\n%s", where, err, s.stderr.String())
		}
		t.Logf("%s: %s in %s", where, outcome(r), now.Sub(started).Round(time.Millisecond))
		if err := st.check(r, vars, now); err != nil {
			t.Fatalf("%s:\n%v\ndriver stderr:\n%s", where, err, s.stderr.String())
		}
	}
}

func outcome(r reply) string {
	if r.OK {
		return "ok " + showN(decodeRaw(r.Value), 2000)
	}
	return "error " + showN(decodeRaw(r.Error), 2000)
}

func decodeRaw(raw json.RawMessage) any {
	var v any
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}

// check compares r with the step's expectation and saves its variables.
func (st *step) check(r reply, vars map[string]any, now time.Time) error {
	if st.ExpectError != nil {
		if r.OK {
			return fmt.Errorf("want an error matching %s, got success: %s", st.ExpectError, show(decodeRaw(r.Value)))
		}
		return compare(st.ExpectError, decodeRaw(r.Error), vars, now)
	}
	if !r.OK {
		return fmt.Errorf("want success, got error %s", show(decodeRaw(r.Error)))
	}
	value := decodeRaw(r.Value)
	// Saved first, so that the expectation may refer to the value's own
	// fields ("the job claimed is the job enqueued").
	names := make([]string, 0, len(st.Save))
	for name := range st.Save {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v, err := lookup(value, st.Save[name])
		if err != nil {
			return fmt.Errorf("save %s: %w", name, err)
		}
		vars[name] = v
	}
	if st.Expect != nil {
		return compare(st.Expect, value, vars, now)
	}
	return nil
}

func compare(raw json.RawMessage, got any, vars map[string]any, now time.Time) error {
	var want any
	if err := json.Unmarshal(raw, &want); err != nil {
		return fmt.Errorf("the expectation is not JSON: %w", err)
	}
	want, err := resolve(want, vars)
	if err != nil {
		return fmt.Errorf("expectation: %w", err)
	}
	if diffs := match(want, got, now); len(diffs) > 0 {
		return fmt.Errorf("outcome %s\ndoes not match %s:\n  %s", show(got), show(want), strings.Join(diffs, "\n  "))
	}
	return nil
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// resolve replaces ${name} in the strings of v: a string that is only a
// reference becomes the variable's value (a number stays a number), a
// reference inside a longer string its text. An unknown name is an error.
func resolve(v any, vars map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		if m := varRef.FindStringSubmatch(x); m != nil && m[0] == x {
			val, ok := vars[m[1]]
			if !ok {
				return nil, fmt.Errorf("unknown variable ${%s}", m[1])
			}
			return val, nil
		}
		var err error
		s := varRef.ReplaceAllStringFunc(x, func(ref string) string {
			name := varRef.FindStringSubmatch(ref)[1]
			val, ok := vars[name]
			if !ok {
				err = errors.Join(err, fmt.Errorf("unknown variable ${%s}", name))
				return ref
			}
			switch y := val.(type) {
			case string:
				return y
			case float64:
				return strconv.FormatFloat(y, 'f', -1, 64)
			}
			return show(val)
		})
		return s, err
	case map[string]any:
		if x == nil {
			return nil, nil
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := resolve(e, vars)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := resolve(e, vars)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// lookup follows a dotted path ("jobs.0.token") into a decoded JSON value.
func lookup(v any, path string) (any, error) {
	cur := v
	for _, part := range strings.Split(path, ".") {
		switch x := cur.(type) {
		case map[string]any:
			next, ok := x[part]
			if !ok {
				return nil, fmt.Errorf("%s: no %q in %s", path, part, show(cur))
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("%s: no element %q in %s", path, part, show(cur))
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("%s: cannot take %q of %s", path, part, show(cur))
		}
	}
	if cur == nil {
		return nil, fmt.Errorf("%s is null", path)
	}
	return cur, nil
}

func TestResolve(t *testing.T) {
	vars := map[string]any{"id": 7.0, "run": "q-1", "tok": "abc"}
	got, err := resolve(decodeJSON(t, `{"id":"${id}","queue":"${run}","key":"${run}-k${id}","list":["${tok}"]}`), vars)
	if err != nil {
		t.Fatal(err)
	}
	want := decodeJSON(t, `{"id":7,"queue":"q-1","key":"q-1-k7","list":["abc"]}`)
	if diffs := match(want, got, time.Now()); len(diffs) > 0 {
		t.Errorf("resolve: %q", diffs)
	}
	if _, err := resolve("${nope}", vars); err == nil {
		t.Error("an unknown variable resolved")
	}
	if _, err := resolve("x-${nope}", vars); err == nil {
		t.Error("an unknown variable inside a string resolved")
	}
	v, err := lookup(decodeJSON(t, `{"jobs":[{"token":"t"}]}`), "jobs.0.token")
	if err != nil || v != "t" {
		t.Errorf("lookup = %v, %v", v, err)
	}
	if _, err := lookup(decodeJSON(t, `{"jobs":[]}`), "jobs.0.token"); err == nil {
		t.Error("lookup of a missing element succeeded")
	}
}
