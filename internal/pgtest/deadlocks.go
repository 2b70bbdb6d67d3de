package pgtest

import (
	"bufio"
	"bytes"
	"strings"
)

// Deadlocks returns the server's reports of the deadlocks it broke, each
// with the lines PostgreSQL logs with it: which process waited for which
// lock, held by whom, and the statements involved (DETAIL, CONTEXT,
// STATEMENT). A deadlock is logged even when the caller retries the
// statement and nothing fails, so ServerFor quotes them in the test's log.
func (s *Server) Deadlocks() []string {
	return deadlockReports(s.logSince(0))
}

// deadlockReports finds the "deadlock detected" errors in a server log
// written with the default log_line_prefix: an entry is its first line
// and the lines that continue it (DETAIL, HINT, CONTEXT and STATEMENT
// lines, and lines that start with a tab).
func deadlockReports(log []byte) []string {
	var (
		out []string
		cur []string
	)
	flush := func() {
		if cur != nil {
			out = append(out, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "ERROR:  deadlock detected"):
			flush()
			cur = []string{line}
		case cur != nil && continues(line):
			cur = append(cur, line)
		default:
			flush()
		}
	}
	flush()
	return out
}

// continues reports whether a log line belongs to the entry before it.
func continues(line string) bool {
	if strings.HasPrefix(line, "\t") {
		return true
	}
	for _, k := range []string{"DETAIL:  ", "HINT:  ", "CONTEXT:  ", "STATEMENT:  "} {
		if strings.Contains(line, k) {
			return true
		}
	}
	return false
}
