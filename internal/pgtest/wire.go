package pgtest

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SplitWatch is a TCP proxy in front of a PostgreSQL server (or pooler)
// that reads the protocol passing through it and records every statement
// bound outside the server session that parsed it. A transaction-mode
// pooler keeps a client on one server session from a round trip sent
// while the session is idle (its transaction status 'I') until the next
// ReadyForQuery that says idle again: a transaction, or a single round
// trip outside one. A Bind of a statement parsed in an earlier such span
// (the second round trip of pgx's describe_exec outside a transaction, or
// a named statement prepared in an earlier transaction) may reach another
// server session, so a store meant for a pooler must send none.
//
// Each group of messages (up to a Sync, a Query or a FunctionCall, each
// answered by one ReadyForQuery) is judged by the status of the answer to
// the group before it, so pipelined groups are judged as the server will
// run them. Connections must not use TLS or GSS encryption
// (sslmode=disable); one that does is recorded as a failure.
type SplitWatch struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool // nil once closed
	splits []string
	groups atomic.Int64
}

// WatchSplits starts a SplitWatch on 127.0.0.1 and a free port forwarding
// to target (host:port), closed at the test's end.
func WatchSplits(t testing.TB, target string) *SplitWatch {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: split watch: %v", err)
	}
	w := &SplitWatch{ln: ln, target: target, conns: map[net.Conn]bool{}}
	w.wg.Add(1)
	go w.accept()
	t.Cleanup(w.close)
	return w
}

// URL returns u with its host and port replaced by the proxy's, and
// sslmode=disable.
func (w *SplitWatch) URL(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	p.Host = w.ln.Addr().String()
	q := p.Query()
	q.Set("sslmode", "disable")
	p.RawQuery = q.Encode()
	return p.String(), nil
}

// Splits returns the statements bound outside the span that parsed them,
// each as the start of its text (or its name, if its Parse was not seen).
func (w *SplitWatch) Splits() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.splits...)
}

// Groups returns how many groups of messages the watch has judged.
func (w *SplitWatch) Groups() int64 { return w.groups.Load() }

func (w *SplitWatch) record(s string) {
	w.mu.Lock()
	w.splits = append(w.splits, s)
	w.mu.Unlock()
}

func (w *SplitWatch) close() {
	w.ln.Close()
	w.mu.Lock()
	for c := range w.conns {
		c.Close()
	}
	w.conns = nil
	w.mu.Unlock()
	w.wg.Wait()
}

// track adds c to the open connections (false once the watch is closed),
// or removes it.
func (w *SplitWatch) track(c net.Conn, on bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if on && w.conns == nil {
		return false
	}
	if on {
		w.conns[c] = true
	} else {
		delete(w.conns, c)
	}
	return true
}

func (w *SplitWatch) accept() {
	defer w.wg.Done()
	defer w.ln.Close() // a failed Accept must refuse later clients, not leave them hanging
	for {
		client, err := w.ln.Accept()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", w.target)
		if err != nil {
			client.Close()
			continue
		}
		if !w.track(client, true) || !w.track(server, true) {
			client.Close()
			server.Close()
			return
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.serve(client, server)
			client.Close()
			server.Close()
			w.track(client, false)
			w.track(server, false)
		}()
	}
}

// Codes of the untyped requests a client may send before its startup
// message.
const (
	cancelRequest  = 80877102
	sslRequest     = 80877103
	gssencRequest  = 80877104
	maxMessageSize = 1 << 30
)

// serve passes one connection through: the start-up exchange, then the
// typed messages both ways, judged by a session.
func (w *SplitWatch) serve(client, server net.Conn) {
	cr, sr := bufio.NewReader(client), bufio.NewReader(server)
	for {
		m, err := readMessage(cr, false)
		if err != nil || write(server, m) != nil {
			return
		}
		switch binary.BigEndian.Uint32(m[4:8]) {
		case sslRequest, gssencRequest:
			answer, err := sr.ReadByte()
			if err != nil || write(client, []byte{answer}) != nil {
				return
			}
			if answer != 'N' {
				w.record("pgtest: an encrypted connection passed unwatched (use sslmode=disable)")
				done := make(chan struct{})
				go func() {
					defer close(done)
					io.Copy(server, cr)
					server.Close()
				}()
				io.Copy(client, sr)
				client.Close()
				<-done
				return
			}
			continue // the client sends its startup message next
		case cancelRequest:
			io.Copy(client, sr)
			return
		}
		break
	}
	s := &session{w: w, parsed: map[string]parsed{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		relay(sr, client, s.received)
		client.Close() // ends the client's side too
	}()
	relay(cr, server, s.sent)
	server.Close()
	<-done
}

// relay copies typed messages from r to dst, calling seen on each before
// it is written. Writes are buffered while the next message is already
// whole in r's buffer, and flushed before any read that could block.
func relay(r *bufio.Reader, dst io.Writer, seen func([]byte)) {
	bw := bufio.NewWriter(dst)
	for {
		m, err := readMessage(r, true)
		if err != nil {
			return
		}
		seen(m)
		if _, err := bw.Write(m); err != nil {
			return
		}
		if !whole(r) && bw.Flush() != nil {
			return
		}
	}
}

// whole reports whether r's buffer holds a whole typed message.
func whole(r *bufio.Reader) bool {
	if r.Buffered() < 5 {
		return false
	}
	h, err := r.Peek(5)
	return err == nil && r.Buffered() >= 1+int(binary.BigEndian.Uint32(h[1:]))
}

// A session judges one connection's groups in order, each by the status
// of the ReadyForQuery that answered the group before it. A Parse counts
// for later groups once the server confirmed it (ParseComplete): after an
// error the server discards the rest of the group.
//
// It relies on each Sync, Query and FunctionCall getting one
// ReadyForQuery, as pgx's traffic does. The sequences that break that
// (a Query or FunctionCall sent among extended-protocol messages before
// their Sync, COPY FROM STDIN started through the extended protocol,
// whose Syncs the server ignores) are recorded as unsupported.
type session struct {
	w        *SplitWatch
	mu       sync.Mutex
	statuses []byte            // statuses received and not used yet; statuses[0] is answer number base
	base     int               // the number of the answer statuses[0] is (the startup's is 0)
	groups   []group           // the groups sent and not judged yet
	judged   []group           // the groups judged whose own answer has not come
	current  group             // the group being sent
	lastEnd  byte              // the message that ended the last group: 'S', 'Q' or 'F'
	sentN    int               // groups sent
	span     int               // the current pooler span: a new one begins at each group sent while idle
	parsed   map[string]parsed // statement name -> the span of its confirmed Parse and its text
	parses   int               // ParseCompletes since the last ReadyForQuery
}

type group struct {
	seq      int
	span     int
	extended bool      // holds extended-protocol messages
	msgs     []stmtRef // the Parses and Binds of the group, in order
}

type stmtRef struct {
	parse bool
	name  string
	query string
}

type parsed struct {
	span  int
	query string
}

// sent notes a message the client sent.
func (s *session) sent(m []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m[0] {
	case 'P':
		name, rest := cstring(m[5:])
		query, _ := cstring(rest)
		s.current.msgs = append(s.current.msgs, stmtRef{parse: true, name: name, query: clip(query)})
		s.current.extended = true
	case 'B':
		_, rest := cstring(m[5:])
		name, _ := cstring(rest)
		s.current.msgs = append(s.current.msgs, stmtRef{name: name})
		s.current.extended = true
	case 'E', 'D', 'C', 'H':
		s.current.extended = true
	case 'd', 'c', 'f':
		if s.current.extended || s.lastEnd == 'S' {
			s.w.record("pgtest: unsupported: COPY FROM STDIN through the extended protocol")
		}
	case 'Q', 'F':
		if s.current.extended {
			s.w.record("pgtest: unsupported: a Query or FunctionCall among extended-protocol messages before their Sync")
		}
		fallthrough
	case 'S':
		s.sentN++
		s.current.seq = s.sentN
		s.lastEnd = m[0]
		s.groups = append(s.groups, s.current)
		s.current = group{}
		s.judge()
	}
}

// received notes a message the server sent.
func (s *session) received(m []byte) {
	switch m[0] {
	case '1':
		s.mu.Lock()
		s.parses++
		s.mu.Unlock()
	case 'Z':
		if len(m) > 5 {
			s.answered(m[5])
		}
	}
}

// answered notes a ReadyForQuery: its group's confirmed Parses now count,
// and the next group can be judged.
func (s *session) answered(status byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.base + len(s.statuses) // this answer's number
	s.statuses = append(s.statuses, status)
	if len(s.judged) > 0 && s.judged[0].seq == n {
		g := s.judged[0]
		s.judged = s.judged[1:]
		for _, r := range g.msgs {
			if r.parse && s.parses > 0 {
				s.parses--
				s.parsed[r.name] = parsed{span: g.span, query: r.query}
			}
		}
	}
	s.parses = 0
	s.judge()
}

// judge judges the groups whose preceding answer has arrived.
func (s *session) judge() {
	for len(s.groups) > 0 && s.base+len(s.statuses) >= s.groups[0].seq {
		g := s.groups[0]
		s.groups = s.groups[1:]
		i := g.seq - 1 - s.base
		if s.statuses[i] == 'I' {
			s.span++
		}
		s.statuses, s.base = s.statuses[i+1:], g.seq // only later answers are needed from now on
		g.span = s.span
		here := map[string]bool{} // parsed earlier in this group
		for _, r := range g.msgs {
			if r.parse {
				here[r.name] = true
				continue
			}
			if p, ok := s.parsed[r.name]; !here[r.name] && (!ok || p.span != s.span) {
				s.w.record(cmp.Or(p.query, fmt.Sprintf("statement %q", r.name)))
			}
		}
		s.judged = append(s.judged, g)
		s.w.groups.Add(1)
	}
}

// readMessage reads one message (with its type byte if typed).
func readMessage(r *bufio.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	m := make([]byte, head, 64)
	if _, err := io.ReadFull(r, m); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(m[head-4:]))
	if n < 4 || n > maxMessageSize || !typed && n < 8 {
		return nil, fmt.Errorf("pgtest: bad message length %d", n)
	}
	m = append(m, make([]byte, n-4)...)
	if _, err := io.ReadFull(r, m[head:]); err != nil {
		return nil, err
	}
	return m, nil
}

func write(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

// cstring splits b after its first NUL.
func cstring(b []byte) (string, []byte) {
	for i, c := range b {
		if c == 0 {
			return string(b[:i]), b[i+1:]
		}
	}
	return string(b), nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}
