package readpast_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// failingFire is a store whose fires of one schedule fail.
type failingFire struct {
	readpast.Store
	name string
}

func (f failingFire) FireSchedule(ctx context.Context, fi readpast.Firing) (bool, *readpast.Job, error) {
	if fi.Name == f.name {
		return false, nil, errors.New("refused by the test")
	}
	return f.Store.FireSchedule(ctx, fi)
}

// TestSchedulerFiresEachOnItsOwn: a schedule whose fire fails, due before
// another, does not stop the other from firing: the scheduler logs and
// counts the failure and goes on. Before, Tick returned at the first
// failure, and every schedule due after it made no job.
func TestSchedulerFiresEachOnItsOwn(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := func(name, cron string) *readpast.Schedule {
		sc, _, err := s.PutSchedule(ctx, readpast.ScheduleParams{Name: name, Cron: cron, Job: readpast.EnqueueParams{Kind: name}})
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	put("a", "0 0 1 1 *")      // new year: due first
	b := put("b", "1 0 1 1 *") // a minute later
	clock := func() time.Time { return b.NextRunAt.Add(time.Second) }
	sch := readpast.NewScheduler(failingFire{Store: s, name: "a"}, readpast.SchedulerConfig{Now: clock})
	n, err := sch.Tick(ctx)
	if n != 1 {
		t.Errorf("the scheduler made %d jobs, want b's one (a's fire fails)", n)
	}
	if err == nil {
		t.Error("Tick reported no error, though a's fire failed")
	}
	if got := sch.Failures(); got != 1 {
		t.Errorf("Failures() = %d, want 1", got)
	}
	if runs, err := s.ScheduleRuns(ctx, "b", 10); err != nil || len(runs) != 1 {
		t.Errorf("b's runs: %v, %v; want one", runs, err)
	}
}
