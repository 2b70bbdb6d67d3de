package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/readpast/readpast"
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
// up to date; status reports it.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", "migrate [up|status] [flags]", stderr)
	dbURL := dbFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
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

	// Open without migrating, so that status changes nothing and up
	// reports what Migrate itself says.
	store, err := openStoreNoMigrate(ctx, databaseURL(*dbURL), nil)
	if err != nil {
		return err
	}
	defer store.Close()

	if action == "up" {
		if err := store.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		st, err := schemaStatus(ctx, store)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, st)
		}
		if st.Current >= 0 {
			fmt.Fprintf(stdout, "schema is up to date (version %d)\n", st.Current)
		} else {
			fmt.Fprintln(stdout, "schema is up to date")
		}
		return nil
	}

	if sv, ok := store.(readpast.SchemaVersioner); ok {
		cur, latest, err := sv.SchemaVersion(ctx)
		if err != nil {
			return fmt.Errorf("schema version: %w", err)
		}
		vs := newVersionStatus(cur, latest)
		if *asJSON {
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
	if *asJSON {
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
