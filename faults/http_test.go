package faults_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/testbin"
)

// readpastBin is the readpast command, built once (internal/testbin) and
// removed by TestMain.
var readpastBin testbin.Readpast

// freeAddr is a 127.0.0.1 address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// server starts `readpast serve` on addr and database url as a process of
// the run, in slot, and waits until it answers /healthz.
func (r *run) server(slot, addr, url string) *proc {
	r.mu.Lock()
	r.gens[slot]++
	name := fmt.Sprintf("%s.%d", slot, r.gens[slot])
	r.mu.Unlock()
	cmd := exec.Command(readpastBin.Path(r.t), "serve", "--addr", addr, "--database-url", url,
		"--log-level", "warn", "--rescue-interval", "250ms", "--shutdown-timeout", "5s")
	cmd.Env = append(os.Environ(), "READPAST_TOKENS=", "READPAST_DATABASE_URL=")
	out, err := os.Create(filepath.Join(r.dir, name+".out"))
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := r.startProc(name, slot, workerSpec{}, cmd, out)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/healthz", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			return p
		}
		if p.exited() || time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(r.dir, name+".out"))
			r.t.Fatalf("readpast serve did not come up on %s: %v\n%s", addr, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pyWorker starts the example Python worker (examples/python-worker, on
// this checkout's readpast package), recording its history, on the server
// at addr: leases of lease, long polls of 5 s, up to 4 jobs at once.
func (r *run) pyWorker(slot, addr string, lease time.Duration) *proc {
	r.mu.Lock()
	r.gens[slot]++
	name := fmt.Sprintf("%s.%d", slot, r.gens[slot])
	r.mu.Unlock()
	cmd := exec.Command("python3", "testdata/pyworker.py", "../examples/python-worker/worker.py",
		filepath.Join(r.dir, name+".jsonl"), name,
		"--url", "http://"+addr, "--name", name, "--lease", fmt.Sprint(lease.Seconds()), "--wait", "5", "--concurrency", "4")
	cmd.Env = append(os.Environ(), "READPAST_TOKEN=")
	out, err := os.Create(filepath.Join(r.dir, name+".out"))
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return r.startProc(name, slot, workerSpec{}, cmd, out)
}

// needPython skips the test without python3, or fails it under CI=true.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if pgtest.InCI() {
			t.Fatal("python3 not found")
		}
		t.Skip("python3 not found")
	}
}
