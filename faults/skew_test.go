package faults_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/history"
	"github.com/readpast/readpast/internal/pgtest"
)

// TestClockSkew is scenario 7: the worker hosts' clocks are minutes off
// the database's. A Go program's clock cannot be moved (the runtime reads
// it through the vDSO, which libfaketime does not reach), and the worker
// processes here share the machine's clock, so the skew is put on the
// other side: PostgreSQL runs under libfaketime with its clock 5 minutes
// ahead, then 5 minutes behind, every worker process's. Relative to the
// database that is the same as worker hosts off by minutes.
//
// Leases are judged by the database's clock only, so no job may be lost,
// held twice or run over its group's limit. Retries too: a failed
// attempt's next run is due after the retry policy's delay (1 s here),
// neither at once (before the fix: a worker 5 minutes behind the
// database wrote its retry time 5 minutes in the database's past) nor 5
// minutes late.
func TestClockSkew(t *testing.T) {
	for _, skew := range []string{"+5m", "-5m"} {
		t.Run("db"+skew, func(t *testing.T) {
			srv := pgtest.ServerFor(t, pgtest.Options{Env: pgtest.FakeTimeEnv(t, skew)})
			url := srv.URL(newDatabase(t, srv))
			s := openPG(t, url)
			r := newRun(t, "clock-skew/db"+skew, s, pgNow(s))
			var dbNow time.Time
			if err := s.Pool().QueryRow(r.ctx, "SELECT now()").Scan(&dbNow); err != nil {
				t.Fatal(err)
			}
			off := time.Until(dbNow).Round(time.Second)
			if off.Abs() < 4*time.Minute {
				t.Fatalf("the database's clock is %v off ours, want about %s", off, skew)
			}
			spec := goWorker("postgres", url)
			spec.RetryDelay = time.Second
			for _, slot := range []string{"w1", "w2", "w3"} {
				r.worker(slot, spec)
			}
			r.enqueue(loadFor(10*time.Second), 8, true)
			r.waitEnqueued()
			if err := r.drain(time.Minute); err != nil {
				t.Error(err)
			}
			res := r.finish()
			early, late, n := retryTiming(res.events, spec.RetryDelay, 100*time.Millisecond, 3*time.Second)
			t.Logf("faults: clock-skew/db%s: database clock %v off the workers'; %d retries: %d early, %d late", skew, off, n, early, late)
			if n == 0 || early > 0 || late > 0 {
				t.Errorf("%d retries, %d ran early and %d late (policy: %v)", n, early, late, spec.RetryDelay)
			}
		})
	}
}

// retryTiming checks, for each failure accepted, when its job was claimed
// next: early if that claim returned before the failure was sent plus
// delay less slack, late if it was invoked after the failure returned
// plus delay plus lateSlack (counted for ungrouped jobs only).
func retryTiming(evs []history.Event, delay, slack, lateSlack time.Duration) (early, late, n int) {
	claims := map[int64][]history.Event{}
	for _, e := range evs {
		if e.Op == history.OpClaim {
			claims[e.ID] = append(claims[e.ID], e)
		}
	}
	for _, e := range evs {
		if e.Op != history.OpFail || e.Out != history.OutOK {
			continue
		}
		var next *history.Event
		for i, c := range claims[e.ID] {
			if c.Inv > e.Inv && (next == nil || c.Inv < next.Inv) {
				next = &claims[e.ID][i]
			}
		}
		if next == nil {
			continue
		}
		n++
		if next.Ret < e.Inv+int64(delay-slack) {
			early++
			fmt.Fprintf(os.Stderr, "job %d: failed at %s, claimed again %v later\n", e.ID, history.Time(e.Inv).Format(time.StampMilli), time.Duration(next.Ret-e.Inv))
		}
		// A job of a key waits for its key as well (a slot of its group,
		// a token of its rate): its next start may come later than the
		// policy says, by design. Ungrouped jobs show the retry's timing.
		if next.Inv > e.Ret+int64(delay+lateSlack) && next.Group == "" {
			late++
		}
	}
	return early, late, n
}
