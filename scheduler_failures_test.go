package readpast_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
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
	var logged bytes.Buffer
	sch := readpast.NewScheduler(failingFire{Store: s, name: "a"}, readpast.SchedulerConfig{
		Now: clock, Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	n, err := sch.Tick(ctx)
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "schedule=a") || !strings.Contains(logged.String(), "refused by the test") {
		t.Errorf("a's failure was not logged as a warning naming it and its error:\n%s", logged.String())
	}
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

// unparsable is a store whose due schedules begin with n schedules whose
// time zone this host does not know (as when the hosts' tzdata differ),
// all due before the stored ones.
type unparsable struct {
	readpast.Store
	n int
}

func (u unparsable) DueSchedules(ctx context.Context, now time.Time, limit int) ([]*readpast.Schedule, error) {
	var out []*readpast.Schedule
	early := now.Add(-time.Hour)
	for i := 0; i < u.n && len(out) < limit; i++ {
		out = append(out, &readpast.Schedule{Name: fmt.Sprintf("bad%03d", i), Cron: "0 * * * *", TimeZone: "Nowhere/Unknown", NextRunAt: &early, Version: 1})
	}
	rest, err := u.Store.DueSchedules(ctx, now, limit-len(out))
	return append(out, rest...), err
}

// TestSchedulerUnparsableCrowdsOutNone: a full batch of due schedules that
// do not parse on this host, due before another, does not stop the other
// from firing; each is logged and counted. Before, the scheduler skipped
// them without counting and read the same first batch again in every
// round, so b never fired.
func TestSchedulerUnparsableCrowdsOutNone(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, _, err := s.PutSchedule(ctx, readpast.ScheduleParams{Name: "b", Cron: "0 0 1 1 *", Job: readpast.EnqueueParams{Kind: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	const bad = 100 // a whole batch
	var logged bytes.Buffer
	sch := readpast.NewScheduler(unparsable{Store: s, n: bad}, readpast.SchedulerConfig{
		Now:    func() time.Time { return b.NextRunAt.Add(time.Second) },
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	n, err := sch.Tick(ctx)
	if n != 1 {
		t.Errorf("the scheduler made %d jobs, want b's one", n)
	}
	if err == nil {
		t.Error("Tick reported no error, though 100 schedules did not parse")
	}
	if got := sch.Failures(); got != bad {
		t.Errorf("Failures() = %d, want %d", got, bad)
	}
	if got := strings.Count(logged.String(), "level=WARN"); got != bad || !strings.Contains(logged.String(), "schedule=bad099") {
		t.Errorf("%d warnings logged, want %d, one naming each schedule:\n%.500s", got, bad, logged.String())
	}
}
