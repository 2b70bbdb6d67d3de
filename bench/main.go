// Command bench runs readpast's benchmark scenarios side by side with
// River (github.com/riverqueue/river) on one PostgreSQL, alternating the
// two systems scenario by scenario (readpast first in odd rounds, River
// first in even ones), and prints each figure with River's
// beside it and their ratio. It is a module of its own, so that readpast
// never depends on River.
//
//	cd bench && go run . [--database-url URL] [--scenarios LIST] [--scale X] [--rounds N] [--out DIR]
//
// Without --database-url it starts a throwaway PostgreSQL from the
// installed binaries, as readpast's tests do (durable: fsync and
// synchronous commit on, default settings otherwise). Each system gets a
// database of its own on that server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast/internal/benchkit"
	"github.com/readpast/readpast/internal/pgtest"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	db := flag.String("database-url", "", "a PostgreSQL server URL to create the two benchmark databases on (default: a throwaway server)")
	list := flag.String("scenarios", "all", "comma-separated scenarios")
	scale := flag.Float64("scale", 1, "size of the scenarios (1: the full size of docs/benchmarks.md)")
	rounds := flag.Int("rounds", 1, "how many times to run each scenario on each system")
	out := flag.String("out", "", "a folder to write results.json, the comparison table and the plots into")
	flag.Parse()
	scenarios, err := benchkit.Select(*list)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	admin := *db
	if admin == "" {
		srv, err := pgtest.Start(ctx, pgtest.Options{Durable: true, Logf: log.Printf})
		if err != nil {
			return err
		}
		defer srv.Stop()
		admin = srv.URL("postgres")
	}
	urls, err := databases(ctx, admin, "readpast_bench", "river_bench")
	if err != nil {
		return err
	}
	rp, err := benchkit.ReadpastPostgres(ctx, urls[0])
	if err != nil {
		return err
	}
	defer rp.Close()
	rv, err := openRiver(ctx, urls[1])
	if err != nil {
		return err
	}
	defer rv.Close()

	o := benchkit.Options{Scale: *scale, Progress: os.Stderr}
	results, runErr := benchkit.Run(ctx, []benchkit.System{rp, rv}, scenarios, *rounds, o)
	if err := benchkit.WriteComparison(os.Stdout, results, rp.Name(), rv.Name()); err != nil {
		return err
	}
	if *out != "" {
		if err := benchkit.WriteReport(*out, results, rp.Name(), rv.Name()); err != nil {
			return errors.Join(runErr, err)
		}
		fmt.Fprintln(os.Stderr, "wrote", filepath.Join(*out, "results.json"))
	}
	return runErr
}

// databases creates (afresh) one database per name on the server of
// admin and returns their URLs.
func databases(ctx context.Context, admin string, names ...string) ([]string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	cfg, err := pgx.ParseConfig(admin)
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, name := range names {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return nil, err
		}
		urls = append(urls, fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name))
	}
	return urls, nil
}
