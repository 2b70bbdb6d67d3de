package readpast_test

import (
	"context"
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
