package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/sqlite"
	"github.com/readpast/readpast/stores"
)

// envDatabaseURL names the environment variable that stands in for
// --database-url.
const envDatabaseURL = "READPAST_DATABASE_URL"

// usageError marks a mistake in the command line (exit code 2).
type usageError struct{ error }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// newFlagSet returns a flag set that reports errors instead of exiting and
// prints its usage to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: readpast %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs, letting flags and positional arguments
// mix (Go's flag package stops at the first positional argument). It
// returns the positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// dbFlag adds --database-url to fs.
func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", "",
		"database: a postgres:// URL or a SQLite file path (default $"+envDatabaseURL+", else ./readpast.db)")
}

// databaseURL returns the --database-url value, else the environment's.
func databaseURL(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(envDatabaseURL)
}

// openStore opens the store named by url (see stores.Open).
func openStore(ctx context.Context, url string, log *slog.Logger) (readpast.Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := stores.Open(ctx, url, log)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return st, nil
}

// openStoreNoMigrate is openStore without the migration a SQLite store
// otherwise runs as it opens (a PostgreSQL store never migrates on open).
func openStoreNoMigrate(ctx context.Context, url string, log *slog.Logger) (readpast.Store, error) {
	kind, target, err := stores.Parse(url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if kind != stores.KindSQLite {
		return openStore(ctx, url, log)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := sqlite.Open(ctx, target, sqlite.Options{Logger: log, SkipMigrate: true})
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return st, nil
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeCharDevice != 0
}

// parseJobID parses a job id argument.
func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usagef("job id must be a positive integer, not %q", s)
	}
	return id, nil
}

// fmtTime formats a time for tables: RFC 3339 in UTC, to the second.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtTimePtr is fmtTime for optional times.
func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

// orDash returns s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine shortens s to one line of at most n runes for tables.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// printJobs writes jobs as a table.
func printJobs(w io.Writer, jobs []*readpast.Job) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tQUEUE\tKIND\tSTATE\tATTEMPT\tPRIORITY\tRUN AT\tGROUP")
	for _, j := range jobs {
		group := "-"
		if j.Group != nil && *j.Group != "" {
			group = *j.Group
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\n",
			j.ID, j.Queue, j.Kind, j.State, j.Attempt, j.MaxAttempts, j.Priority, fmtTime(j.RunAt), group)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// printJob writes one job in detail, one field a line, then its errors.
func printJob(w io.Writer, j *readpast.Job) error {
	wj := httpapi.NewJob(j)
	group := "-"
	if wj.Group != nil {
		group = *wj.Group
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rows := [][2]string{
		{"id", strconv.FormatInt(wj.ID, 10)},
		{"queue", wj.Queue},
		{"kind", wj.Kind},
		{"state", string(wj.State)},
		{"attempt", fmt.Sprintf("%d of %d", wj.Attempt, wj.MaxAttempts)},
		{"priority", strconv.Itoa(wj.Priority)},
		{"group", group},
		{"run at", fmtTime(wj.RunAt)},
		{"created at", fmtTime(wj.CreatedAt)},
		{"started at", fmtTimePtr(wj.StartedAt)},
		{"finished at", fmtTimePtr(wj.FinishedAt)},
		{"lease expires", fmtTimePtr(wj.LeaseExpiresAt)},
		{"worker", orDash(wj.Worker)},
		{"payload", string(wj.Payload)},
		{"result", orDash(string(wj.Result))},
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	if len(wj.Errors) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tAT\tWORKER\tERROR")
	for _, e := range wj.Errors {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Attempt, fmtTime(e.At), orDash(e.Worker), oneLine(e.Message, 100))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
