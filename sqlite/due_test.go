package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

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
			var fails <-chan time.Time
			if c == "retry of a failed attempt" {
				fails = failed
			}
			due := storetest.EnqueueDue(t, s, fails)
			storetest.StartsWithin(t, started, due, 500*time.Millisecond, c)
		})
	}
}
