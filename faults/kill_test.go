package faults_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
)

// TestKillWorkers is scenario 1 with Go workers: three worker processes
// (the real Client, in separate OS processes) drain a stream of jobs while
// one of them, picked at random, is SIGKILLed at a random moment every 1-3
// s and started again. Jobs in the hands of a killed process wait for
// their lease to end and run again elsewhere; nothing may be lost, run
// twice under a valid lease, or take a group past its limit.
func TestKillWorkers(t *testing.T) {
	for _, kind := range []string{"postgres", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			var r *run
			var spec workerSpec
			perTick := 10
			switch kind {
			case "postgres":
				url := pgtest.URL(t)
				s := openPG(t, url)
				r = newRun(t, "kill-workers/postgres", s, pgNow(s))
				spec = goWorker("postgres", url)
			case "sqlite":
				path := filepath.Join(t.TempDir(), "jobs.db")
				s := openSQLite(t, path)
				r = newRun(t, "kill-workers/sqlite", s, localNow)
				spec = goWorker("sqlite", path)
				perTick = 4
			}
			killWorkers(t, r, spec, perTick, loadFor(12*time.Second))
		})
	}
}

// killWorkers runs three worker processes of spec under load for d,
// killing and restarting one at random every 1-3 s, then drains and
// checks.
func killWorkers(t *testing.T, r *run, spec workerSpec, perTick int, d time.Duration) result {
	slots := map[string]*proc{}
	for _, s := range []string{"w1", "w2", "w3"} {
		slots[s] = r.worker(s, spec)
	}
	r.enqueue(d, perTick, true)
	end := time.Now().Add(d)
	for time.Now().Add(time.Second).Before(end) {
		time.Sleep(time.Second + rand.N(2*time.Second))
		slot := []string{"w1", "w2", "w3"}[rand.IntN(3)]
		slots[slot] = r.restart(slots[slot], rand.N(300*time.Millisecond), func() *proc { return r.worker(slot, spec) })
	}
	r.waitEnqueued()
	if err := r.drain(2 * time.Minute); err != nil {
		t.Error(err)
	}
	res := r.finish()
	if res.Reran == 0 {
		t.Logf("%s: no kill caught a job in hand", r.name)
	}
	return res
}

// TestKillHTTPWorkers is scenario 1 over HTTP: `readpast serve` (the real
// binary) and two example Python workers; every 1-3 s one of the three
// processes, picked at random, is SIGKILLed and started again (the
// server on the same address, so the Python workers find it back).
func TestKillHTTPWorkers(t *testing.T) {
	needPython(t)
	for _, kind := range []string{"postgres", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			var r *run
			var url string
			switch kind {
			case "postgres":
				url = pgtest.URL(t)
				s := openPG(t, url)
				r = newRun(t, "kill-http/postgres", s, pgNow(s))
			case "sqlite":
				url = filepath.Join(t.TempDir(), "jobs.db")
				s := openSQLite(t, url)
				r = newRun(t, "kill-http/sqlite", s, localNow)
			}
			addr := freeAddr(t)
			procs := map[string]*proc{"srv": r.server("srv", addr, url), "py1": r.pyWorker("py1", addr, 2*time.Second), "py2": r.pyWorker("py2", addr, 2*time.Second)}
			d := loadFor(12 * time.Second)
			r.enqueue(d, 3, true)
			end := time.Now().Add(d)
			for time.Now().Add(time.Second).Before(end) {
				time.Sleep(time.Second + rand.N(2*time.Second))
				slot := []string{"srv", "py1", "py2"}[rand.IntN(3)]
				p := procs[slot]
				p.kill()
				time.Sleep(rand.N(300 * time.Millisecond))
				if slot == "srv" {
					procs[slot] = r.server(slot, addr, url)
					r.fault("restart srv", time.Now(), procs["py1"].name, procs["py2"].name)
				} else {
					procs[slot] = r.pyWorker(slot, addr, 2*time.Second)
					r.fault("restart "+slot, time.Now(), procs[slot].name)
				}
			}
			r.waitEnqueued()
			if err := r.drain(2 * time.Minute); err != nil {
				t.Error(err)
			}
			r.finish()
		})
	}
}
