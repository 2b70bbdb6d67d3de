package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
	"github.com/readpast/readpast/storetest/pgharness"
)

// Adversarial tests of the promise "a due job with a free worker starts
// within 500 ms, whoever enqueued it and whatever the poll interval,
// including a job enqueued for later that becomes due" (postgres/due.go,
// internal/wake/alarm.go, postgres/listen.go). Each case runs a
// storetest.DueClient (poll interval a minute) so that only a wake-up
// starts the job sooner than a minute.

// TestDueAnnouncedPastTheCap: a process that enqueues, in
// one 5 ms window, jobs with more than 256 distinct run_ats ahead (a batch
// of reminders, say) announces only the first 256 it added
// (dueAnnouncer.add drops the rest, in call order, not the latest ones):
// a job due soon that comes 257th is never announced, and the worker
// process, which did not enqueue it, finds it only at its poll.
//
// With 255 other times (the control case) the job's time is announced and
// it starts promptly.
func TestDueAnnouncedPastTheCap(t *testing.T) {
	for _, others := range []int{255, 256} {
		t.Run(strconv.Itoa(others)+" other times", func(t *testing.T) { dueAnnouncedAfter(t, others) })
	}
}

func dueAnnouncedAfter(t *testing.T, others int) {
	u := pgtest.URL(t)
	a := pgharness.Open(t, u)
	b := pgharness.Open(t, u)                  // the worker process
	t.Cleanup(func() { a.Close(); b.Close() }) // after DueClient's stop
	started, _ := storetest.DueClient(t, b, false)
	ctx := context.Background()
	now := time.Now()
	var batch []readpast.EnqueueParams
	for i := range others { // due in an hour, each a millisecond apart, in a queue nobody serves
		batch = append(batch, readpast.EnqueueParams{Kind: "later", Queue: "elsewhere", RunAt: now.Add(time.Hour + time.Duration(i)*time.Millisecond)})
	}
	due := now.Add(300 * time.Millisecond)
	batch = append(batch, readpast.EnqueueParams{Kind: "due", Queue: "q", RunAt: due})
	if _, err := a.Enqueue(ctx, batch); err != nil {
		t.Fatal(err)
	}
	storetest.StartsWithin(t, started, due, 500*time.Millisecond, fmt.Sprintf("due time %d of one window, enqueued by another process", others+1))
}

// TestDueAnnouncedWhileListenerReconnects: the worker
// process's LISTEN session is lost (a server restart, a pooler or a
// network cutting it); while it reconnects (100 ms backoff at first)
// another process enqueues a job due 300 ms later. Its "due:" NOTIFY
// reaches nobody. The listener's reconnect broadcasts a wake-up
// (listen.go: "anything enqueued before LISTEN took effect"), but the job
// is not due yet, so that claim finds nothing; nothing sets an alarm for
// it, and it waits for the poll.
// listenerSession picks a store's listener out of pg_stat_activity: its
// last statement is LISTEN.
const listenerSession = `query = 'LISTEN readpast'`

func TestDueAnnouncedWhileListenerReconnects(t *testing.T) {
	replay.Windowed(t, func(t *testing.T) {
		u := pgtest.URL(t)
		a := pgharness.Open(t, u)
		b := pgharness.Open(t, u)
		t.Cleanup(func() { a.Close(); b.Close() })
		started, _ := storetest.DueClient(t, b, false)
		ctx := context.Background()
		listeners := func() int {
			var n int
			if err := a.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND `+listenerSession+``).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := listeners(); n != 1 {
			t.Fatalf("%d LISTEN sessions, want the worker process's one", n)
		}
		if _, err := a.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND `+listenerSession+``); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); listeners() != 0; {
			if time.Now().After(deadline) {
				t.Fatal("the LISTEN session did not end")
			}
			time.Sleep(time.Millisecond)
		}
		due := time.Now().Add(300 * time.Millisecond)
		if _, err := a.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "due", Queue: "q", RunAt: due}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the due NOTIFY goes 5 ms after the enqueue
		if n := listeners(); n != 0 {
			t.Skipf("the listener reconnected before the NOTIFY went (%d sessions): the window was missed", n)
		}
		storetest.StartsWithin(t, started, due, 500*time.Millisecond, "a job enqueued for later while the worker process's listener reconnected")
	})
}

// skewFunction shadows pg_catalog.now() for the sessions whose search_path
// puts readpast_skew before pg_catalog: the database's clock as seen by
// those sessions runs behind the clocks of the hosts by the given
// interval, as a database host's does when its clock and the workers'
// disagree (NTP keeps hosts within milliseconds at best, tens of
// milliseconds commonly). No production statement is changed.
const skewFunction = `
CREATE SCHEMA IF NOT EXISTS readpast_skew;
CREATE OR REPLACE FUNCTION readpast_skew.now() RETURNS timestamptz
LANGUAGE sql STABLE AS $$ SELECT pg_catalog.now() - current_setting('readpast.skew')::interval $$`

// TestDueWithClockSkew: the alarm fires by the worker host's
// clock, 2 ms after run_at (alarmLate), but the claim compares run_at with
// the database's now(). When the database's clock runs behind the
// worker's by more than that, the claim the alarm starts finds the job not
// yet due, and nothing wakes the worker again: the job waits for the
// poll. The job is enqueued for later with an absolute RunAt, by the
// worker process itself and by another one.
func TestDueWithClockSkew(t *testing.T) {
	for _, skew := range []string{"0ms", "10ms", "50ms"} { // 0ms: the control
		for _, by := range []string{"this process", "another process"} {
			t.Run(skew+"/"+by, func(t *testing.T) {
				u := pgtest.URL(t)
				a := pgharness.Open(t, u)
				ctx := context.Background()
				if _, err := a.Pool().Exec(ctx, skewFunction); err != nil {
					t.Fatal(err)
				}
				pu, err := url.Parse(u)
				if err != nil {
					t.Fatal(err)
				}
				q := pu.Query()
				q.Set("search_path", "readpast_skew,pg_catalog,public")
				q.Set("readpast.skew", skew)
				pu.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
				b, err := postgres.Open(ctx, pu.String()) // the worker process, its clock ahead of the database's
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close(); b.Close() })
				var lag time.Duration
				var dbNow time.Time
				if err := b.Pool().QueryRow(ctx, "SELECT now()").Scan(&dbNow); err != nil {
					t.Fatal(err)
				}
				lag = time.Since(dbNow)
				t.Logf("the worker's session reads now() %v behind this host", lag.Round(time.Millisecond))
				started, _ := storetest.DueClient(t, b, false)
				enq := a
				if by == "this process" {
					enq = b
				}
				due := time.Now().Add(300 * time.Millisecond)
				if _, err := enq.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "due", Queue: "q", RunAt: due}}); err != nil {
					t.Fatal(err)
				}
				storetest.StartsWithin(t, started, due, 500*time.Millisecond, "a job due later, the database's clock "+skew+" behind the worker's")
			})
		}
	}
}

// TestEnqueueFarFutureDoesNotSpin: a job enqueued for a
// run_at more than 292 years ahead (year 9999 passes validation) makes
// the enqueuing store's alarm, and every listening store's alarm, spin
// (internal/wake TestAlarmFarFutureDoesNotSpin): each process burns a core
// from then on.
func TestEnqueueFarFutureDoesNotSpin(t *testing.T) {
	u := pgtest.URL(t)
	a := pgharness.Open(t, u)
	t.Cleanup(func() { a.Close() })
	ctx := context.Background()
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := a.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "never", Queue: "parked", RunAt: far}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before := cpu()
	const idle = 500 * time.Millisecond
	time.Sleep(idle)
	used := cpu() - before
	t.Logf("CPU used over %v of an idle store after enqueueing one job for %v: %v", idle, far.Year(), used)
	if used > idle/3 {
		t.Errorf("an idle store used %v of CPU in %v after one job was enqueued for the year %d: its due alarm spins", used, idle, far.Year())
	}
}
