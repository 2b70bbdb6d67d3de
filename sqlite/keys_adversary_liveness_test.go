package sqlite

import (
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Adversarial: P3 "a job held back by a later key holds back no other
// jobs". The claim reads only takes(+1) heads of a first key; when every
// head it read is held by a full later key, the first key gets no mark and
// becomes a waiter, so a claimable job of that key behind the read window
// is never read while the later key stays full.

// The jobs a claim reads of a first key are bounded (what the key may
// start, and one more when they name more keys): a key whose read jobs
// all wait for a full later key waits as a whole, its jobs further back
// with them (docs/design/flow-control.md, "Known limits").

// TestAdvKeysTokenHeldHeadDelaysOthers: a later key r out of tokens for an
// hour holds the first job of c:1; c:1 (5 slots) has four more jobs. A
// claim of 3 reads 4 heads: the held one and three it takes; c:1 is then
// marked only at r's next token: its fifth job, with c:1 at 3 of 5, waits
// an hour.
func TestAdvKeysTokenHeldHeadDelaysOthers(t *testing.T) {
	s, _ := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "r", Rate: 1, Per: time.Hour, Burst: 1}, readpast.Limit{Key: "c:*", Concurrency: 5})
	first := keysEnqueue(t, s, kjob("z", "r"))[0]
	r0 := keysClaim(t, s, 10, time.Minute)
	wantJobs(t, "r's token", r0, first)
	keysComplete(t, s, r0...)
	js := keysEnqueue(t, s, kjob("c:1", "r"), kjob("c:1"), kjob("c:1"), kjob("c:1"), kjob("c:1"))
	got := keysClaim(t, s, 3, time.Minute)
	wantJobs(t, "claim of 3: c:1's jobs not naming r", got, js[1], js[2], js[3])
	got2 := keysClaim(t, s, 3, time.Minute)
	t.Logf("c:1 marks %v (now %d)", marksOf(t, s, "c:1"), time.Now().UnixMicro())
	wantJobs(t, "c:1's fifth job, c:1 at 3 of 5", got2, js[4])
}

// TestAdvKeysTokenHeldHeadClaimsOfOne: claims of one, c:1 runs 5; its
// head names r (out of tokens for an hour); each claim of one reads 2
// heads, takes the second, and marks c:1 at r's next token: the third
// job waits an hour although c:1 has 4 free slots.
func TestAdvKeysTokenHeldHeadClaimsOfOne(t *testing.T) {
	s, _ := openKeys(t)
	keysPut(t, s, readpast.Limit{Key: "r", Rate: 1, Per: time.Hour, Burst: 1}, readpast.Limit{Key: "c:*", Concurrency: 5})
	first := keysEnqueue(t, s, kjob("z", "r"))[0]
	wantJobs(t, "r's token", keysClaim(t, s, 1, time.Minute), first)
	js := keysEnqueue(t, s, kjob("c:1", "r"), kjob("c:1"), kjob("c:1"))
	wantJobs(t, "first claim of one", keysClaim(t, s, 1, time.Minute), js[1])
	got := keysClaim(t, s, 1, time.Minute)
	t.Logf("c:1 marks %v (now %d)", marksOf(t, s, "c:1"), time.Now().UnixMicro())
	wantJobs(t, "second claim of one", got, js[2])
}

// TestAdvKeysFutureJobMarkConsumedByHeldHead: g (default: one at a time,
// nothing running) has a due job held by the full api, and a job of g
// alone due in a minute, which has its own ready mark. When it comes due,
// the claim reads g through that mark, reads only the held head (g's
// window is one job), uses the mark up and leaves g waiting for api: the
// job due now never starts while api stays busy.
func TestAdvKeysFutureJobMarkConsumedByHeldHead(t *testing.T) {
	s, c := openKeys(t)
	busy := keysEnqueue(t, s, kjob("z", "api"))[0]
	wantJobs(t, "api's first job", keysClaim(t, s, 10, time.Hour), busy)
	held := keysEnqueue(t, s, kjob("g", "api"))[0]
	wantJobs(t, "g's job naming api (api full)", keysClaim(t, s, 10, time.Hour))
	p := kjob("g")
	p.RunAt = c.now().Add(time.Minute)
	later := keysEnqueue(t, s, p)[0]
	if m := marksOf(t, s, "g"); len(m) != 1 {
		t.Fatalf("g's future job: marks %v, want its own", m)
	}
	c.add(2 * time.Minute)
	if testing.Verbose() {
		rows, _ := s.DB().Query(`SELECT id, run_at, priority, coalesce(group_key,''), state FROM readpast_jobs ORDER BY id`)
		for rows.Next() {
			var id, at int64
			var pr int
			var g, st string
			rows.Scan(&id, &at, &pr, &g, &st)
			t.Logf("job %d run_at %d prio %d group %s %s", id, at, pr, g, st)
		}
		rows.Close()
	}
	var got []*readpast.Job
	for i := 0; i < 3 && len(got) == 0; i++ {
		got = keysClaim(t, s, 10, time.Hour)
	}
	t.Logf("held job %d; g marks now %v; api waiters %q", held.ID, marksOf(t, s, "g"), keyRowOf(t, s, "api").waiters)
	wantJobs(t, "g's job naming only g, due now, g idle", got, later)
}
