package faults_test

import (
	"testing"
	"time"

	"github.com/readpast/readpast/internal/netfault"
	"github.com/readpast/readpast/internal/pgtest"
)

// TestNetworkFaults is scenario 3: three Go worker processes reach
// PostgreSQL through a fault proxy (internal/netfault, on 127.0.0.1)
// that, in turn, 2 s apart (3.5 s after a cut or a heal, whose recovery
// is judged against 3 s): adds 50 ms of latency each way for 2 s;
// cuts every connection; partitions workers and database for 2 s
// (nothing closed, nothing passes, new connections hang) and heals;
// leaves every connection half-open (the server side closed, the
// worker's side silent until the worker gives up on it). The enqueuer
// reaches the database directly.
//
// Recovery is measured from the cut, the heal or the half-opening. A
// half-open connection is noticed only when the call on it times out (10 s
// for a claim or a completion); when every pooled connection is stuck
// that way (the pool has max(4, CPUs) of them: a claim, two completion
// writers and heartbeats), the next claim may wait for one of them to
// time out first: that fault is allowed 3 timeouts and a margin, 35 s.
func TestNetworkFaults(t *testing.T) {
	direct := pgtest.URL(t)
	s := openPG(t, direct)
	proxy, proxied, err := netfault.StartURL(direct)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	r := newRun(t, "network-faults", s, pgNow(s))
	for _, slot := range []string{"w1", "w2", "w3"} {
		r.worker(slot, goWorker("postgres", proxied))
	}
	d := loadFor(20 * time.Second)
	r.enqueue(d, 8, true)
	end := time.Now().Add(d)
	for i := 0; time.Now().Add(4 * time.Second).Before(end); i++ {
		// A fault whose recovery is judged is followed by the next only
		// once its bound has passed: a partition begun before a process
		// claimed again after a cut would be counted against the cut.
		gap := 2 * time.Second
		if i%4 == 2 || i%4 == 3 {
			gap = maxResume + 500*time.Millisecond
		}
		time.Sleep(gap)
		switch i % 4 {
		case 0:
			proxy.SetLatency(50 * time.Millisecond)
			time.Sleep(2 * time.Second)
			proxy.SetLatency(0)
		case 1:
			proxy.CutAll()
			r.fault("connections cut", time.Now())
		case 2:
			proxy.Partition()
			time.Sleep(2 * time.Second)
			proxy.Heal()
			r.fault("partition healed", time.Now())
		case 3:
			proxy.HalfOpenAll()
			r.faultWithin("connections half-open", time.Now(), 35*time.Second)
		}
	}
	r.waitEnqueued()
	if err := r.drain(2 * time.Minute); err != nil {
		t.Error(err)
	}
	res := r.finish()
	res.checkResumed(t, "network-faults")
}
