package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// slotFreers are the finishers and the other ways of ending a running
// job that give its group slot back: a failure with a later retry, one
// that discards the job, a snooze and a bulk cancel.
var slotFreers = append(finishers[:len(finishers):len(finishers)], []finisher{
	{"fail with a later retry", time.Minute, func(ctx context.Context, s *postgres.Store, j *readpast.Job) error {
		return first(s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "x", RetryAt: time.Now().Add(time.Hour)}}))
	}},
	{"discard", time.Minute, func(ctx context.Context, s *postgres.Store, j *readpast.Job) error {
		return first(s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "x", Discard: true}}))
	}},
	{"snooze", time.Minute, func(ctx context.Context, s *postgres.Store, j *readpast.Job) error {
		return s.Snooze(ctx, j.ID, j.Token, time.Hour)
	}},
	{"bulk cancel", time.Minute, func(ctx context.Context, s *postgres.Store, j *readpast.Job) error {
		_, err := s.BulkCancel(ctx, readpast.JobFilter{Group: "G", State: readpast.StateRunning})
		return err
	}},
}...)

// TestLateJobOfAFullGroupIsAnnounced replays the window between a
// finisher's snapshot and its lock on the group row (CI stranded one job
// of 22,000 in ConcurrentGroupsNoOverlap through it):
//
//  1. group G is full: its one job A runs;
//  2. A's finisher stops before the group row: its snapshot is taken;
//  3. a late job L joins G, with its ready mark;
//  4. a claim holds G's row, finds G full, takes nothing and uses up G's
//     due marks, L's among them: marking G again is left to whoever frees
//     the slot;
//  5. the finisher frees the slot.
//
// The finisher must then mark L, which its statement's snapshot does not
// show; a claim takes L at once. Before the fix the marks came from that
// snapshot, and L waited for good (complete, cancel, discard, bulk
// cancel) or until A came due again (a later retry, a snooze).
func TestLateJobOfAFullGroupIsAnnounced(t *testing.T) {
	ctx := context.Background()
	for _, f := range slotFreers {
		t.Run(f.name, func(t *testing.T) {
			s := newStore(t)
			defer s.Close()
			groupJobs(t, s, "G", 1)
			p := claimP("w", 1)
			p.Lease = f.lease
			head, err := s.Claim(ctx, p)
			if err != nil || len(head) != 1 {
				t.Fatalf("claimed %v, %v; want G's one job", head, err)
			}
			finisher := newStall(t, s, "finish.group_rows")
			finished := async(func() error { return f.finish(ctx, finisher.store, head[0]) })
			finisher.waitBlocked()

			lateJobIsTaken(t, s, finisher, "the "+f.name, finished)
			checkGroups(t, s)
		})
	}
}

// TestLateJobIsAnnouncedWhenTheLimitRises is the same window for
// SetGroupLimit (PutLimit): it raises a full group's limit after a claim
// used up the mark of a job its snapshot does not show.
func TestLateJobIsAnnouncedWhenTheLimitRises(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	groupJobs(t, s, "G", 1)
	if head := mustClaim(t, s, "w", 1); len(head) != 1 {
		t.Fatalf("claimed %d jobs, want G's one job", len(head))
	}
	setter := newStall(t, s, "limit.apply")
	set := async(func() error { return setter.store.SetGroupLimit(ctx, "G", 2) })
	setter.waitBlocked()

	lateJobIsTaken(t, s, setter, "SetGroupLimit", set)
	checkGroups(t, s)
}

// lateJobIsTaken plays steps 3 to 5 of TestLateJobOfAFullGroupIsAnnounced
// while st holds what, the call behind done, before group G's row: a late
// job joins G and a claim finds G full; then what goes on, and the next
// claim must take the late job.
func lateJobIsTaken(t *testing.T, s *postgres.Store, st *stall, what string, done <-chan error) {
	t.Helper()
	late, err := s.Enqueue(context.Background(), []readpast.EnqueueParams{{Kind: "k", Group: "G", Priority: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimWithin(t, "a claim while G is full", 2*time.Second, s, claimP("c", 10)); len(got) != 0 {
		t.Fatalf("a claim while G is full took %d jobs", len(got))
	}
	st.open()
	within(t, what, 5*time.Second, done)
	got := claimWithin(t, "a claim after "+what, 2*time.Second, s, claimP("d", 10))
	if len(got) != 1 || got[0].ID != late[0].ID {
		ids := make([]int64, len(got))
		for i, j := range got {
			ids[i] = j.ID
		}
		t.Fatalf("after %s a claim took %v, want the late job %d", what, ids, late[0].ID)
	}
}
