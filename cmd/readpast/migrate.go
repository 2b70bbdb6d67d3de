package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/readpast/readpast"
)

// schemaVersioner is implemented by stores that can report their schema
// version (the one applied to the database, and the newest this code
// knows).
type schemaVersioner interface {
	SchemaVersion(ctx context.Context) (current, latest int, err error)
}

// migrateStatus is what `migrate status --json` prints.
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

	st, err := schemaStatus(ctx, store)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, st)
	}
	switch {
	case st.Current < 0 && st.UpToDate:
		fmt.Fprintln(stdout, "schema is in place (this store does not report its version)")
	case st.Current < 0:
		fmt.Fprintln(stdout, "schema is missing or unusable: run 'readpast migrate up'")
	case st.UpToDate:
		fmt.Fprintf(stdout, "schema is up to date (version %d)\n", st.Current)
	case st.Current > st.Latest:
		fmt.Fprintf(stdout, "schema version %d is newer than this readpast (knows up to %d): upgrade readpast\n", st.Current, st.Latest)
	default:
		fmt.Fprintf(stdout, "schema version %d of %d: %d migration(s) pending; run 'readpast migrate up'\n",
			st.Current, st.Latest, st.Latest-st.Current)
	}
	return nil
}

// schemaStatus asks the store for its schema version when it can tell, and
// otherwise checks that the schema answers a query.
func schemaStatus(ctx context.Context, store readpast.Store) (migrateStatus, error) {
	if sv, ok := store.(schemaVersioner); ok {
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
