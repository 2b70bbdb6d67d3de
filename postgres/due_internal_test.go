package postgres

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/wake"
)

// TestDueLaterWithTheDatabaseClockBehind: a job written for later by the
// database's clock (run_at after created_at) whose run_at this host's
// clock has passed already, as an enqueue with RunAt = time.Now() is when
// the database's clock runs behind this host's, becomes due later by the
// database's clock. Its enqueue's wake-up comes too early, so its alarm
// comes dueSkew from now, and other processes hear its time. A job whose
// run_at is its creation time (not written for later) gets none.
func TestDueLaterWithTheDatabaseClockBehind(t *testing.T) {
	for _, c := range []struct {
		name  string
		ahead time.Duration // created_at before run_at
		want  bool
	}{
		{"run_at after created_at, passed on this host", 50 * time.Millisecond, true},
		{"run_at at created_at", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fired := make(chan time.Time, 8)
			var (
				mu   sync.Mutex
				sent []string
			)
			s := &Store{}
			s.due = wake.NewAlarm(func() { fired <- time.Now() })
			t.Cleanup(s.due.Stop)
			s.dueOut.send = func(p string) { mu.Lock(); sent = append(sent, p); mu.Unlock() }
			runAt := time.Now().Add(-time.Millisecond)
			s.dueLater([]*readpast.Job{{RunAt: runAt, CreatedAt: runAt.Add(-c.ahead)}}, true)
			s.dueOut.flush()
			wrote := time.Now()
			select {
			case at := <-fired:
				if !c.want {
					t.Fatalf("an alarm %v after the write, for a job due at once", at.Sub(wrote))
				}
				if at.Before(runAt.Add(dueSkew)) {
					t.Errorf("the alarm came %v after the run_at, before dueSkew (%v)", at.Sub(runAt), dueSkew)
				}
			case <-time.After(dueSkew + time.Second):
				if c.want {
					t.Fatal("no alarm: the job waits for the poll")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string(nil)
			if c.want {
				want = []string{duePrefix + strconv.FormatInt(runAt.UnixMicro(), 10)}
			}
			if strings.Join(sent, " ") != strings.Join(want, " ") {
				t.Errorf("announced %q, want %q", sent, want)
			}
		})
	}
}
