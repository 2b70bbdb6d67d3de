package history

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

// Final is a job's state in the database after the run.
type Final struct {
	// Missing is set when the database does not know the job.
	Missing bool
	State   readpast.JobState
	// Token is the job's current or last token.
	Token string
	// LeaseExpiresAt is set while the job runs.
	LeaseExpiresAt *time.Time
}

// Input is what Check judges.
type Input struct {
	Events []Event
	// Final holds the state of every job the history names, read from the
	// database once the run is over.
	Final map[int64]Final
	// Limits are the keys' (groups') concurrency limits, for first keys
	// and later keys alike; a key not named has limit 1.
	Limits map[string]int
	// Rates are the keys' rates; a key not named has none.
	Rates map[string]Rate
	// Edges are the flows' edges (readpast.FlowJob.After) among the jobs
	// the history names: checked for children started early and children
	// stranded (flows.go).
	Edges []Edge
	// DBNow is the database's clock when Final was read (for jobs left
	// running); zero means time.Now().
	DBNow time.Time
	// Grace is how long past its lease a running job may be left before
	// it counts as stuck. Zero means 5 s.
	Grace time.Duration
}

// Report is what Check found. The first nine counts must be zero.
type Report struct {
	Enqueued  int // jobs whose enqueue was acknowledged
	Completed int // of those, succeeded in the database
	Failed    int // of those, failed for good
	Pending   int // of those, still pending or running

	Lost          int // acknowledged, and unknown to the database
	Duplicated    int // jobs with accepted completions under two tokens
	Overlapping   int // jobs claimed, or run, again while a valid lease held them
	GroupOver     int // claims that took a group past its limit
	RateOver      int // windows in which a key started more jobs than its rate allows
	Stuck         int // jobs running past their lease plus the grace
	StaleAccepted int // writes accepted with a token no longer current
	EarlyStarts   int // children claimed before a parent succeeded (or, under run_anyway, ended)
	Stranded      int // children left blocked with no parent that could still release them

	Claims       int // jobs handed out
	Reran        int // jobs claimed more than once (after a lease ran out, a release or a failure)
	Redone       int // runs that succeeded but whose completion no store accepted, their job claimed again: work done twice
	StaleRefused int // writes refused as stale (fencing at work)
	Unknown      int // writes whose caller got an error (outcome unknown)
	BadLines     int // history lines that did not parse

	// Peak is, for every key some claim certainly held (named by a claim
	// whose held end came after its return), the most claims holding a
	// slot of it at once, counted as group_over counts them: a scenario
	// that means its limits to bind can tell a concurrency that was
	// reached from one that never was. A key no claim held reads 0.
	Peak map[string]int

	// Problems describes the violations (at most 50).
	Problems []string
}

// OK reports whether the history shows no violation.
func (r *Report) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Overlapping == 0 && r.GroupOver == 0 &&
		r.RateOver == 0 && r.Stuck == 0 && r.StaleAccepted == 0 && r.EarlyStarts == 0 && r.Stranded == 0
}

// Summary is the report in one line.
func (r *Report) Summary() string {
	return fmt.Sprintf("enqueued=%d completed=%d lost=%d duplicated=%d overlapping=%d group_over=%d rate_over=%d stuck=%d stale_accepted=%d early_starts=%d stranded=%d (failed=%d pending=%d claims=%d reran=%d redone=%d stale_refused=%d unknown=%d)",
		r.Enqueued, r.Completed, r.Lost, r.Duplicated, r.Overlapping, r.GroupOver, r.RateOver, r.Stuck, r.StaleAccepted,
		r.EarlyStarts, r.Stranded,
		r.Failed, r.Pending, r.Claims, r.Reran, r.Redone, r.StaleRefused, r.Unknown)
}

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < 50 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// claimRec is one (job, token) claim and what the history says of it.
type claimRec struct {
	Event
	// valid is until when the claim's lease certainly held and the job was
	// certainly not finished by it: the claim's invocation plus its lease,
	// pushed on by accepted extensions, cut at the first write of its own
	// that may have finished it.
	valid int64
	// held is until when the job certainly ran under this claim in the
	// database (its group slot taken): its first write that may have
	// finished it, or the end of its lease if there was none.
	held int64
	// finishedAt is the return of its first accepted finishing write; 0 if none.
	finishedAt int64
}

type pairKey struct {
	id    int64
	token string
}

// Check judges a merged history.
func Check(in Input) Report {
	var r Report
	if in.Grace == 0 {
		in.Grace = 5 * time.Second
	}
	if in.DBNow.IsZero() {
		in.DBNow = time.Now()
	}
	acked := map[int64]bool{}
	claims := map[pairKey]*claimRec{}
	perJob := map[int64][]*claimRec{}
	for _, e := range in.Events {
		switch e.Op {
		case OpEnqueue:
			if e.Out == OutOK {
				acked[e.ID] = true
			}
		case OpClaim:
			k := pairKey{e.ID, e.Token}
			if claims[k] != nil {
				r.problem("job %d handed out twice with token %s", e.ID, e.Token)
				r.Overlapping++
				continue
			}
			c := &claimRec{Event: e, valid: e.Inv + e.Lease}
			claims[k] = c
			perJob[e.ID] = append(perJob[e.ID], c)
			r.Claims++
		}
	}
	// Extensions first (they lengthen leases), then finishing writes.
	for _, e := range in.Events {
		if e.Op != OpExtend || e.Out != OutOK {
			continue
		}
		if c := claims[pairKey{e.ID, e.Token}]; c != nil {
			c.valid = max(c.valid, e.Inv+e.Lease)
		}
	}
	for _, c := range claims {
		c.held = c.valid
	}
	for _, e := range in.Events {
		switch e.Op {
		case OpComplete, OpFail, OpRelease:
		default:
			continue
		}
		switch e.Out {
		case OutStale, OutNotFound:
			r.StaleRefused++
			continue
		case OutRefused:
			continue
		case OutError:
			r.Unknown++
		}
		// A write sent (OutSent, logged before the call) may have landed
		// although its process died before it could say.
		c := claims[pairKey{e.ID, e.Token}]
		if c == nil {
			if e.Out == OutOK {
				r.StaleAccepted++
				r.problem("%s of job %d by %s accepted with token %s, which no claim handed out", e.Op, e.ID, e.Proc, e.Token)
			}
			continue
		}
		// It may have finished the claim as soon as it was invoked.
		c.valid = min(c.valid, e.Inv)
		c.held = min(c.held, e.Inv)
		if e.Out == OutOK && (c.finishedAt == 0 || e.Ret < c.finishedAt) {
			c.finishedAt = e.Ret
		}
	}

	// An operator's cancel ends the claims of its job made before it
	// returned (the job may then be retried and claimed again).
	for _, e := range in.Events {
		if e.Op != OpCancel || e.Out != OutOK {
			continue
		}
		for _, c := range perJob[e.ID] {
			if c.Inv < e.Ret {
				c.valid = min(c.valid, e.Ret)
				c.held = min(c.held, e.Ret)
			}
		}
	}

	// A job claimed again while an earlier claim was certainly valid.
	overlapping := map[int64]bool{}
	for id, cs := range perJob {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Ret < cs[j].Ret })
		if len(cs) > 1 {
			r.Reran++
		}
		for i, b := range cs {
			for _, a := range cs[:i] {
				// Whichever took effect first, the other took effect
				// while it was valid: b certainly came after a, or a
				// also returned while b was valid.
				if b.Ret < a.valid && (b.Inv >= a.Ret || a.Ret < b.valid) {
					overlapping[id] = true
					r.problem("job %d claimed by %s (returned %s) while %s's claim %s was valid until %s",
						id, b.Proc, stamp(b.Ret), a.Proc, a.Token, stamp(a.valid))
				}
			}
		}
	}
	// Handler runs of one job that overlap while the earlier one's claim
	// was valid.
	type run struct {
		c          *claimRec
		start, end int64
	}
	runs := map[int64][]run{}
	starts := map[pairKey]int64{}
	for _, e := range in.Events {
		switch e.Op {
		case OpStart:
			starts[pairKey{e.ID, e.Token}] = e.Inv
		case OpEnd:
			k := pairKey{e.ID, e.Token}
			if s, ok := starts[k]; ok {
				runs[e.ID] = append(runs[e.ID], run{claims[k], s, e.Inv})
				delete(starts, k)
			}
		}
	}
	for k, s := range starts { // runs cut short by a kill: assume they lasted their lease
		c := claims[k]
		end := s
		if c != nil {
			end = max(s, c.valid)
		}
		runs[k.id] = append(runs[k.id], run{c, s, end})
	}
	for id, rs := range runs {
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.c == nil || b.c == nil || a.c == b.c {
					continue
				}
				first, second := a, b
				if b.start < a.start {
					first, second = b, a
				}
				if second.start < min(first.end, first.c.valid) {
					overlapping[id] = true
					r.problem("job %d: run under %s started at %s while the run under %s went on under a valid lease until %s",
						id, second.c.Token, stamp(second.start), first.c.Token, stamp(min(first.end, first.c.valid)))
				}
			}
		}
	}
	r.Overlapping += len(overlapping)

	// Work done twice: a run that finished, whose outcome was never
	// accepted, and whose job was claimed again after it. A run whose
	// process sent a failure is left out: its job runs again by design
	// (the attempt failed), whether or not the failure's answer arrived.
	accepted, failed := map[pairKey]bool{}, map[pairKey]bool{}
	for _, e := range in.Events {
		if (e.Op == OpComplete || e.Op == OpFail) && e.Out == OutOK {
			accepted[pairKey{e.ID, e.Token}] = true
		}
		if e.Op == OpFail {
			failed[pairKey{e.ID, e.Token}] = true
		}
	}
	for id, rs := range runs {
		for _, x := range rs {
			if x.c == nil {
				continue
			}
			if k := (pairKey{id, x.c.Token}); accepted[k] || failed[k] || starts[k] != 0 {
				continue
			}
			for _, c := range perJob[id] {
				if c.Ret > x.end {
					r.Redone++
					break
				}
			}
		}
	}

	// Stale writes accepted: a write with a token after a later claim of
	// the job had certainly happened, or after its own claim had certainly
	// finished the job (a repeated completion excepted).
	for _, e := range in.Events {
		switch e.Op {
		case OpComplete, OpFail, OpRelease, OpExtend:
		default:
			continue
		}
		if e.Out != OutOK {
			continue
		}
		a := claims[pairKey{e.ID, e.Token}]
		if a == nil {
			if e.Op == OpExtend {
				r.StaleAccepted++
				r.problem("extend of job %d accepted with token %s, which no claim handed out", e.ID, e.Token)
			}
			continue
		}
		for _, b := range perJob[e.ID] {
			if b != a && b.Inv > a.Ret && b.Ret < e.Inv {
				r.StaleAccepted++
				r.problem("%s of job %d with token %s accepted at %s, after the job was claimed again (%s, returned %s)",
					e.Op, e.ID, e.Token, stamp(e.Inv), b.Token, stamp(b.Ret))
				break
			}
		}
		if a.finishedAt != 0 && e.Inv > a.finishedAt && e.Op != OpComplete {
			r.StaleAccepted++
			r.problem("%s of job %d with token %s accepted at %s, after that claim had finished the job", e.Op, e.ID, e.Token, stamp(e.Inv))
		}
	}

	// Finished twice: accepted completions under two tokens.
	completedBy := map[int64]map[string]bool{}
	for _, e := range in.Events {
		if e.Op == OpComplete && e.Out == OutOK {
			if completedBy[e.ID] == nil {
				completedBy[e.ID] = map[string]bool{}
			}
			completedBy[e.ID][e.Token] = true
		}
	}
	for id, toks := range completedBy {
		if len(toks) > 1 {
			r.Duplicated++
			r.problem("job %d completed under %d tokens", id, len(toks))
		}
	}

	// Groups (keys) over their limits: the claims certainly holding a slot
	// at once, each from its return to its held end, on every key the job
	// names.
	type edge struct {
		at    int64
		delta int
		c     *claimRec
	}
	perGroup := map[string][]edge{}
	for _, c := range claims {
		if c.held <= c.Ret {
			continue
		}
		for _, g := range c.Keys() {
			perGroup[g] = append(perGroup[g], edge{c.Ret, 1, c}, edge{c.held, -1, c})
		}
	}
	r.Peak = make(map[string]int, len(perGroup))
	for g, es := range perGroup {
		sort.Slice(es, func(i, j int) bool {
			if es[i].at != es[j].at {
				return es[i].at < es[j].at
			}
			return es[i].delta < es[j].delta
		})
		limit := 1
		if l, ok := in.Limits[g]; ok {
			limit = l
		}
		n := 0
		for _, e := range es {
			n += e.delta
			r.Peak[g] = max(r.Peak[g], n)
			if e.delta > 0 && n > limit {
				r.GroupOver++
				r.problem("group %s: %d claims held at once at %s (limit %d), the last job %d by %s", g, n, stamp(e.at), limit, e.c.ID, e.c.Proc)
			}
		}
	}

	r.checkRates(in.Rates, claims)
	r.checkFlows(in)

	// Every acknowledged job against the database.
	for id := range acked {
		r.Enqueued++
		f, ok := in.Final[id]
		switch {
		case !ok:
			r.problem("job %d: no final state given", id)
			r.Lost++
		case f.Missing:
			r.Lost++
			r.problem("job %d: acknowledged, and unknown to the database", id)
		case f.State == readpast.StateSucceeded:
			r.Completed++
			if toks := completedBy[id]; len(toks) > 0 && !toks[f.Token] {
				r.Duplicated++
				r.problem("job %d succeeded with token %s, which no accepted completion carried", id, f.Token)
			}
		case f.State == readpast.StateFailed || f.State == readpast.StateCancelled:
			r.Failed++
		default:
			r.Pending++
		}
	}
	for id, f := range in.Final {
		if f.State == readpast.StateRunning && f.LeaseExpiresAt != nil && f.LeaseExpiresAt.Add(in.Grace).Before(in.DBNow) {
			r.Stuck++
			r.problem("job %d still running, its lease over since %s", id, f.LeaseExpiresAt.Format(time.StampMilli))
		}
		if f.State == readpast.StateSucceeded && len(completedBy[id]) == 0 && acked[id] && len(perJob[id]) > 0 {
			// Completed, but no completion of ours was ever acknowledged:
			// fine if one's outcome was unknown.
			unknown := false
			for _, c := range perJob[id] {
				unknown = unknown || c.finishedAt == 0
			}
			if !unknown {
				r.problem("job %d succeeded with no completion recorded", id)
			}
		}
	}
	return r
}

func stamp(n int64) string { return Time(n).Format("15:04:05.000000") }

// Resumed returns, per process, how long after since it was working
// again: the first return after since of a claim call that went through
// and either took jobs or answered at once (within a second). A call
// invoked before since counts too: one that was waiting for the database
// when the damage ended and took jobs once it was back shows the process
// working again, and passing it over would measure the process's next
// call instead, a long poll that may wait for work. A long poll that
// waited and came back empty says nothing of when the process could have
// claimed, and is passed over. Processes with no such call are left out.
func Resumed(evs []Event, since time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	s := ns(since)
	for _, e := range evs {
		if e.Op != OpClaimCall || e.Out != OutOK || e.Ret < s || e.N == 0 && e.Ret-e.Inv > int64(time.Second) {
			continue
		}
		d := time.Duration(e.Ret - s)
		if cur, ok := out[e.Proc]; !ok || d < cur {
			out[e.Proc] = d
		}
	}
	return out
}

// FirstCompletion returns how long after since the first completion
// invoked after since was accepted, or -1 if none was.
func FirstCompletion(evs []Event, since time.Time) time.Duration {
	s := ns(since)
	best := time.Duration(-1)
	for _, e := range evs {
		if e.Op != OpComplete || e.Out != OutOK || e.Inv < s {
			continue
		}
		if d := time.Duration(e.Ret - s); best < 0 || d < best {
			best = d
		}
	}
	return best
}

// Spread formats resume times: min, median and max, over n processes.
func Spread(ds map[string]time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	v := make([]time.Duration, 0, len(ds))
	for _, d := range ds {
		v = append(v, d)
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return strings.Join([]string{r(v[0]), r(v[len(v)/2]), r(v[len(v)-1])}, "/")
}

// Rate is a key's rate as Check judges it: at most Window/Interval + Burst
// starts (claims) in any window of Window (one second if zero), plus one
// for the clocks' rounding.
type Rate struct {
	Interval time.Duration
	Burst    int
	Window   time.Duration
}

// checkRates counts, for every key with a rate and every window that
// starts at a claim's invocation, the claims certainly made within it
// (invoked at or after its start, returned by its end), and reports the
// windows with more than the rate allows.
func (r *Report) checkRates(rates map[string]Rate, claims map[pairKey]*claimRec) {
	perKey := map[string][]*claimRec{}
	for _, c := range claims {
		for _, k := range c.Keys() {
			if _, ok := rates[k]; ok {
				perKey[k] = append(perKey[k], c)
			}
		}
	}
	for key, cs := range perKey {
		rate := rates[key]
		w := rate.Window
		if w == 0 {
			w = time.Second
		}
		most := int(w/rate.Interval) + rate.Burst + 1
		sort.Slice(cs, func(i, j int) bool { return cs[i].Inv < cs[j].Inv })
		for i, c := range cs {
			end, n := c.Inv+int64(w), 0
			for _, d := range cs[i:] {
				if d.Inv > end {
					break
				}
				if d.Ret <= end {
					n++
				}
			}
			if n > most {
				r.RateOver++
				r.problem("key %s: %d claims within %s from %s (rate allows %d)", key, n, w, stamp(c.Inv), most)
			}
		}
	}
}
