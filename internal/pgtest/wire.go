package pgtest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// SplitWatch is a TCP proxy in front of a PostgreSQL server (or pooler)
// that reads the protocol passing through it and records every split
// round trip sent outside a transaction: a Sync that ends a group of
// extended-protocol messages holding a Parse but no Execute (the first
// half of describe_exec), or a Bind but no Parse (a statement parsed in an
// earlier round trip). Behind a pooler in transaction mode the two halves
// may reach different server sessions, so a store meant for one must send
// none. Connections must not use TLS (sslmode=disable).
type SplitWatch struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
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

// Splits returns the split round trips seen so far, each described by the
// start of the statement it parsed (if any).
func (w *SplitWatch) Splits() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.splits...)
}

// Groups returns how many extended-protocol groups (messages up to a
// Sync) the watch has checked.
func (w *SplitWatch) Groups() int64 { return w.groups.Load() }

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
	for {
		client, err := w.ln.Accept()
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
		var status atomic.Int32 // the last ReadyForQuery's transaction status
		w.wg.Add(2)
		go func() {
			defer w.wg.Done()
			w.frontend(client, server, &status)
			server.Close()
			w.track(server, false)
		}()
		go func() {
			defer w.wg.Done()
			backend(server, client, &status)
			client.Close()
			w.track(client, false)
		}()
	}
}

// frontend copies the client's messages to the server, checking each
// group against the transaction status the server last reported.
func (w *SplitWatch) frontend(client, server net.Conn, status *atomic.Int32) {
	r := bufio.NewReader(client)
	// The startup message has no type byte.
	if _, err := copyMessage(r, server, false); err != nil {
		return
	}
	var parse, bind, exec, half bool // half: the last group was a split's first half
	var query string
	for {
		m, err := copyMessage(r, server, true)
		if err != nil {
			return
		}
		switch m[0] {
		case 'P':
			parse = true
			if query == "" {
				query = parsedQuery(m[5:])
			}
		case 'B':
			bind = true
		case 'E':
			exec = true
		case 'S':
			w.groups.Add(1)
			idle := status.Load() == 'I'
			if idle && (parse && !exec || bind && !parse && !half) {
				w.mu.Lock()
				w.splits = append(w.splits, query)
				w.mu.Unlock()
			}
			half = idle && parse && !exec
			parse, bind, exec, query = false, false, false, ""
		}
	}
}

// backend copies the server's messages to the client, recording each
// ReadyForQuery's status before the client can see it.
func backend(server, client net.Conn, status *atomic.Int32) {
	r := bufio.NewReader(server)
	record := func(m []byte) {
		if m[0] == 'Z' && len(m) > 5 {
			status.Store(int32(m[5]))
		}
	}
	for {
		if _, err := copyMessage(r, client, true, record); err != nil {
			return
		}
	}
}

// copyMessage reads one message (with its type byte if typed) from r,
// calls before on it, and writes it to dst.
func copyMessage(r *bufio.Reader, dst io.Writer, typed bool, before ...func([]byte)) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	m := make([]byte, head)
	if _, err := io.ReadFull(r, m); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(m[head-4:]))
	if n < 4 {
		return nil, errors.New("pgtest: bad message length")
	}
	m = append(m, make([]byte, n-4)...)
	if _, err := io.ReadFull(r, m[head:]); err != nil {
		return nil, err
	}
	if !typed && n == 8 && binary.BigEndian.Uint32(m[4:]) == 80877103 {
		return nil, fmt.Errorf("pgtest: split watch needs sslmode=disable")
	}
	for _, f := range before {
		f(m)
	}
	_, err := dst.Write(m)
	return m, err
}

// parsedQuery returns the start of a Parse message's query (after the
// statement's name).
func parsedQuery(b []byte) string {
	for i, c := range b {
		if c == 0 {
			b = b[i+1:]
			break
		}
	}
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	if len(b) > 120 {
		b = b[:120]
	}
	return string(b)
}
