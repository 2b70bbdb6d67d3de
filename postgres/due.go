package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/readpast/readpast"
)

// A job that a store writes with a run_at ahead (an enqueue for later, a
// failure retried later, a snooze) becomes due when nobody looks: the
// wake-up its write sent came when it was not due, and a claimer sleeps
// until its poll. So the store sets an alarm (Store.due) for each such
// time: its claimers are woken then, and their next claims are full ones
// (pendingAgain), since the job may lie ahead of a position. Other
// processes learn the times of enqueues from a NOTIFY whose payload lists
// them (dueAnnouncer, "due:" and Unix microseconds), and set alarms of
// their own. Times within dueSoon of now need none (the write's wake-up
// finds them, or the short-claim wake-up of claimfrom.go does).
const dueSoon = 20 * time.Millisecond

// dueSkew is how long after a due time a store's claimers are woken a
// second time, for a database clock that runs behind this host's by up
// to that much (beyond it, the poll finds the job).
const dueSkew = 200 * time.Millisecond

// dueAnnounceMax bounds the times one NOTIFY lists (about 17 bytes each,
// well under the 8,000-byte payload limit): the earliest are listed, the
// rest wait for the poll.
const dueAnnounceMax = 256

var dueUpcomingSQL = mustStatement("due_upcoming")

// dueUpcoming sets alarms for the earliest times at which pending jobs
// become due, read once the listener's LISTEN took effect (on the pool:
// the listener's session keeps LISTEN as its last statement, which tools
// and tests look for): announcements sent while the store was not
// listening are lost. A failure leaves those jobs to the poll.
//
// Every time read gets an alarm, a soon or past one too: nothing else
// wakes anybody for a key's next start, and by the time the answer
// arrives it may be within dueSoon or gone.
func (s *Store) dueUpcoming(ctx context.Context) {
	rows, err := s.pool.Query(ctx, dueUpcomingSQL, dueAnnounceMax)
	if err != nil {
		return
	}
	defer rows.Close()
	now := time.Now()
	for rows.Next() {
		var t time.Time
		if rows.Scan(&t) == nil {
			s.alarm(now, t)
		}
	}
}

// alarm sets an alarm for a due time that the store did not write (heard
// from another process, or read): at t, however soon or past, and dueSkew
// after it (after now for a past t) for a database clock behind this
// host's, as dueAt does.
func (s *Store) alarm(now, t time.Time) {
	if t.Sub(now) <= dueSoon {
		s.due.At(t)
		s.due.At(later(t, now).Add(dueSkew))
		return
	}
	s.dueAt(now, t, false)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// dueLater sets alarms for the jobs that become due later.
func (s *Store) dueLater(jobs []*readpast.Job, announce bool) {
	now := time.Now()
	for _, j := range jobs {
		s.dueAt(now, j.RunAt, announce)
	}
}

// dueAt sets an alarm for t when it is later than now by more than
// dueSoon, and announces it to other processes when announce is set.
func (s *Store) dueAt(now, t time.Time, announce bool) {
	if t.Sub(now) <= dueSoon {
		return
	}
	s.due.At(t)
	// Again a little later: the database's clock, which decides when the
	// job is due, may run behind this host's.
	s.due.At(t.Add(dueSkew))
	if announce && !s.noListen {
		s.dueOut.add(t)
	}
}

// dueAnnouncer coalesces the times a store announces into one NOTIFY per
// notifyEvery.
type dueAnnouncer struct {
	send func(payload string)

	mu      sync.Mutex
	times   []int64 // Unix microseconds, sorted, at most dueAnnounceMax
	pending bool    // a send is scheduled
}

// add announces t with the next NOTIFY.
func (d *dueAnnouncer) add(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	us := t.UnixMicro()
	i, found := slices.BinarySearch(d.times, us)
	if found || i == dueAnnounceMax {
		return
	}
	// The earliest times are kept: a later one left out waits for the
	// poll, or is announced in a later window by whoever writes it again.
	d.times = slices.Insert(d.times, i, us)
	if len(d.times) > dueAnnounceMax {
		d.times = d.times[:dueAnnounceMax]
	}
	if !d.pending {
		d.pending = true
		time.AfterFunc(notifyEvery, d.flush)
	}
}

func (d *dueAnnouncer) flush() {
	d.mu.Lock()
	times := d.times
	d.times, d.pending = nil, false
	d.mu.Unlock()
	var b strings.Builder
	b.WriteString(duePrefix)
	for i, us := range times {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(us, 10))
	}
	d.send(b.String())
}

// duePrefix starts the payload of a NOTIFY readpast that lists times.
const duePrefix = "due:"

// notifyPayloadSQL sends NOTIFY readpast with a payload.
const notifyPayloadSQL = "SELECT pg_notify('readpast', $1)"

// sendDue sends one NOTIFY listing due times; a lost one leaves those
// jobs to the poll, so errors are dropped.
func (s *Store) sendDue(payload string) {
	ctx, cancel := context.WithTimeout(s.closeCtx, 5*time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, notifyPayloadSQL, payload)
}

// heardDue sets alarms for the times a NOTIFY's payload lists, and
// reports whether it was such a payload.
func (s *Store) heardDue(payload string) bool {
	list, ok := strings.CutPrefix(payload, duePrefix)
	if !ok {
		return false
	}
	now := time.Now()
	for f := range strings.SplitSeq(list, ",") {
		us, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			continue
		}
		// Soon or past ones too: a claim announces the next start of a
		// key it left out of tokens, which no write wakes anybody for,
		// and the NOTIFY may come after it.
		s.alarm(now, time.UnixMicro(us))
	}
	return true
}
