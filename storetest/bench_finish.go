package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// BenchFinish measures what each way of ending a running job costs the
// store, per job: complete and fail in batches of 100 (as the client's
// completer sends them), and release, snooze and cancel one job a call
// (as handlers and operators do). Each round enqueues 1,000 jobs, claims
// them, and times only the finishing. A failure with attempts left is
// retried an hour later; a discarded one fails for good; a snooze is for
// an hour. Reported as us/job.
func BenchFinish(b *testing.B, s readpast.Store) {
	ctx := context.Background()
	const n, batch = 1000, 100
	outcomes := []struct {
		name   string
		finish func(js []*readpast.Job) error
	}{
		{"complete", func(js []*readpast.Job) error {
			cs := make([]readpast.Completion, len(js))
			for i, j := range js {
				cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
			}
			return joinErrs(s.Complete(ctx, cs))
		}},
		{"fail-retry", func(js []*readpast.Job) error {
			fs := make([]readpast.Failure, len(js))
			for i, j := range js {
				fs[i] = readpast.Failure{ID: j.ID, Token: j.Token, Message: "boom", RetryAt: time.Now().Add(time.Hour)}
			}
			return joinErrs(s.Fail(ctx, fs))
		}},
		{"fail-discard", func(js []*readpast.Job) error {
			fs := make([]readpast.Failure, len(js))
			for i, j := range js {
				fs[i] = readpast.Failure{ID: j.ID, Token: j.Token, Message: "boom", Discard: true}
			}
			return joinErrs(s.Fail(ctx, fs))
		}},
		{"release", func(js []*readpast.Job) error {
			for _, j := range js {
				if err := s.Release(ctx, j.ID, j.Token); err != nil {
					return err
				}
			}
			return nil
		}},
		{"snooze", func(js []*readpast.Job) error {
			for _, j := range js {
				if err := s.Snooze(ctx, j.ID, j.Token, time.Hour); err != nil {
					return err
				}
			}
			return nil
		}},
		{"cancel", func(js []*readpast.Job) error {
			for _, j := range js {
				if _, err := s.Cancel(ctx, j.ID); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, o := range outcomes {
		b.Run(o.name, func(b *testing.B) {
			queue := "finish-" + o.name
			var spent time.Duration
			for range b.N {
				ps := make([]readpast.EnqueueParams, n)
				for i := range ps {
					ps[i] = readpast.EnqueueParams{Kind: "k", Queue: queue, MaxAttempts: 5}
				}
				if _, err := s.Enqueue(ctx, ps); err != nil {
					b.Fatal(err)
				}
				var js []*readpast.Job
				for len(js) < n {
					got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{queue}, Limit: batch, Lease: time.Hour, Worker: "w"})
					if err != nil {
						b.Fatal(err)
					}
					if len(got) == 0 {
						b.Fatalf("claimed %d of %d", len(js), n)
					}
					js = append(js, got...)
				}
				start := time.Now()
				for i := 0; i < n; i += batch {
					if err := o.finish(js[i : i+batch]); err != nil {
						b.Fatalf("%s: %v", o.name, err)
					}
				}
				spent += time.Since(start)
			}
			b.ReportMetric(float64(spent.Microseconds())/float64(b.N*n), "us/job")
		})
	}
}

// joinErrs is the call's error and its per-entry errors, nil when none.
func joinErrs(errs []error, err error) error { return errors.Join(append(errs, err)...) }
