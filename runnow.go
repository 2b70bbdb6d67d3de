package readpast

import (
	"context"
	"fmt"
	"time"
)

// RunSchedule enqueues one job made from the job of the schedule called
// name (its queue, kind, payload, priority, group and max attempts), due
// now: "Run now" for a schedule, the same on every store. A paused
// schedule runs too. An unknown name is ErrScheduleNotFound.
//
// A manual run is not a tick: it changes nothing of the schedule (its
// next tick, its last tick and job, its version) and is not among its
// runs (Store.ScheduleRuns), which hold ticks only. So every tick still
// fires exactly once, a manual run or not (docs/design/schedules.md). It
// is an enqueue of the schedule's job as GetSchedule read it: a run
// racing a change of the schedule uses the job from before or after the
// change, and one racing a DeleteSchedule may enqueue the job of the
// schedule being deleted, as the jobs a schedule made outlive it.
func RunSchedule(ctx context.Context, s Store, name string) (*Job, error) {
	sc, err := s.GetSchedule(ctx, name)
	if err != nil {
		return nil, err
	}
	p := sc.Job
	p.RunAt = time.Time{} // now
	jobs, err := s.Enqueue(ctx, []EnqueueParams{p})
	if err != nil {
		return nil, fmt.Errorf("run schedule %q: %w", name, err)
	}
	if len(jobs) != 1 {
		return nil, fmt.Errorf("run schedule %q: the store returned %d jobs for 1 enqueued", name, len(jobs))
	}
	return jobs[0], nil
}
