package readpast

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"
)

// Inspector is implemented by stores that answer an operator's questions
// (what waits, what moves, what failed) cheaply on large tables, for the
// dashboard. Both stores implement it. Its reads cost what the live table
// holds, or what finished since a given time, never the whole history:
// none of them counts every finished job.
type Inspector interface {
	// QueueSummaries describes every queue that has live jobs, finished
	// jobs since since, or is paused, sorted by name: its live jobs
	// counted exactly and the jobs it finished since since.
	QueueSummaries(ctx context.Context, since time.Time) ([]QueueSummary, error)
	// Activity returns, minute by minute since since (oldest first), how
	// many jobs finished in each final state and how long the jobs that
	// started waited to start. Minutes without any activity are absent.
	Activity(ctx context.Context, since time.Time) ([]ActivityMinute, error)
	// BusiestGroups returns up to limit keys (concurrency groups) with the
	// most live jobs (pending and running), most first, then by name. A
	// job with several keys (EnqueueParams.Keys) counts under each.
	BusiestGroups(ctx context.Context, limit int) ([]GroupLoad, error)
	// QueueActivity is Activity for the jobs of one queue.
	QueueActivity(ctx context.Context, queue string, since time.Time) ([]ActivityMinute, error)
	// QueueGroups is BusiestGroups among the live jobs of one queue: a
	// group's Running and Pending count its jobs in that queue only.
	QueueGroups(ctx context.Context, queue string, limit int) ([]GroupLoad, error)
	// OldestDueJob returns the due pending job of queue that has waited
	// longest (the earliest run_at, then the lowest id), or nil when none
	// is due.
	OldestDueJob(ctx context.Context, queue string) (*Job, error)
	// Retrying lists the jobs that wait to run again after a failed
	// attempt (RetryingParams), newest failure first. It reads at most
	// p.Scan of them, along an index of the retrying jobs only, so that
	// its cost does not depend on how many jobs wait in all.
	Retrying(ctx context.Context, p RetryingParams) (RetryingResult, error)
	// Search lists jobs like Store.List, newest first, and can also match
	// text in a job's payload or errors. One call examines at most p.Scan
	// jobs (the newest ones below the cursor), so that its cost does not
	// depend on how rare the matches are: it returns every match in the
	// range of ids it examined, up to p.Limit, and Next continues below.
	Search(ctx context.Context, p SearchParams) (SearchResult, error)
}

// QueueSummary is one queue as a dashboard shows it.
type QueueSummary struct {
	Name string `json:"name"`
	// Paused: claims take none of its jobs (Store.PauseQueue).
	Paused bool `json:"paused"`
	// PausedAt is when it was paused; nil unless Paused.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// Pending counts its pending jobs that are due (run_at reached).
	Pending int64 `json:"pending"`
	// Scheduled counts its pending jobs whose run_at is still ahead.
	Scheduled int64 `json:"scheduled"`
	// Running counts its jobs held by workers.
	Running int64 `json:"running"`
	// Retrying counts its pending jobs, due or scheduled, that wait to
	// run again after a failed attempt (Inspector.Retrying lists them):
	// they are among Pending and Scheduled too.
	Retrying int64 `json:"retrying"`
	// Succeeded, Failed and Cancelled count the jobs that reached each
	// final state since the time asked for.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
	// OldestDue is the run_at of its longest-waiting due pending job; nil
	// when no due job waits.
	OldestDue *time.Time `json:"oldest_due,omitempty"`
}

// ActivityMinute is one minute of a queue's life: the jobs that finished
// in it, and the enqueue-to-start latency of the jobs that started in it.
type ActivityMinute struct {
	// Minute is the start of the minute, UTC.
	Minute time.Time `json:"minute"`
	// Succeeded, Failed and Cancelled count the jobs that reached each
	// final state during the minute. A failed attempt that will be retried
	// is not counted; a job that used up its attempts is.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
	// Started counts the jobs, finished or still running, whose latest
	// attempt started during the minute.
	Started int64 `json:"started"`
	// LatencyP50 and LatencyP99 are percentiles of how long those jobs
	// waited between becoming due (their run_at, or their creation if
	// later) and starting; zero when Started is zero.
	LatencyP50 time.Duration `json:"latency_p50"`
	LatencyP99 time.Duration `json:"latency_p99"`
}

// GroupLoad is one concurrency group's live jobs.
type GroupLoad struct {
	Group string `json:"group"`
	// Running counts its jobs held by workers, Pending the rest.
	Running int64 `json:"running"`
	Pending int64 `json:"pending"`
	// Limit is how many of its jobs may run at once (Store.SetGroupLimit).
	Limit int `json:"limit"`
}

// Limits of SearchParams.
const (
	// DefaultSearchScan is SearchParams.Scan's default.
	DefaultSearchScan = 100_000
	// MaxSearchScan caps SearchParams.Scan.
	MaxSearchScan = 1_000_000
	// MaxSearchText caps the length of SearchParams.Text in bytes.
	MaxSearchText = 256
)

// SearchParams filters a search. Zero fields do not filter; the embedded
// ListParams filter as they do for Store.List (Limit defaults to 100 and
// is capped at 1000).
type SearchParams struct {
	ListParams
	// Text matches jobs whose payload or errors (messages and stacks),
	// as JSON text, contain it, ignoring case (ASCII case only on SQLite).
	Text string
	// Scan is the most jobs one call examines; 0 means DefaultSearchScan.
	Scan int
}

// Normalize fills defaults into p and checks every field.
func (p SearchParams) Normalize() (SearchParams, error) {
	lp, err := p.ListParams.Normalize()
	if err != nil {
		return p, err
	}
	p.ListParams = lp
	if len(p.Text) > MaxSearchText {
		return p, invalid("text", "longer than %d bytes", MaxSearchText)
	}
	if !utf8.ValidString(p.Text) || strings.ContainsRune(p.Text, 0) {
		return p, invalid("text", "must be valid UTF-8 without NUL")
	}
	if p.Scan == 0 {
		p.Scan = DefaultSearchScan
	}
	if p.Scan < 1 || p.Scan > MaxSearchScan {
		return p, invalid("scan", "must be between 1 and %d", MaxSearchScan)
	}
	return p, nil
}

// SearchResult is one page of a search, newest first.
type SearchResult struct {
	Jobs []*Job
	// Next continues the search below the ids this call covered; empty
	// once the oldest job has been examined.
	Next string
	// Partial reports that the call stopped at its Scan budget before
	// Limit jobs matched: older jobs, from Next on, may match too.
	Partial bool
}

// Limits of RetryingParams.
const (
	// DefaultRetryingScan is RetryingParams.Scan's default.
	DefaultRetryingScan = 10_000
	// MaxRetryingScan caps RetryingParams.Scan.
	MaxRetryingScan = 100_000
)

// RetryingParams selects the jobs Inspector.Retrying lists. A retrying
// job is a pending job that has failed at least one attempt and waits to
// run again (Attempt >= 1: a released or snoozed attempt is not counted,
// and Store.Retry of a failed job starts its attempts again from 0).
type RetryingParams struct {
	// Queue keeps the jobs of one queue; empty: every queue.
	Queue string
	// Limit is the most jobs returned; 0 means 100, at most 1000.
	Limit int
	// Scan is the most retrying jobs one call reads, those whose latest
	// attempt started last first; 0 means DefaultRetryingScan.
	Scan int
}

// Normalize fills defaults into p and checks every field.
func (p RetryingParams) Normalize() (RetryingParams, error) {
	if p.Queue != "" {
		if err := CheckQueue(p.Queue); err != nil {
			return p, err
		}
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > 1000 {
		return p, invalid("limit", "must be between 1 and 1000")
	}
	if p.Scan == 0 {
		p.Scan = DefaultRetryingScan
	}
	if p.Scan < 1 || p.Scan > MaxRetryingScan {
		return p, invalid("scan", "must be between 1 and %d", MaxRetryingScan)
	}
	return p, nil
}

// RetryingResult is the answer to Inspector.Retrying.
type RetryingResult struct {
	// Jobs are the retrying jobs, newest failure first (the time of a
	// job's latest error, then the higher id first).
	Jobs []*Job
	// Partial reports that more jobs were retrying than the call read
	// (RetryingParams.Scan): it read those whose latest attempt started
	// last, so a job that started earlier and failed later may be missing.
	Partial bool
}
