package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// childEnv is the environment without settings that would change what
// initdb and postgres do, in the C locale so log messages are in English.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PG") || strings.HasPrefix(k, "LC_") || k == "LANG" || k == "LANGUAGE" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// findBinDir locates the directory holding initdb and postgres: the
// READPAST_PG_BINDIR environment variable (if set, it is the only place
// looked at), then `pg_config --bindir`, then the highest version under
// /usr/lib/postgresql, then PATH. Failures wrap ErrNoBinaries.
func findBinDir(getenv func(string) string) (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir := getenv("READPAST_PG_BINDIR"); dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w: READPAST_PG_BINDIR=%s has no initdb and postgres", ErrNoBinaries, dir)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); has(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("%w (looked at READPAST_PG_BINDIR, pg_config --bindir, /usr/lib/postgresql/*/bin and PATH)", ErrNoBinaries)
}

// versionLess orders /usr/lib/postgresql/<version>/bin paths by version.
func versionLess(a, b string) bool {
	va := strings.Split(filepath.Base(filepath.Dir(a)), ".")
	vb := strings.Split(filepath.Base(filepath.Dir(b)), ".")
	for i := 0; i < len(va) && i < len(vb); i++ {
		na, ea := strconv.Atoi(va[i])
		nb, eb := strconv.Atoi(vb[i])
		if ea != nil || eb != nil {
			if va[i] != vb[i] {
				return va[i] < vb[i]
			}
			continue
		}
		if na != nb {
			return na < nb
		}
	}
	return len(va) < len(vb)
}

// childCredential is who initdb and postgres run as: nil (ourselves) unless
// we are root, then the postgres user if it exists, else nobody.
func childCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []error
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			errs = append(errs, fmt.Errorf("user %s has a non-numeric uid or gid", name))
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("pgtest: running as root and no unprivileged user to run PostgreSQL as: %w", errors.Join(errs...))
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// proc identifies a process by pid and start time, so that a reused pid is
// not mistaken for it.
type proc struct {
	pid   int
	start string
}

// procStat is what we read from /proc/PID/stat.
type procStat struct {
	state byte
	ppid  int
	start string
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name (field 2) is in parentheses and may contain anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, false
	}
	// f[0] is field 3 (state), f[1] field 4 (ppid), f[19] field 22 (starttime).
	return procStat{state: f[0][0], ppid: ppid, start: f[19]}, true
}

// gone reports whether p has exited (a zombie counts as exited).
func (p proc) gone() bool {
	st, ok := readStat(p.pid)
	return !ok || st.start != p.start || st.state == 'Z' || st.state == 'X'
}

// descendants lists the processes below pid, found through /proc.
func descendants(pid int) []proc {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(p); ok {
			children[st.ppid] = append(children[st.ppid], proc{pid: p, start: st.start})
		}
	}
	var out []proc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}
