package postgres

import (
	"context"
	"fmt"
)

// markGroupHeadsSQL marks a group's next claimable jobs, one a queue.
var markGroupHeadsSQL = mustStatement("mark_group_heads")

// markGroupHeads marks group's next claimable jobs (sql/mark_group_heads.sql)
// after a cancel of one of its jobs committed.
//
// A pending job that leaves its group (a cancel) may carry the only ready
// mark that leads claims to the group, and that mark is in its own queue:
// when no claimer reads that queue (it is paused, or no worker serves it),
// the group's jobs in other queues were never claimed. The cancel's own
// statement cannot mark them: a job enqueued after its snapshot brings a
// mark of its own, but a claim that held the group meanwhile, and still saw
// the cancelled job as the group's head, may have used that mark up and
// marked only the cancelled job. A statement that starts after the cancel
// committed sees every such job, and a claim whose snapshot is later than
// that statement's sees the cancelled job gone; the marks it inserts are
// newer than any claim's snapshot that could use them up without taking
// or marking the group's next jobs (TestCancelledHeadLeavesAMark).
func (s *Store) markGroupHeads(ctx context.Context, group string) error {
	if _, err := s.pool.Exec(ctx, markGroupHeadsSQL, group); err != nil {
		return fmt.Errorf("mark group %q: %w", group, err)
	}
	s.hub.Broadcast()
	return nil
}
