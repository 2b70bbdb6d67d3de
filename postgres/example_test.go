package postgres_test

import (
	"context"
	"log"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// Open a store, migrate its schema, and run workers on it. (Not run by go
// test: it needs a server.)
func ExampleOpen() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, "postgres://readpast@localhost:5432/readpast")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil { // once per schema version; safe from several processes
		log.Fatal(err)
	}

	workers := readpast.NewWorkers()
	workers.Handle("email", func(ctx context.Context, job *readpast.Job) (any, error) {
		return nil, nil // send the email here
	}, nil)
	client, err := readpast.NewClient(store, readpast.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)
}

// Enqueue inside your own pgx transaction: the job exists only if your
// writes commit. (Not run by go test: it needs a server.)
func ExampleStore_EnqueueTx() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, "postgres://readpast@localhost:5432/readpast")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	tx, err := store.Pool().Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // after Commit, does nothing
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES (42)"); err != nil {
		log.Fatal(err)
	}
	if _, err := store.EnqueueTx(ctx, tx, []readpast.EnqueueParams{{Kind: "ship", Group: "customer-42"}}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
