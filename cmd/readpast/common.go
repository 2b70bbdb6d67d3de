package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/stores"
)

// envDatabaseURL names the environment variable that stands in for
// --database-url.
const envDatabaseURL = "READPAST_DATABASE_URL"

// usageError marks a mistake in the command line (exit code 2).
type usageError struct{ error }

// Unwrap returns the mistake.
func (e usageError) Unwrap() error { return e.error }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// flagSet is a command's flags, and the help -h prints.
type flagSet struct {
	*flag.FlagSet
	help func()
}

// newFlagSet returns a flag set that reports errors instead of exiting or
// printing them (run prints each error once), and prints its usage, when
// asked with -h, to stdout.
func newFlagSet(name, synopsis string, stdout io.Writer) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // the flag package calls it on errors too
	return &flagSet{FlagSet: fs, help: func() {
		fmt.Fprintf(stdout, "Usage: readpast %s\n\nFlags:\n", synopsis)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}}
}

// parseFlags parses args into fs, letting flags and positional arguments
// mix (Go's flag package stops at the first positional argument). It
// returns the positional arguments. On -h it prints the help and returns
// flag.ErrHelp.
func parseFlags(fs *flagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.help()
				return nil, err
			}
			return nil, usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, noEmpty(fs, namedFlags...)
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// namedFlags are the flags that name a queue, kind, state, tag, key,
// time, database, server, token or address, which parseFlags refuses
// empty: an unset shell variable must not pick another target.
var namedFlags = []string{"queue", "kind", "state", "tag", "group", "key", "unique-key", "run-at",
	"database-url", "url", "token", "addr", "time-zone"}

// noEmpty refuses any flag of names that fs was given as an empty string
// (`--queue "$QUEUE"` with QUEUE unset), which would otherwise read as
// the flag left out: a job in the default queue, a filter that keeps
// every job.
func noEmpty(fs *flagSet, names ...string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(names, f.Name) && f.Value.String() == "" {
			err = usagef("--%s is empty: give a value, or leave the flag out", f.Name)
		}
	})
	return err
}

// dbFlag adds --database-url to fs.
func dbFlag(fs *flagSet) *string {
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

// openExisting opens the database at url for the commands that work on an
// existing, migrated database: read-only when readOnly. It creates nothing
// (no file, directory or schema) and fails with an error that says what to
// do when the database is missing, not migrated, or from a newer readpast.
func openExisting(ctx context.Context, url string, readOnly bool) (readpast.Store, error) {
	st, err := stores.OpenWith(ctx, url, stores.Options{Existing: true, ReadOnly: readOnly})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at %s: check the path, or create it with 'readpast migrate %s' (or 'readpast serve')",
				stores.Redact(url), dbArg(url))
		}
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := checkSchema(ctx, st, url); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// checkSchema reports a schema this readpast cannot use, saying what to do.
func checkSchema(ctx context.Context, st readpast.Store, url string) error {
	err := stores.CheckSchema(ctx, st)
	switch {
	case errors.Is(err, readpast.ErrSchemaTooOld):
		return fmt.Errorf("database %s is not migrated (%v): run 'readpast migrate %s' first", stores.Redact(url), err, dbArg(url))
	case errors.Is(err, readpast.ErrSchemaTooNew):
		return fmt.Errorf("database %s was migrated by a newer readpast (%v): use that version of readpast", stores.Redact(url), err)
	case err != nil:
		return fmt.Errorf("database %s: %w", stores.Redact(url), err)
	}
	return nil
}

// dbArg is how a suggested command names the database: --database-url
// with the path for SQLite, and a placeholder for PostgreSQL, whose URL
// may hold a password.
func dbArg(url string) string {
	kind, target, err := stores.Parse(url)
	switch {
	case err != nil || kind == stores.KindPostgres:
		return "--database-url URL"
	case url == "":
		return ""
	}
	return "--database-url " + shellQuote(target)
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r == '=' || r == ',' ||
			'0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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

// parseJobID parses a job id argument: decimal digits without a sign or
// leading zeros, as job ids are printed.
func parseJobID(s string) (int64, error) {
	id, ok := httpapi.ParseID(s)
	if !ok {
		return 0, usagef("job id must be a positive integer such as 42, not %q", s)
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

// printJobs writes jobs (each as the API encodes it, or its summary) as
// a table. A MORE KEYS column (the keys after the group) is there when a
// job has some.
func printJobs(w io.Writer, jobs []json.RawMessage) error {
	summaries := make([]httpapi.JobSummary, len(jobs))
	moreKeys := false
	for i, raw := range jobs {
		if err := json.Unmarshal(raw, &summaries[i]); err != nil {
			return fmt.Errorf("decode job: %w", err)
		}
		moreKeys = moreKeys || len(summaries[i].Keys) > 1
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "ID\tQUEUE\tKIND\tSTATE\tATTEMPT\tPRIORITY\tRUN AT\tGROUP")
	if moreKeys {
		fmt.Fprint(tw, "\tMORE KEYS")
	}
	fmt.Fprintln(tw)
	for _, j := range summaries {
		group := "-"
		if j.Group != nil && *j.Group != "" {
			group = *j.Group
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%d\t%s\t%s",
			j.ID, j.Queue, j.Kind, j.State, j.Attempt, j.MaxAttempts, j.Priority, fmtTime(j.RunAt), group)
		if moreKeys {
			fmt.Fprintf(tw, "\t%s", laterKeys(j.Keys))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// laterKeys lists the keys after the first (the group), or "-".
func laterKeys(keys []string) string {
	if len(keys) < 2 {
		return "-"
	}
	return strings.Join(keys[1:], ",")
}

// printJob writes one job in detail, one field a line, then its errors.
func printJob(w io.Writer, wj httpapi.Job) error {
	group := "-"
	if wj.Group != nil {
		group = *wj.Group
	}
	rows := [][2]string{
		{"id", strconv.FormatInt(wj.ID, 10)},
		{"queue", wj.Queue},
		{"kind", wj.Kind},
		{"state", string(wj.State)},
		{"attempt", fmt.Sprintf("%d of %d", wj.Attempt, wj.MaxAttempts)},
		{"priority", strconv.Itoa(wj.Priority)},
		{"group", group},
	}
	if len(wj.Keys) > 1 {
		rows = append(rows, [2]string{"keys", strings.Join(wj.Keys, ", ")})
	}
	if len(wj.Tags) > 0 {
		rows = append(rows, [2]string{"tags", strings.Join(wj.Tags, ", ")})
	}
	rows = append(rows, [][2]string{
		{"run at", fmtTime(wj.RunAt)},
		{"created at", fmtTime(wj.CreatedAt)},
		{"started at", fmtTimePtr(wj.StartedAt)},
		{"finished at", fmtTimePtr(wj.FinishedAt)},
		{"lease expires", fmtTimePtr(wj.LeaseExpiresAt)},
		{"worker", orDash(wj.Worker)},
		{"payload", string(wj.Payload)},
		{"result", orDash(string(wj.Result))},
	}...)
	if wj.UniqueKey != "" {
		held := "while pending or running"
		if wj.UniqueUntil != nil {
			held += ", and until " + fmtTime(*wj.UniqueUntil)
		}
		rows = append(rows, [2]string{"unique key", wj.UniqueKey + " (held " + held + ")"})
	}
	if err := writeFacts(w, rows); err != nil {
		return err
	}
	if len(wj.Errors) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ATTEMPT\tAT\tWORKER\tERROR")
	for _, e := range wj.Errors {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Attempt, fmtTime(e.At), orDash(e.Worker), oneLine(e.Message, 100))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// runRead runs the read-only command name, which takes no arguments but
// its target flags and --json (described by jsonHelp): it opens the
// backend read-only, gets the result and prints it, as JSON with --json
// or else with print.
func runRead[T any](ctx context.Context, name, jsonHelp string, args []string, stdout io.Writer,
	get func(backend, context.Context) (T, error), print func(io.Writer, T) error) error {
	fs := newFlagSet(name, name+" [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, jsonHelp)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	b, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer b.close()
	res, err := get(b, ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if *asJSON {
		return writeJSON(stdout, res)
	}
	return print(stdout, res)
}

// stateColumns writes a tab and a header for each job state, in
// lifecycle order.
func stateColumns(w io.Writer) {
	for _, s := range readpast.AllStates {
		fmt.Fprintf(w, "\t%s", strings.ToUpper(string(s)))
	}
}

// writeFacts writes "name: value" lines, the values aligned, as the show
// commands print one job or schedule.
func writeFacts(w io.Writer, rows [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s:\t%s\n", r[0], r[1])
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
