package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestListenStartAlarmsForTimesReadLate: a store that starts listening
// reads the due times it could not hear (due_upcoming.sql) and sets an
// alarm for each. A key out of tokens has its next start only in a ready
// mark, and nothing but that alarm wakes a claimer for it. The read's
// answer can arrive when the time is only a few milliseconds ahead, or
// already past (a slow LISTEN start on a loaded machine, the stall here):
// an alarm skipped for a time "soon" (the dueSoon rule for times the
// store writes itself, whose own wake-up finds them) leaves the key's job
// to the poll, 30 s here.
func TestListenStartAlarmsForTimesReadLate(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   time.Duration // when the read's answer is let go, from the next start
	}{
		{"10ms before", -10 * time.Millisecond},
		{"200ms after", 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			t.Cleanup(func() { s.Close() }) // after the client stops
			putLimit(t, s, readpast.Limit{Key: "api", Rate: 1, Per: time.Second, Burst: 1})
			advEnqueueKey(t, s, "api", 2)
			// Another process takes the first job: the key's next start
			// is a second away, announced while nobody listened.
			got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "other", Limit: 10, Lease: time.Minute})
			if err != nil || len(got) != 1 {
				t.Fatalf("claimed %v, %v; want api's first job", got, err)
			}
			var next time.Time
			if err := s.Pool().QueryRow(ctx,
				"SELECT run_at FROM readpast_group_ready WHERE group_key = 'api'").Scan(&next); err != nil {
				t.Fatalf("api's next start: %v", err)
			}
			st := newStall(t, s, "listen.due_upcoming")
			c := startAdvClient(t, st.store, 30*time.Second)
			st.waitBlocked()
			time.Sleep(time.Until(next.Add(tc.at)))
			st.open()
			if n := c.waitStarts("api", 1, 3*time.Second); n != 1 {
				t.Errorf("api's next start was read %v from it, as the store began to listen: workers polling every 30 s started %d of its jobs in 3 s",
					tc.at, n)
			}
		})
	}
}
