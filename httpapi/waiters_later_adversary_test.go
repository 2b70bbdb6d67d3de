package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/replay"
)

// TestAdvWakeFullKeyOutOfTokensNotByItsClaim: a request waits (4 s,
// the server polling once an hour) for the next job of a key of
// concurrency 1 whose running job completes before the key's next start;
// the key ran out of tokens other than by a claim that took jobs of it as
// its first key, so no alarm was set for that start:
//   - tokens: TakeTokens spent the token the claim left;
//   - later key: the key was only a later key of the claimed job (Keys
//     [g, h]) in a claim of one job.
func TestAdvWakeFullKeyOutOfTokensNotByItsClaim(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		for _, how := range []string{"tokens", "later key"} {
			replay.Run(t, store+"/"+how, func(t *testing.T) {
				e, _ := adv4Envs(t, store)
				ctx := context.Background()
				per := 500 * time.Millisecond
				var want int64
				var first *readpast.Job
				if how == "tokens" {
					if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 1, Rate: 1, Per: per, Burst: 2}); err != nil {
						t.Fatal(err)
					}
					js, err := e.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "a", Queue: "rk", Group: "g"}, {Kind: "b", Queue: "rk", Group: "g"}})
					if err != nil {
						t.Fatal(err)
					}
					want = js[1].ID
					got, err := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"rk"}, Worker: "w", Limit: 10, Lease: time.Minute})
					if err != nil || len(got) != 1 {
						t.Fatalf("claim: %v %v", got, err)
					}
					first = got[0]
					if g, err := e.store.TakeTokens(ctx, "g", 1); err != nil || !g.Granted {
						t.Fatalf("TakeTokens: %+v %v", g, err)
					}
				} else {
					if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "h", Concurrency: 1, Rate: 1, Per: per, Burst: 1}); err != nil {
						t.Fatal(err)
					}
					if _, err := e.store.PutLimit(ctx, readpast.Limit{Key: "g", Concurrency: 10}); err != nil {
						t.Fatal(err)
					}
					js, err := e.store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "x", Queue: "rk", Keys: []string{"g", "h"}}, {Kind: "z", Queue: "rk", Group: "h"}})
					if err != nil {
						t.Fatal(err)
					}
					want = js[1].ID
					got, err := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"rk"}, Worker: "w", Limit: 1, Lease: time.Minute})
					if err != nil || len(got) != 1 || got[0].ID != js[0].ID {
						t.Fatalf("claim: %v %v", got, err)
					}
					first = got[0]
				}
				took := time.Now()
				got := adv4ClaimReq(e, "rk", 1, 4) // claims on arrival: the key is full
				adv4Waiting(t, e, "rk", 1)
				res, err := e.store.Complete(ctx, []readpast.Completion{{ID: first.ID, Token: first.Token}})
				if err != nil || res[0] != nil {
					t.Fatal(err, res)
				}
				if time.Since(took) >= per {
					t.Skip("completed after the next start: no window")
				}
				js := <-got
				if len(js) != 1 || js[0].ID != want {
					left, _ := e.store.Claim(ctx, readpast.ClaimParams{Queues: []string{"rk"}, Worker: "check", Limit: 1, Lease: time.Minute})
					t.Fatalf("the waiting request (4 s) got %d jobs; job %d was claimable from the key's next start, under %v after the first claim (a plain claim now gets %d jobs): no wake-up at the key's next start",
						len(js), want, per, len(left))
				}
			})
		}
	}
}
