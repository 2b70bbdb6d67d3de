package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/history"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/sqlite"
)

// envDiskFull names the directory a disk-full child mounts its tmpfs on.
const envDiskFull = "READPAST_FAULTS_DISKFULL"

// tmpfsSize is the size of the scenario's file system: room for the
// database and its WAL, and for a ballast file that fills the rest.
const tmpfsSize = "64m"

// TestSQLiteDiskFull is scenario 6: the SQLite database lives on a small
// tmpfs of its own, mounted in a private mount namespace (so nothing
// outside the test sees it: as root directly, otherwise inside a user
// namespace). While three Go worker processes work a stream of jobs, a
// ballast file fills the file system to the last byte, for 3 s, and is
// deleted again, twice. Wanted: the writes that fail say the disk is
// full, the database passes PRAGMA integrity_check, the workers recover
// when space returns, and nothing acknowledged is lost (nor any other
// violation show).
//
// The alternative the issue names, a file turned read-only mid-run,
// cannot be done to processes that hold the file open (a read-only
// remount is refused while files are open for writing, and a chmod does
// not touch open descriptors), so it is not simulated.
func TestSQLiteDiskFull(t *testing.T) {
	if dir := os.Getenv(envDiskFull); dir != "" {
		t.Skip("the child side runs as TestDiskFullChild")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullChild$", "-test.count=1", "-test.v")
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-faults.") || strings.HasPrefix(a, "-test.timeout") {
			cmd.Args = append(cmd.Args, a)
		}
	}
	cmd.Env = append(os.Environ(), envDiskFull+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.Contains(line, ".go:") {
			t.Log(line)
		}
	}
	switch {
	case err == nil && bytes.Contains(out.Bytes(), []byte("--- SKIP")):
		t.Fatal("the disk-full child skipped")
	case err == nil:
	case errors.Is(err, syscall.EPERM) || bytes.Contains(out.Bytes(), []byte("cannot mount")):
		if pgtest.InCI() {
			t.Fatalf("no mount namespace for the tmpfs: %v\n%s", err, out.String())
		}
		t.Skipf("this machine gives no mount namespace for a tmpfs (%v); the disk-full scenario needs one", err)
	default:
		t.Fatalf("disk-full child: %v\n%s", err, out.String())
	}
}

// TestDiskFullChild is the scenario's body, in the private mount
// namespace TestSQLiteDiskFull starts it in. Run directly, it skips.
func TestDiskFullChild(t *testing.T) {
	base := os.Getenv(envDiskFull)
	if base == "" {
		t.Skip("runs only in the mount namespace TestSQLiteDiskFull makes")
	}
	// Nothing mounted here may reach the parent namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		t.Fatalf("cannot mount: making / private: %v", err)
	}
	dir := filepath.Join(base, "fs")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+tmpfsSize); err != nil {
		t.Fatalf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	path := filepath.Join(dir, "jobs.db")
	s := openSQLite(t, path)
	r := newRun(t, "sqlite-disk-full", s, localNow)
	spec := goWorker("sqlite", path)
	for _, slot := range []string{"w1", "w2", "w3"} {
		r.worker(slot, spec)
	}
	d := loadFor(14 * time.Second)
	r.enqueue(d, 4, true)
	end := time.Now().Add(d)
	ballast := filepath.Join(dir, "ballast")
	fulls := 0
	for time.Now().Add(5 * time.Second).Before(end) {
		time.Sleep(2 * time.Second)
		n, err := fill(ballast)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling the tmpfs: %v after %d bytes", err, n)
		}
		fulls++
		time.Sleep(3 * time.Second)
		if err := os.Remove(ballast); err != nil {
			t.Fatal(err)
		}
		// A process's write may have started waiting for SQLite's write
		// lock during the outage behind one that is itself slow to get the
		// CPU back: it waits up to one busy timeout, and the process's
		// claim, queued behind that write on the process's one write
		// connection, may then wait one more before its backoff and
		// claim (seen at 5-7 s on a loaded 2-core machine, with or
		// without the race detector, and at 8.9-11.1 s with the whole
		// suite running beside it: a claim that waited out its 10 s call
		// timeout behind its process's own writes, and 14.7 s with more
		// tests beside it: that 10 s call timeout, the backoff, and one
		// more busy timeout behind a write; under 0.6 s idle).
		r.faultWithin("space back", time.Now(), claimCallTimeout+sqlite.DefaultBusyTimeout+maxResume)
	}
	r.waitEnqueued()
	if err := r.drain(2 * time.Minute); err != nil {
		t.Error(err)
	}
	res := r.finish()
	res.checkResumed(t, "sqlite-disk-full")
	// Clear errors: every failed write says the disk is full (or, for a
	// connection that could not even start a transaction, I/O failed, or
	// it timed out waiting for the write lock).
	full, first := errorsMatching(res.events, "disk is full")
	all, firstAny := errorsMatching(res.events, "unavailable")
	t.Logf("faults: sqlite-disk-full: %d times full for 3 s; %d calls failed, %d of them saying the disk is full (%q)", fulls, all, full, first)
	if full == 0 {
		t.Errorf("no call failed with a disk-full error while the disk was full (%d failed, the first: %s)", all, firstAny)
	}
	if other, text := otherErrors(res.events); other > 0 {
		t.Errorf("%d calls failed with something else than a full disk, the first: %s", other, text)
	}
	var check string
	if err := s.DB().QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q, %v", check, err)
	}
}

// fill writes zeros to path until the file system is full.
func fill(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		m, err := f.Write(buf)
		n += int64(m)
		if err != nil {
			if m == 0 && len(buf) > 1 {
				buf = buf[:len(buf)/2] // down to the last byte
				continue
			}
			if len(buf) > 1 {
				continue
			}
			return n, err
		}
	}
}

// otherErrors counts failed calls (refusals as stale are no failure)
// whose error is neither a full disk nor an I/O error SQLite reports for
// the same cause.
func otherErrors(evs []history.Event) (int, string) {
	n, first := 0, ""
	for _, e := range evs {
		if e.Out != history.OutError || strings.Contains(e.Err, "full") || strings.Contains(e.Err, "I/O error") || strings.Contains(e.Err, "IOERR") {
			continue
		}
		// A call that ran out of time waiting for the write lock while the
		// other processes' writes kept failing (seen on a loaded machine)
		// is a clear error too: unavailable, deadline exceeded.
		if strings.Contains(e.Err, "unavailable") && strings.Contains(e.Err, "deadline exceeded") {
			continue
		}
		if n == 0 {
			first = fmt.Sprintf("%s by %s: %s", e.Op, e.Proc, e.Err)
		}
		n++
	}
	return n, first
}
