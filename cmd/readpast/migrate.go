package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/stores"
)

// versionStatus is what `migrate status --json` prints for a store that
// reports its schema version (readpast.SchemaVersioner).
type versionStatus struct {
	// Current is the schema version applied to the database, 0 before the
	// first migration.
	Current int `json:"current"`
	// Latest is the newest version this readpast knows.
	Latest int `json:"latest"`
	// Pending is how many migrations `migrate up` would apply: 0 when the
	// schema is up to date, and when it is newer than this readpast.
	Pending int `json:"pending"`
}

// newVersionStatus returns the status of a schema at version current when
// this code knows up to latest.
func newVersionStatus(current, latest int) versionStatus {
	return versionStatus{Current: current, Latest: latest, Pending: max(latest-current, 0)}
}

// String is the one-line form `migrate status` prints.
func (v versionStatus) String() string {
	var state string
	switch {
	case v.Current == v.Latest:
		state = "up to date"
	case v.Current > v.Latest:
		state = "NEWER than this readpast"
	default:
		state = fmt.Sprintf("%d migration%s pending", v.Pending, map[bool]string{true: "s"}[v.Pending != 1])
	}
	return fmt.Sprintf("schema version %d of %d (%s)", v.Current, v.Latest, state)
}

// migrateStatus is what `migrate up --json` prints, and `migrate status
// --json` for a store that does not report its schema version.
type migrateStatus struct {
	// Current is the applied schema version; -1 when the store cannot say.
	Current int `json:"current"`
	// Latest is the newest version this readpast knows; -1 when unknown.
	Latest int `json:"latest"`
	// UpToDate reports whether the schema is in place and current.
	UpToDate bool `json:"up_to_date"`
}

// runMigrate runs `migrate [up|status]`: up (the default) brings the schema
// up to date, creating a SQLite database that does not exist yet; status
// reports it and changes nothing (a missing database is an error).
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("migrate", "migrate [up|status] [flags]", stdout)
	dbURL := dbFlag(flags)
	asJSON := flags.Bool("json", false, "print JSON")
	pos, err := parseFlags(flags, args)
	if err != nil {
		return err
	}
	action := "up"
	if len(pos) > 0 {
		action = pos[0]
	}
	if len(pos) > 1 {
		return usagef("unexpected argument %q", pos[1])
	}
	if action != "up" && action != "status" {
		return usagef("unknown action %q: want up or status", action)
	}
	url := databaseURL(*dbURL)

	if action == "status" {
		store, err := stores.OpenWith(ctx, url, stores.Options{ReadOnly: true})
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no database at %s ('readpast migrate %s' creates it)", stores.Redact(url), dbArg(url))
		}
		if err != nil {
			return fmt.Errorf("open database: %w", err)
		}
		defer store.Close()
		return printStatus(ctx, store, *asJSON, stdout)
	}

	// Open without migrating, so that up reports what Migrate itself does.
	store, err := stores.OpenWith(ctx, url, stores.Options{SkipMigrate: true})
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer store.Close()
	before, err := schemaStatus(ctx, store)
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	after, err := schemaStatus(ctx, store)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, after)
	}
	switch {
	case after.Current < 0:
		fmt.Fprintln(stdout, "schema is up to date")
	case before.Current == after.Current:
		fmt.Fprintf(stdout, "schema was already up to date (version %d)\n", after.Current)
	default:
		fmt.Fprintf(stdout, "migrated the schema from version %d to %d\n", before.Current, after.Current)
	}
	return nil
}

// printStatus prints the schema status of store.
func printStatus(ctx context.Context, store readpast.Store, asJSON bool, stdout io.Writer) error {
	if sv, ok := store.(readpast.SchemaVersioner); ok {
		cur, latest, err := sv.SchemaVersion(ctx)
		if err != nil {
			return fmt.Errorf("schema version: %w", err)
		}
		vs := newVersionStatus(cur, latest)
		if asJSON {
			return writeJSON(stdout, vs)
		}
		fmt.Fprintln(stdout, vs)
		return nil
	}
	// A store that does not report its version: check that the schema
	// answers a query.
	st, err := schemaStatus(ctx, store)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(stdout, st)
	}
	if st.UpToDate {
		fmt.Fprintln(stdout, "schema is in place (this store does not report its version)")
	} else {
		fmt.Fprintln(stdout, "schema is missing or unusable: run 'readpast migrate up'")
	}
	return nil
}

// schemaStatus asks the store for its schema version when it can tell, and
// otherwise checks that the schema answers a query.
func schemaStatus(ctx context.Context, store readpast.Store) (migrateStatus, error) {
	if sv, ok := store.(readpast.SchemaVersioner); ok {
		cur, latest, err := sv.SchemaVersion(ctx)
		if err != nil {
			return migrateStatus{}, fmt.Errorf("schema version: %w", err)
		}
		return migrateStatus{Current: cur, Latest: latest, UpToDate: cur == latest}, nil
	}
	_, err := store.Get(ctx, 1)
	ok := err == nil || errors.Is(err, readpast.ErrNotFound)
	return migrateStatus{Current: -1, Latest: -1, UpToDate: ok}, nil
}
