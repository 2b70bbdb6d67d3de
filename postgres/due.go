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
// their own. A time however soon gets them: the write's own wake-up
// comes before it, and the claim it starts finds nothing. A job whose
// run_at is its creation time (not written for later) needs none.
//
// dueSoon is how far ahead a time heard from elsewhere counts as soon:
// its second alarm, for a database clock behind this host's, comes
// dueSkew after the later of it and now.
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
	now := time.Now()
	for _, t := range s.upcoming(ctx) {
		s.alarm(now, t)
	}
}

// upcoming reads the earliest times at which pending jobs become due or
// keys out of tokens can start (sql/due_upcoming.sql); none on failure.
func (s *Store) upcoming(ctx context.Context) []time.Time {
	rows, err := s.pool.Query(ctx, dueUpcomingSQL, dueAnnounceMax)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var t time.Time
		if rows.Scan(&t) == nil {
			out = append(out, t)
		}
	}
	return out
}

// announceUpcoming announces the upcoming times (upcoming) as a claim's
// (announceDue), for a claim whose outcome was unknown: it may have
// committed and left keys out of tokens, marked at next starts that only
// its answer listed. It runs in the outbox, so that the claim's caller
// does not wait for it (the network that lost the answer may hold this
// read too).
func (s *Store) announceUpcoming() {
	s.out.run(func() {
		// One bound for the read and the NOTIFY, as for a NOTIFY alone.
		ctx, cancel := context.WithTimeout(s.closeCtx, 5*time.Second)
		defer cancel()
		times := s.upcoming(ctx)
		if len(times) == 0 {
			return
		}
		now := time.Now()
		us := make([]int64, len(times))
		for i, t := range times {
			s.alarm(now, t)
			us[i] = t.UnixMicro()
		}
		_, _ = s.pool.Exec(ctx, notifyPayloadSQL, duePayload(us))
	})
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

// dueLater sets alarms for the jobs that become due later: those written
// with a run_at after their creation (by the database's clock). A run_at
// this host's clock has passed already is due later by the database's,
// which runs behind this host's: its alarm comes dueSkew from now.
func (s *Store) dueLater(jobs []*readpast.Job, announce bool) {
	now := time.Now()
	for _, j := range jobs {
		if !j.RunAt.After(j.CreatedAt) {
			continue
		}
		if j.RunAt.After(now) {
			s.dueAt(now, j.RunAt, announce)
			continue
		}
		s.due.At(now.Add(dueSkew))
		if announce && !s.noListen {
			s.dueOut.add(j.RunAt) // heard, a past time's alarms come at once and dueSkew later
		}
	}
}

// dueAt sets an alarm for t when it is later than now, however soon, and
// announces it to other processes when announce is set.
func (s *Store) dueAt(now, t time.Time, announce bool) {
	if !t.After(now) {
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
	send func(payload string) // hands one NOTIFY to be sent, without blocking

	mu      sync.Mutex
	times   []int64 // Unix microseconds, sorted, at most dueAnnounceMax
	pending bool    // a send is scheduled
	timer   *time.Timer
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
		d.timer = time.AfterFunc(notifyEvery, d.flush)
	}
}

// flush sends the times gathered, if any: at the end of the window, or
// at once (Store.Close).
func (d *dueAnnouncer) flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
	times := d.times
	d.times, d.pending = nil, false
	if len(times) > 0 {
		d.send(duePayload(times)) // under d.mu, as notifier.fire
	}
}

// duePayload is the payload of a NOTIFY listing times (Unix
// microseconds).
func duePayload(times []int64) string {
	var b strings.Builder
	b.WriteString(duePrefix)
	for i, us := range times {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(us, 10))
	}
	return b.String()
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

// heardDue sets alarms for the times a NOTIFY's payload lists (a claim's
// own payload too: announceDue), and reports whether it was such a
// payload.
func (s *Store) heardDue(payload string) bool {
	list, ok := strings.CutPrefix(payload, duePrefix)
	if !ok {
		return false
	}
	now := time.Now()
	for field := range strings.SplitSeq(list, ",") {
		// Soon or past ones too: a claim announces the next start of a
		// key it left out of tokens, which no write wakes anybody for,
		// and the NOTIFY may come after it.
		if us, err := strconv.ParseInt(field, 10, 64); err == nil {
			s.alarm(now, time.UnixMicro(us))
		}
	}
	return true
}

// announceDue takes the payload a claim returned, once the claim has
// committed: the next starts of the keys it left out of tokens, which no
// write wakes anybody for. This store's claimers get alarms for them, and
// other processes hear them in a NOTIFY sent at once, whether or not this
// store listens. The claim does not notify itself: a transaction that
// notifies holds PostgreSQL's notify lock, which serializes the commits
// of every transaction that notifies, until its commit is flushed, and
// claims that left keys out of tokens and completions that freed slots
// queued there and on the key rows they held (docs/design/enqueue.md,
// "Wake-ups").
//
// The payload is sent as the claim wrote it (its earliest 256 times), in
// a NOTIFY of its own: merged with other claims' in dueAnnouncer's window
// it would be cut to that window's earliest 256.
func (s *Store) announceDue(payload string) {
	if s.heardDue(payload) {
		s.out.run(func() { s.sendDue(payload) })
	}
}
