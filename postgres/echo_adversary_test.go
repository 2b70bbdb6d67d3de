package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/netfault"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// echoAdv is two stores on one database with their listeners up, and
// their claimers' subscriptions.
type echoAdv struct {
	t          *testing.T
	a, b       *postgres.Store
	subA, subB <-chan struct{}
	admin      *pgxpool.Pool
}

func newEchoAdv(t *testing.T, url string) *echoAdv { return newEchoAdvOn(t, url, url) }

// newEchoAdvOn opens a on urlA and b on urlB (the same database).
func newEchoAdvOn(t *testing.T, urlA, urlB string) *echoAdv {
	t.Helper()
	ctx := context.Background()
	e := &echoAdv{t: t, a: pgharness.Open(t, urlA), b: pgharness.Open(t, urlB)}
	t.Cleanup(func() { _ = e.a.Close() })
	t.Cleanup(func() { _ = e.b.Close() })
	var err error
	if e.subA, err = e.a.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if e.subB, err = e.b.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	e.admin = e.b.Pool()
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatal("the stores' listeners did not start within 10 rounds")
		}
		e.notify("backlog")
		ha, hb := e.heard(e.a, 2*time.Second), e.heard(e.b, 2*time.Second)
		if ha && hb {
			break
		}
	}
	e.settle()
	return e
}

func (e *echoAdv) notify(payload string) {
	e.t.Helper()
	if _, err := e.admin.Exec(context.Background(), "SELECT pg_notify('readpast', $1)", payload); err != nil {
		e.t.Fatal(err)
	}
}

func (e *echoAdv) heard(s *postgres.Store, within time.Duration) bool {
	select {
	case <-s.FlowBacklog():
		return true
	case <-time.After(within):
		return false
	}
}

func woken(sub <-chan struct{}) bool {
	select {
	case <-sub:
		return true
	default:
		return false
	}
}

// wokenWithin waits up to d for sub to be woken.
func (e *echoAdv) wokenWithin(sub <-chan struct{}, d time.Duration) bool {
	select {
	case <-sub:
		return true
	case <-time.After(d):
		return false
	}
}

// settle returns once both listeners handled every NOTIFY sent so far
// (notifications reach each listener in commit order), and whether each
// store's claimers were woken meanwhile.
func (e *echoAdv) settle() (wokeA, wokeB bool) {
	e.t.Helper()
	e.notify("backlog")
	for _, s := range []*postgres.Store{e.a, e.b} {
		if !e.heard(s, 10*time.Second) {
			e.t.Fatal("a listener did not hand over a NOTIFY within 10 s")
		}
	}
	return woken(e.subA), woken(e.subB)
}

// TestEchoAdversaryExecModes: in every exec mode, an enqueue of a's (its
// NOTIFY in its statement, left to the trailing NOTIFY, or written with
// COPY) wakes a's claimers once (at the Enqueue's return; the echo is
// passed over) and b's claimers through the NOTIFY; an EnqueueTx wakes
// a's claimers through a's listener.
func TestEchoAdversaryExecModes(t *testing.T) {
	for _, mode := range []string{"", "simple_protocol", "exec", "cache_describe", "describe_exec"} {
		t.Run("mode="+mode, func(t *testing.T) {
			url := pgtest.URL(t)
			if mode != "" {
				url += "&default_query_exec_mode=" + mode
			}
			e := newEchoAdv(t, url)
			ctx := context.Background()
			check := func(what string, enqueue func()) {
				t.Helper()
				enqueue()
				ownAtOnce := woken(e.subA)
				wa, wb := e.settle()
				if !ownAtOnce || wa || !wb {
					t.Errorf("%s: a's claimers woken at the return %v (want true), again by the NOTIFY %v (want false); b's %v (want true)", what, ownAtOnce, wa, wb)
				}
			}
			one := []readpast.EnqueueParams{{Kind: "k", Queue: "q"}}
			postgres.SetNotifyEvery(e.a, 0)
			check("an enqueue notifying in its statement", func() {
				if _, err := e.a.Enqueue(ctx, one); err != nil {
					t.Fatal(err)
				}
			})
			many := make([]readpast.EnqueueParams, postgres.CopyMinJobs)
			for i := range many {
				many[i] = readpast.EnqueueParams{Kind: "k", Queue: "q"}
			}
			check("an enqueue with COPY notifying in its transaction", func() {
				if _, err := e.a.Enqueue(ctx, many); err != nil {
					t.Fatal(err)
				}
			})
			postgres.SetNotifyEvery(e.a, time.Hour)
			// The trailing NOTIFY is handed to the store's outbox: once b's
			// claimers are woken by it, a later NOTIFY comes after it.
			if _, err := e.a.Enqueue(ctx, one); err != nil {
				t.Fatal(err)
			}
			ownAtOnce := woken(e.subA)
			postgres.FlushNotify(e.a)
			wb := e.wokenWithin(e.subB, 10*time.Second)
			if wa, _ := e.settle(); !ownAtOnce || wa || !wb {
				t.Errorf("an enqueue left to the trailing NOTIFY: a's claimers woken at the return %v (want true), again by the NOTIFY %v (want false); b's %v (want true)", ownAtOnce, wa, wb)
			}
			tx, err := e.a.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.a.EnqueueTx(ctx, tx, one); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if wa, wb := e.settle(); !wa || !wb {
				t.Errorf("an EnqueueTx: a's claimers woken %v, b's %v (want both)", wa, wb)
			}
		})
	}
}

// TestEchoAdversaryCommitAfterError: an Enqueue whose statement commits
// after the call returned its error. Here the statement waits (on a lock a
// test trigger takes) when the network between store a and the server
// fails; the caller's context ends, pgx gives up on the connection and its
// cancel request cannot get through, so Enqueue returns the error; then
// the statement goes on and commits (in life: a slow commit flush, a
// synchronous standby, any network failure mid-statement). Store.Enqueue
// wakes a's claimers as it returns the error, before the job exists; the
// statement's NOTIFY, sent at the commit, carries a's echo, and a's
// listener passes it over once the network heals. So a's claimers are
// never woken for the job (they wait for their poll), while b's are.
// Before the change the NOTIFY was empty and woke a's claimers after the
// commit.
func TestEchoAdversaryCommitAfterError(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	proxy, proxied, err := netfault.StartURL(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	e := newEchoAdvOn(t, proxied, url) // a through the proxy, b and admin direct

	// The enqueue statement of queue "late" waits, before its commit,
	// for a lock the test holds.
	for _, stmt := range []string{
		`CREATE FUNCTION echo_adv_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		 BEGIN
		   IF NEW.queue = 'late' THEN PERFORM pg_advisory_xact_lock_shared(4242); END IF;
		   RETURN NEW;
		 END $$`,
		`CREATE TRIGGER echo_adv_hold BEFORE INSERT ON readpast_jobs FOR EACH ROW EXECUTE FUNCTION echo_adv_hold()`,
	} {
		if _, err := e.admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := e.admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		t.Fatal(err)
	}
	postgres.SetNotifyEvery(e.a, 0) // the enqueue notifies in its statement

	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.a.Enqueue(ectx, []readpast.EnqueueParams{{Kind: "k", Queue: "late"}})
		errc <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var waiting int
		if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = 4242`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the enqueue statement did not come to wait on the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	proxy.Partition()
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the Enqueue returned no error")
		}
		t.Logf("the Enqueue returned: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the Enqueue did not return within 20 s of its context's end")
	}
	woken(e.subA) // its wake-up at the error: the job does not exist yet

	// The statement goes on and commits.
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(4242)"); err != nil {
		t.Fatal(err)
	}
	for {
		var n int
		if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM readpast_jobs WHERE queue = 'late'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the statement did not commit")
		}
		time.Sleep(5 * time.Millisecond)
	}
	wb := e.wokenWithin(e.subB, 10*time.Second) // b heard the statement's NOTIFY
	proxy.Heal()
	wa, _ := e.settle()
	var jobs []*readpast.Job
	for range 50 { // a's pool may need a new connection after the partition
		if jobs, err = e.b.Claim(ctx, readpast.ClaimParams{Queues: []string{"late"}, Worker: "w", Limit: 1, Lease: time.Minute}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(jobs))
	}
	if !wa || !wb {
		t.Errorf("a job committed after its Enqueue returned an error was claimable; its NOTIFY woke a's claimers %v, b's %v (want both)", wa, wb)
	}
}
