package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Subscribe wakes the caller when jobs may have become claimable: at once
// for changes made through this Store, and through LISTEN/NOTIFY for
// changes made by other processes. Where LISTEN is unavailable (behind a
// transaction-mode pooler) only local wake-ups arrive; callers poll too.
//
// With readpast_listen=off in the URL (Open) there is no LISTEN session.
func (s *Store) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	if !s.noListen {
		s.listenOnce.Do(func() { go s.listen() })
	}
	return s.hub.Subscribe(ctx)
}

// listen holds one dedicated connection in LISTEN readpast until the store
// closes, reconnecting after errors.
func (s *Store) listen() {
	ctx := s.closeCtx
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenConn(ctx)
		if ctx.Err() != nil {
			return
		}
		_ = err // a lost listener only delays wake-ups to the poll interval
		s.hub.Broadcast()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (s *Store) listenConn(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer closeConn(conn)
	if _, err := conn.Exec(ctx, "LISTEN readpast"); err != nil {
		return err
	}
	// Anything enqueued before LISTEN took effect sent no wake-up we saw,
	// and no due time we heard: a wake-up at once (the read below may be
	// slow on a network that just failed), alarms for what is not due when
	// dueUpcoming reads, then a wake-up for what came due before the read
	// (TestListenStartAlarmsForTimesReadLate).
	s.hub.Broadcast()
	s.dueUpcoming(ctx)
	s.hub.Broadcast()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch {
		case n.Payload == aheadPayload:
			// Jobs became pending where a claim position may have
			// passed (flows' released children): the next claim is
			// a full one, then the claimers wake.
			s.pendingAgain()
		case s.echoes.passOver(n.Payload):
			// This store's own enqueue, whose claimers it woke itself
			// once the enqueue committed.
		case n.Payload == backlogPayload:
			// A parent left edges to the resolver: wake it.
			select {
			case s.backlog <- struct{}{}:
			default: // a wake is pending already
			}
		case !s.heardDue(n.Payload):
			s.hub.Broadcast()
		}
	}
}

// aheadPayload is the payload of a NOTIFY readpast saying that jobs
// became pending at places claim positions may have passed
// (migrations/0016_flows.sql, released children).
const aheadPayload = "ahead"

// backlogPayload is the payload of a NOTIFY readpast saying that a
// parent left edges to the resolver (migrations/0018_flow_backlog_wake.sql).
const backlogPayload = "backlog"

// FlowBacklog is woken when a parent, in any process, leaves edges to the
// resolver (readpast.FlowBacklogWaker): RunRescuer resolves them then
// rather than at its next tick. One wake stands for any number. It starts
// the store's LISTEN session, as Subscribe does (none with
// readpast_listen=off: then the resolver runs at its ticks only).
func (s *Store) FlowBacklog() <-chan struct{} {
	if !s.noListen {
		s.listenOnce.Do(func() { go s.listen() })
	}
	return s.backlog
}

// closeConn closes a connection the store opened outside its pool, giving
// the goodbye to the server a second at most: with no deadline, a
// connection that answers nothing (half-open) could hold up Close, and a
// client's Stop with it, for as long as the network takes to give up.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
