package faults_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
)

// durable is the server setting every scenario that kills PostgreSQL
// needs: a commit is acknowledged only once its WAL is written, so it
// survives a SIGKILL of the server (fsync stays off: the machine does not
// crash, only the processes die).
var durable = []string{"synchronous_commit=on"}

// TestPostgresKilled is scenario 2: PostgreSQL is SIGKILLed (postmaster
// and every backend) every 3-5 s while three Go worker processes,
// `readpast serve` and two Python workers long-polling through it work a
// stream of jobs, and is restarted after 1-3 s (crash recovery). Nobody is
// told: the Go clients, the server and the Python workers reconnect by
// themselves. Recovery is the time from the restart returning (the
// database accepts connections again) to each process's first claim
// that went through.
func TestPostgresKilled(t *testing.T) {
	needPython(t)
	srv := pgtest.ServerFor(t, pgtest.Options{Settings: durable})
	url := srv.URL(newDatabase(t, srv))
	s := openPG(t, url)
	r := newRun(t, "postgres-killed", s, pgNow(s))
	// Leases of 10 s outlast every outage: a job that finishes while the
	// database is away keeps its lease (the completion is retried, the
	// heartbeat goes on) and must not run again.
	spec := goWorker("postgres", url)
	spec.Lease = 10 * time.Second
	for _, slot := range []string{"w1", "w2", "w3"} {
		r.worker(slot, spec)
	}
	addr := freeAddr(t)
	r.server("srv", addr, url)
	r.pyWorker("py1", addr, spec.Lease)
	r.pyWorker("py2", addr, spec.Lease)
	d := loadFor(15 * time.Second)
	r.enqueue(d, 8, true)
	end := time.Now().Add(d)
	ctx := context.Background()
	for {
		// Every outage ends with load still coming, so that recovery
		// shows.
		wait, outage := 3*time.Second+rand.N(2*time.Second), time.Second+rand.N(2*time.Second)
		if time.Now().Add(wait + outage + 2*time.Second).After(end) {
			break
		}
		time.Sleep(wait)
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(outage)
		if err := srv.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		r.fault("postgres back", time.Now())
	}
	r.waitEnqueued()
	if err := r.drain(2 * time.Minute); err != nil {
		t.Error(err)
	}
	res := r.finish()
	res.checkResumed(t, "postgres-killed")
	if res.Redone > 0 {
		t.Errorf("%d runs finished during an outage shorter than their lease and ran again", res.Redone)
	}
}
