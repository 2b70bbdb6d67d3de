package history

import (
	"context"
	"errors"
	"time"

	"github.com/readpast/readpast"
)

// Store is a readpast.Store that records every enqueue, claim and worker
// write it passes on to the store it wraps.
type Store struct {
	readpast.Store
	log *Log
}

var (
	_ readpast.Store       = (*Store)(nil)
	_ readpast.Notifier    = (*Store)(nil)
	_ readpast.GroupPruner = (*Store)(nil)
	_ readpast.FlowPruner  = (*Store)(nil)
)

// Wrap returns s recording into log.
func Wrap(s readpast.Store, log *Log) *Store { return &Store{Store: s, log: log} }

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() readpast.Store { return s.Store }

func outcome(err error) string {
	switch {
	case err == nil:
		return OutOK
	case errors.Is(err, readpast.ErrStaleToken):
		return OutStale
	case errors.Is(err, readpast.ErrNotFound):
		return OutNotFound
	case errors.Is(err, readpast.ErrInvalid):
		return OutRefused
	default:
		return OutError
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Enqueue records one event per job returned, or one failed call.
func (s *Store) Enqueue(ctx context.Context, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	inv := ns(time.Now())
	out, err := s.Store.Enqueue(ctx, jobs)
	ret := ns(time.Now())
	if err != nil {
		s.log.Add(Event{Op: OpEnqueue, Inv: inv, Ret: ret, Out: outcome(err), N: len(jobs), Err: errText(err)})
		return out, err
	}
	for i, j := range out {
		s.log.Add(Event{Op: OpEnqueue, ID: j.ID, Group: jobs[i].Group, Inv: inv, Ret: ret, Out: OutOK})
	}
	return out, err
}

// Claim records the call and one event per job it took.
func (s *Store) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	inv := ns(time.Now())
	jobs, err := s.Store.Claim(ctx, p)
	ret := ns(time.Now())
	s.log.Add(Event{Op: OpClaimCall, Inv: inv, Ret: ret, Out: outcome(err), N: len(jobs), Err: errText(err)})
	lease := p.Lease
	if lease == 0 {
		lease = readpast.DefaultLease
	}
	for _, j := range jobs {
		g := ""
		if j.Group != nil {
			g = *j.Group
		}
		var more []string
		if len(j.Keys) > 1 {
			more = j.Keys[1:]
		}
		s.log.Add(Event{Op: OpClaim, ID: j.ID, Token: j.Token, Group: g, More: more, Inv: inv, Ret: ret, Lease: int64(lease)})
	}
	return jobs, err
}

// sent records, before the call, that a finishing write is on its way: a
// process killed before the call returns may still have had it applied.
func (s *Store) sent(op string, inv int64, ids []int64, tokens []string) {
	for i := range ids {
		s.log.Add(Event{Op: op, ID: ids[i], Token: tokens[i], Inv: inv, Out: OutSent})
	}
}

// batchEvents records one event per entry of a Complete or Fail batch.
func (s *Store) batchEvents(op string, inv int64, ids []int64, tokens []string, errs []error, err error) {
	ret := ns(time.Now())
	for i := range ids {
		e := err
		if err == nil && i < len(errs) {
			e = errs[i]
		}
		s.log.Add(Event{Op: op, ID: ids[i], Token: tokens[i], Inv: inv, Ret: ret, Out: outcome(e), Err: errText(e)})
	}
}

// Complete records one event per completion.
func (s *Store) Complete(ctx context.Context, cs []readpast.Completion) ([]error, error) {
	ids, toks := make([]int64, len(cs)), make([]string, len(cs))
	for i, c := range cs {
		ids[i], toks[i] = c.ID, c.Token
	}
	inv := ns(time.Now())
	s.sent(OpComplete, inv, ids, toks)
	errs, err := s.Store.Complete(ctx, cs)
	s.batchEvents(OpComplete, inv, ids, toks, errs, err)
	return errs, err
}

// Fail records one event per failure.
func (s *Store) Fail(ctx context.Context, fs []readpast.Failure) ([]error, error) {
	ids, toks := make([]int64, len(fs)), make([]string, len(fs))
	for i, f := range fs {
		ids[i], toks[i] = f.ID, f.Token
	}
	inv := ns(time.Now())
	s.sent(OpFail, inv, ids, toks)
	errs, err := s.Store.Fail(ctx, fs)
	s.batchEvents(OpFail, inv, ids, toks, errs, err)
	return errs, err
}

// Extend records the extension.
func (s *Store) Extend(ctx context.Context, id int64, token string, lease time.Duration) (time.Time, error) {
	inv := ns(time.Now())
	at, err := s.Store.Extend(ctx, id, token, lease)
	s.log.Add(Event{Op: OpExtend, ID: id, Token: token, Inv: inv, Ret: ns(time.Now()), Lease: int64(lease), Out: outcome(err), Err: errText(err)})
	return at, err
}

// Release records the release.
func (s *Store) Release(ctx context.Context, id int64, token string) error {
	inv := ns(time.Now())
	s.sent(OpRelease, inv, []int64{id}, []string{token})
	err := s.Store.Release(ctx, id, token)
	s.log.Add(Event{Op: OpRelease, ID: id, Token: token, Inv: inv, Ret: ns(time.Now()), Out: outcome(err), Err: errText(err)})
	return err
}

// Subscribe passes wake-ups on from the wrapped store, or fails if it has
// none (the Client then polls).
func (s *Store) Subscribe(ctx context.Context) (<-chan struct{}, error) {
	n, ok := s.Store.(readpast.Notifier)
	if !ok {
		return nil, errors.New("history: the wrapped store has no wake-ups")
	}
	return n.Subscribe(ctx)
}

// PruneGroups passes on to the wrapped store, if it prunes groups.
func (s *Store) PruneGroups(ctx context.Context, limit int) (int, error) {
	if p, ok := s.Store.(readpast.GroupPruner); ok {
		return p.PruneGroups(ctx, limit)
	}
	return 0, nil
}

// ResolveFlows passes on to the wrapped store, if it leaves flows' edges
// to a resolver: a Client on the wrapped store then resolves them at its
// rescuer's ticks.
func (s *Store) ResolveFlows(ctx context.Context, limit int) (int, error) {
	if r, ok := s.Store.(readpast.FlowResolver); ok {
		return r.ResolveFlows(ctx, limit)
	}
	return 0, nil
}

// PruneFlows passes on to the wrapped store, if it keeps flows: its Prune
// leaves their jobs to it.
func (s *Store) PruneFlows(ctx context.Context, p readpast.FlowPruneParams) (int, int64, error) {
	if fp, ok := s.Store.(readpast.FlowPruner); ok {
		return fp.PruneFlows(ctx, p)
	}
	return 0, 0, nil
}

// Handler wraps fn so that every run records its start and end.
func Handler(log *Log, fn readpast.HandlerFunc) readpast.HandlerFunc {
	return func(ctx context.Context, job *readpast.Job) (any, error) {
		log.Add(Event{Op: OpStart, ID: job.ID, Token: job.Token, Inv: ns(time.Now())})
		defer func() { log.Add(Event{Op: OpEnd, ID: job.ID, Token: job.Token, Inv: ns(time.Now())}) }()
		return fn(ctx, job)
	}
}
