package readpast_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// The quick start of the README, on the embedded SQLite store: a handler
// for one kind, a client that works it, and a job.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{}) // or postgres.Open(ctx, url), then Migrate
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	sent := make(chan string, 1)
	workers := readpast.NewWorkers()
	type Email struct{ To string }
	readpast.HandleTyped(workers, "email", func(ctx context.Context, job *readpast.Job, e Email) (any, error) {
		sent <- e.To // send the email here
		return nil, nil
	}, nil)

	client, err := readpast.NewClient(store, readpast.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	if _, err := client.Enqueue(ctx, readpast.EnqueueParams{Kind: "email", Payload: []byte(`{"To":"a@example.com"}`)}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent to", <-sent)
	// Output: sent to a@example.com
}

// Enqueue inside your own transaction: the job exists only if your writes
// commit (readpast.SQLTxStore; on PostgreSQL also with a pgx.Tx, through
// postgres.Store.EnqueueTx).
func Example_transaction() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}

	tx, err := store.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (42)"); err != nil {
		log.Fatal(err)
	}
	jobs, err := store.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "ship", Group: "customer-42"}})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	job, err := store.Get(ctx, jobs[0].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Kind, job.State, *job.Group)
	// Output: ship pending customer-42
}

// Concurrency groups: jobs of one group run at most the group's limit at
// once (1 by default), the oldest first, and a busy group holds back
// nothing else.
func Example_groups() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	if err := store.SetGroupLimit(ctx, "customer-7", 2); err != nil {
		log.Fatal(err)
	}
	var batch []readpast.EnqueueParams
	for range 5 {
		batch = append(batch, readpast.EnqueueParams{Kind: "sync", Group: "customer-7"})
	}
	batch = append(batch, readpast.EnqueueParams{Kind: "report"})
	if _, err := store.Enqueue(ctx, batch); err != nil {
		log.Fatal(err)
	}
	claimed, err := store.Claim(ctx, readpast.ClaimParams{Worker: "w1", Limit: 10, Lease: readpast.DefaultLease})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range claimed {
		fmt.Println(j.ID, j.Kind)
	}
	// Output:
	// 1 sync
	// 2 sync
	// 6 report
}

// Limits per key: at most 10 charges a second to the payment API (up to
// 3 at once after a quiet spell), whichever workers run them; a template
// gives every customer:<id> key a bucket of its own. A key out of tokens
// holds back nothing else.
func Example_limits() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	if _, err := store.PutLimit(ctx, readpast.Limit{Key: "api:payments", Rate: 10, Per: time.Second, Burst: 3}); err != nil {
		log.Fatal(err)
	}
	if _, err := store.PutLimit(ctx, readpast.Limit{Key: "customer:*", Concurrency: 1}); err != nil {
		log.Fatal(err)
	}
	var batch []readpast.EnqueueParams
	for range 5 {
		batch = append(batch, readpast.EnqueueParams{Kind: "charge", Group: "api:payments"})
	}
	batch = append(batch,
		readpast.EnqueueParams{Kind: "sync", Group: "customer:42"},
		readpast.EnqueueParams{Kind: "sync", Group: "customer:42"},
		readpast.EnqueueParams{Kind: "sync", Group: "customer:43"})
	if _, err := store.Enqueue(ctx, batch); err != nil {
		log.Fatal(err)
	}
	claimed, err := store.Claim(ctx, readpast.ClaimParams{Worker: "w1", Limit: 10, Lease: readpast.DefaultLease})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range claimed {
		fmt.Println(j.ID, j.Kind, *j.Group)
	}
	// Output:
	// 1 charge api:payments
	// 2 charge api:payments
	// 3 charge api:payments
	// 6 sync customer:42
	// 8 sync customer:43
}

// Unique jobs: while a job holds its key (here for 24 hours, whatever its
// outcome), enqueueing the key again creates nothing and returns the
// holder marked Duplicate. Periodic jobs are declared in Config.Schedules
// and put in the database at Start.
func Example_unique() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	workers := readpast.NewWorkers()
	workers.Handle("report", func(ctx context.Context, job *readpast.Job) (any, error) { return nil, nil }, nil)
	client, err := readpast.NewClient(store, readpast.Config{Workers: workers, Schedules: []readpast.ScheduleParams{
		{Name: "nightly-report", Cron: "0 3 * * *", TimeZone: "Europe/Paris", Job: readpast.EnqueueParams{Kind: "report"}},
	}})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	for range 2 {
		jobs, err := client.Enqueue(ctx, readpast.EnqueueParams{Kind: "invoice", UniqueKey: "invoice-2026-06-42", UniqueFor: 24 * time.Hour})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(jobs[0].ID, jobs[0].Duplicate)
	}
	schedules, err := store.ListSchedules(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(schedules[0].Name, schedules[0].Cron)
	// Output:
	// 1 false
	// 1 true
	// nightly-report 0 3 * * *
}

// Periodic jobs: a schedule enqueues one job per tick of its cron
// expression, exactly once however many schedulers look. Declare
// schedules in Config.Schedules (every started Client puts them in the
// store and runs a scheduler, and so does readpast serve), or put them
// with Store.PutSchedule. Here two schedulers, their clocks at the tick,
// get to it one after the other: the first enqueues its job, the second
// finds it fired.
func Example_schedules() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	sc, created, err := store.PutSchedule(ctx, readpast.ScheduleParams{
		Name: "nightly-report", Cron: "0 3 * * *", TimeZone: "Europe/Paris",
		Job: readpast.EnqueueParams{Kind: "report"},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created", created)

	tick := *sc.NextRunAt
	for _, name := range []string{"a", "b"} {
		scheduler := readpast.NewScheduler(store, readpast.SchedulerConfig{Now: func() time.Time { return tick }})
		made, err := scheduler.Tick(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("scheduler", name, "enqueued", made)
	}

	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		log.Fatal(err)
	}
	res, err := store.List(ctx, readpast.ListParams{Kind: "report"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(res.Jobs), "job, runs at", res.Jobs[0].RunAt.In(paris).Format("15:04"))
	if sc, err = store.GetSchedule(ctx, "nightly-report"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("next tick a day later at", sc.NextRunAt.In(paris).Format("15:04"), sc.NextRunAt.After(tick))
	// Output:
	// created true
	// scheduler a enqueued 1
	// scheduler b enqueued 0
	// 1 job, runs at 03:00
	// next tick a day later at 03:00 true
}

// Retries: an error from a handler fails the attempt, and the job runs
// again after the retry policy's wait (Config.RetryPolicy or
// HandlerOptions.RetryPolicy; DefaultRetryPolicy backs off exponentially
// with jitter) until it has made MaxAttempts attempts. Each failure is
// kept in Job.Errors. A handler returns Permanent(err) to fail its job
// for good at once.
func Example_retries() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	succeeded := make(chan *readpast.Job, 1)
	workers := readpast.NewWorkers()
	workers.Handle("charge", func(ctx context.Context, job *readpast.Job) (any, error) {
		if job.Attempt == 1 {
			return nil, errors.New("payment gateway timed out")
		}
		succeeded <- job
		return nil, nil
	}, &readpast.HandlerOptions{RetryPolicy: func(attempt int) time.Duration { return 10 * time.Millisecond }})

	client, err := readpast.NewClient(store, readpast.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	if _, err := client.Enqueue(ctx, readpast.EnqueueParams{Kind: "charge", MaxAttempts: 3}); err != nil {
		log.Fatal(err)
	}
	select {
	case job := <-succeeded:
		fmt.Printf("attempt %d of %d, after %q\n", job.Attempt, job.MaxAttempts, job.Errors[0].Message)
	case <-time.After(10 * time.Second):
		log.Fatal("the job was not retried")
	}
	// Output: attempt 2 of 3, after "payment gateway timed out"
}

// Snooze: a handler that returns Snooze(d) puts its job back to pending
// for d, without counting the attempt (say, to wait for something the job
// needs). Job.Snoozes counts the snoozes; Config.MaxSnoozes bounds them.
func Example_snooze() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ran := make(chan *readpast.Job, 1)
	workers := readpast.NewWorkers()
	workers.Handle("fetch-export", func(ctx context.Context, job *readpast.Job) (any, error) {
		if job.Snoozes == 0 { // the export is not ready yet: look again later
			return nil, readpast.Snooze(10 * time.Millisecond)
		}
		ran <- job
		return nil, nil
	}, nil)

	client, err := readpast.NewClient(store, readpast.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	if _, err := client.Enqueue(ctx, readpast.EnqueueParams{Kind: "fetch-export"}); err != nil {
		log.Fatal(err)
	}
	select {
	case job := <-ran:
		fmt.Println("attempt", job.Attempt, "snoozes", job.Snoozes)
	case <-time.After(10 * time.Second):
		log.Fatal("the snoozed job did not run again")
	}
	// Output: attempt 1 snoozes 1
}

// Tags label jobs at enqueue (up to MaxTags each), for listing
// (ListParams.Tag) and bulk actions (JobFilter.Tag).
func Example_tags() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	if _, err := store.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "email", Tags: []string{"customer-42", "welcome"}},
		{Kind: "invoice", Tags: []string{"customer-42"}},
		{Kind: "email", Tags: []string{"customer-7"}},
	}); err != nil {
		log.Fatal(err)
	}
	res, err := store.List(ctx, readpast.ListParams{Tag: "customer-42"})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range res.Jobs { // newest first
		fmt.Println(j.ID, j.Kind, j.Tags)
	}
	n, err := store.BulkCancel(ctx, readpast.JobFilter{Tag: "customer-42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cancelled", n)
	// Output:
	// 2 invoice [customer-42]
	// 1 email [customer-42 welcome]
	// cancelled 2
}

// Bulk actions act on every job a filter matches (JobFilter: queue, kind,
// state, tag, group; at least one must be set), in batches of short
// transactions: BulkCancel on pending and running jobs, BulkRetry on
// failed and cancelled ones, BulkDelete on finished ones.
func Example_bulk() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	if _, err := store.Enqueue(ctx, []readpast.EnqueueParams{
		{Kind: "newsletter"}, {Kind: "newsletter"}, {Kind: "newsletter"}, {Kind: "invoice"},
	}); err != nil {
		log.Fatal(err)
	}
	newsletters := readpast.JobFilter{Kind: "newsletter"}
	cancelled, err := store.BulkCancel(ctx, newsletters)
	if err != nil {
		log.Fatal(err)
	}
	retried, err := store.BulkRetry(ctx, readpast.JobFilter{Kind: "newsletter", State: readpast.StateCancelled})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.BulkCancel(ctx, newsletters); err != nil {
		log.Fatal(err)
	}
	deleted, err := store.BulkDelete(ctx, newsletters)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("cancelled", cancelled, "retried", retried, "deleted", deleted)
	stats, err := store.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range stats {
		fmt.Println(s.Queue, s.State, s.Count)
	}
	// Output:
	// cancelled 3 retried 3 deleted 3
	// default pending 1
}

// Pausing a queue stops claims, in every process, from taking its jobs
// until it is resumed. Enqueues still work, and running jobs finish as
// usual. The CLI (readpast queues pause), the HTTP API and the dashboard
// do the same.
func Example_pause() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	claim := func() int {
		jobs, err := store.Claim(ctx, readpast.ClaimParams{Queues: []string{"mail"}, Worker: "w1", Limit: 10, Lease: readpast.DefaultLease})
		if err != nil {
			log.Fatal(err)
		}
		return len(jobs)
	}
	if err := store.PauseQueue(ctx, "mail"); err != nil {
		log.Fatal(err)
	}
	if _, err := store.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "email", Queue: "mail"}}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("paused: claimed", claim())
	queues, err := store.Queues(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(queues[0].Name, "paused", queues[0].Paused, "pending", queues[0].Counts[readpast.StatePending])

	if err := store.ResumeQueue(ctx, "mail"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed: claimed", claim())
	// Output:
	// paused: claimed 0
	// mail paused true pending 1
	// resumed: claimed 1
}

// A flow: render runs once extract has succeeded, email once render has
// ended, whatever its outcome (RunAnyway).
func Example_flows() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ran := make(chan string, 3)
	workers := readpast.NewWorkers()
	for _, kind := range []string{"extract", "render", "email"} {
		workers.Handle(kind, func(ctx context.Context, job *readpast.Job) (any, error) {
			ran <- job.Kind
			return nil, nil
		}, nil)
	}
	client, err := readpast.NewClient(store, readpast.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}

	_, err = client.EnqueueFlow(ctx,
		readpast.FlowJob{Ref: "extract", Job: readpast.EnqueueParams{Kind: "extract", Payload: []byte(`{"file":"q3.csv"}`)}},
		readpast.FlowJob{Ref: "render", Job: readpast.EnqueueParams{Kind: "render"},
			After: []readpast.After{{Ref: "extract"}}},
		readpast.FlowJob{Job: readpast.EnqueueParams{Kind: "email"},
			After: []readpast.After{{Ref: "render", Policy: readpast.RunAnyway}}}, // email even if rendering fails
	)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)
	for range 3 {
		fmt.Println(<-ran)
	}
	// Output:
	// extract
	// render
	// email
}

// A batch: thumbnails join it as uploads arrive, in any number of calls;
// once it is sealed and every thumbnail has ended, the finishing job runs
// and reads how they ended.
func Example_batches() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "readpast-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "readpast.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	done := make(chan string, 1)
	workers := readpast.NewWorkers()
	workers.Handle("thumbnail", func(ctx context.Context, job *readpast.Job) (any, error) {
		return nil, nil
	}, nil)
	workers.Handle("notify", func(ctx context.Context, job *readpast.Job) (any, error) {
		b, err := job.Batch(ctx)
		if err != nil {
			return nil, err
		}
		done <- fmt.Sprintf("%d thumbnails: %d succeeded, %d failed", b.Members, b.Succeeded, b.Failed)
		return nil, nil
	}, nil)
	client, err := readpast.NewClient(store, readpast.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	finisher, err := client.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "notify"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, upload := range [][]string{{"a.png", "b.png"}, {"c.png"}} {
		var jobs []readpast.EnqueueParams
		for _, name := range upload {
			jobs = append(jobs, readpast.EnqueueParams{Kind: "thumbnail", Payload: []byte(fmt.Sprintf(`{"file":%q}`, name))})
		}
		if _, err := client.AddToBatch(ctx, finisher.ID, jobs...); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := client.SealBatch(ctx, finisher.ID); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-done)
	// Output:
	// 3 thumbnails: 3 succeeded, 0 failed
}
