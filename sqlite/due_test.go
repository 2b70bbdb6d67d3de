package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
	"github.com/readpast/readpast/storetest"
)

// TestJobComingDueStartsPromptly: a client with free workers and a poll
// interval of a minute; a job this process enqueues to become due 300 ms
// later, or a failed attempt retried 300 ms later, starts within 500 ms of
// becoming due (the store's alarm, due.go). Before, it waited for the poll.
func TestJobComingDueStartsPromptly(t *testing.T) {
	for _, c := range []string{"enqueued for later", "retry of a failed attempt"} {
		t.Run(c, func(t *testing.T) {
			ctx := context.Background()
			s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "due.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() }) // after DueClient's stop
			started, failed := storetest.DueClient(t, s, c == "retry of a failed attempt")
			due := time.Now().Add(300 * time.Millisecond)
			p := readpast.EnqueueParams{Kind: "due", Queue: "q", RunAt: due, MaxAttempts: 3}
			if c == "retry of a failed attempt" {
				p.RunAt = time.Time{}
			}
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{p}); err != nil {
				t.Fatal(err)
			}
			if c == "retry of a failed attempt" {
				select {
				case at := <-failed:
					due = at.Add(300 * time.Millisecond)
				case <-time.After(3 * time.Second):
					t.Fatal("the first attempt did not run")
				}
			}
			storetest.StartsWithin(t, started, due, 500*time.Millisecond, c)
		})
	}
}
