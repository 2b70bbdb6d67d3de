// Package history records what workers and producers did to a readpast
// store, in files that several processes write, and checks the merged
// record against the queue's promises: no acknowledged job lost, none
// finished twice, no job held twice under a valid lease, no key (group,
// or any later key of a job with several) over its concurrency or its
// rate, no job left running past its lease,
// no stale write accepted.
//
// Every process appends its events to a file of its own (Log), one JSON
// object a line, written with one write(2) each, so a process killed with
// SIGKILL loses at most the events it had not written yet. Wrap records
// every store call a Client makes, with the times it was invoked and
// returned on the writer's clock; Handler records when handlers start and
// end. Read merges the files, and Check judges them together with the
// jobs' final states read from the database.
//
// The checker only ever reports what the record proves: a store call took
// effect somewhere between its invocation and its return, a claim's lease
// lasts at least from the claim's invocation plus the lease, and a write
// that may or may not have landed (its caller got an error) is taken to
// have landed as early as it could have. So a report of a violation is a
// violation, whatever the network delayed.
package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"
)

// Ops of events.
const (
	OpEnqueue   = "enqueue"   // one per job an Enqueue call returned (or one with OutError for a failed call)
	OpClaimCall = "claimcall" // one per Claim call: N jobs, or an error
	OpClaim     = "claim"     // one per job a Claim call returned
	OpStart     = "start"     // a handler started (At in Inv)
	OpEnd       = "end"       // a handler returned (At in Inv)
	OpComplete  = "complete"
	OpFail      = "fail"
	OpRelease   = "release"
	OpExtend    = "extend"
	// OpCancel is an operator's cancel of job ID (no token): an accepted
	// one ends every claim of the job made before it returned.
	OpCancel = "cancel"
)

// Outcomes of a call.
const (
	OutOK       = "ok"       // the store accepted it
	OutStale    = "stale"    // refused: ErrStaleToken
	OutNotFound = "notfound" // refused: ErrNotFound
	OutError    = "error"    // the call failed: it may or may not have taken effect
	OutSent     = "sent"     // written before a finishing call is made: it may land even if the process dies before its outcome is written
	OutRefused  = "refused"  // refused for another reason (invalid input)
)

// Event is one line of a history file. Times are Unix nanoseconds on the
// writer's wall clock.
type Event struct {
	Op    string `json:"op"`
	Proc  string `json:"proc"`
	ID    int64  `json:"id,omitempty"`
	Token string `json:"tok,omitempty"`
	Group string `json:"g,omitempty"`
	// More are the job's keys after its first (Group), on claims of jobs
	// with several keys: each is held to its limits as the first is.
	More []string `json:"mk,omitempty"`
	// Inv is when the call was invoked (the instant itself for start and end).
	Inv int64 `json:"inv"`
	// Ret is when the call returned.
	Ret int64 `json:"ret,omitempty"`
	// Lease is the lease asked for, in nanoseconds (claim, extend).
	Lease int64 `json:"lease,omitempty"`
	// Out is the outcome of a call (Out* constants).
	Out string `json:"out,omitempty"`
	// N is how many jobs a claim call returned.
	N int `json:"n,omitempty"`
	// Err is the error a call returned, if any.
	Err string `json:"err,omitempty"`
}

// Keys are the keys the event's job names, its group first, each once
// (the stores refuse a key named twice; a record that repeats one still
// holds one slot of it).
func (e Event) Keys() []string {
	ks := make([]string, 0, 1+len(e.More))
	for _, k := range append([]string{e.Group}, e.More...) {
		if k != "" && !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	return ks
}

// Log appends one process's events to a file. It is safe for concurrent use.
type Log struct {
	proc string
	mu   sync.Mutex
	f    *os.File
	buf  []byte
	err  error
}

// Create opens (creating or appending to) the history file path for the
// process named proc.
func Create(path, proc string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Log{proc: proc, f: f}, nil
}

// Proc is the name the log writes its events under.
func (l *Log) Proc() string { return l.proc }

// Add writes e (with the log's process name) as one line, in one write.
func (l *Log) Add(e Event) {
	e.Proc = l.proc
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := json.Marshal(e)
	if err != nil {
		l.err = errors.Join(l.err, err)
		return
	}
	l.buf = append(append(l.buf[:0], b...), '\n')
	if _, err := l.f.Write(l.buf); err != nil {
		l.err = errors.Join(l.err, err)
	}
}

// Close closes the file and returns the first write error, if any.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.err, l.f.Close())
}

// Read reads and merges every file matching pattern (filepath.Glob),
// ordered by Inv. Lines that do not parse (none should: each line is one
// write) are counted in bad.
func Read(pattern string) (evs []Event, bad int, err error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, 0, fmt.Errorf("history: %w", err)
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, 0, fmt.Errorf("history: %w", err)
		}
		e, b, err := decode(f)
		f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("history: %s: %w", name, err)
		}
		evs, bad = append(evs, e...), bad+b
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Inv < evs[j].Inv })
	return evs, bad, nil
}

func decode(r io.Reader) (evs []Event, bad int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Op == "" {
			bad++
			continue
		}
		evs = append(evs, e)
	}
	return evs, bad, sc.Err()
}

// ns converts a time to the events' unit.
func ns(t time.Time) int64 { return t.UnixNano() }

// Time converts an event time back.
func Time(n int64) time.Time { return time.Unix(0, n) }
