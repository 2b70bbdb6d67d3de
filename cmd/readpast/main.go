// Command readpast runs and administers a readpast job queue: it serves the
// HTTP API, migrates the database, enqueues jobs and inspects them.
//
// Usage:
//
//	readpast serve    [--addr 127.0.0.1:8080] [--database-url URL] [--token T]...
//	readpast migrate  [up|status] [--database-url URL]
//	readpast enqueue  --kind K [--payload JSON] [--queue Q] ... | --stdin
//	readpast jobs     list|show|cancel|retry|run|delete|bulk [flags]
//	readpast flows    enqueue FILE|- [--json]
//	readpast batches  open|add|seal|show [ID] [flags]
//	readpast queues   list|pause|resume [NAME] [--json]
//	readpast schedules list|show|set|delete|pause|resume|run [flags]
//	readpast limits   list|get|set|delete|take [flags]
//	readpast stats    [--json]
//	readpast bench    [--database-url URL] [--scenarios LIST] [--scale X] [--json]
//	readpast version  [--json]
//
// enqueue, jobs, flows, batches, queues, schedules, limits and stats talk to a readpast server's HTTP API (--url or
// READPAST_URL, default http://127.0.0.1:8080, with --token or
// READPAST_TOKEN), or, given --database-url (or READPAST_DATABASE_URL
// without READPAST_URL), to an existing database directly. serve and
// migrate open the database named by --database-url or
// READPAST_DATABASE_URL: a postgres:// URL, or a SQLite file path; by
// default ./readpast.db. Commands that only read never create a database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
)

// actions lists the actions of a subcommand that has them; a message
// about one names the action too.
func actions(command string) []string {
	switch command {
	case "jobs":
		return []string{"list", "show", "cancel", "retry", "run"}
	case "queues":
		return []string{"list", "pause", "resume"}
	case "flows":
		return []string{"enqueue"}
	case "batches":
		return []string{"open", "add", "seal", "show"}
	case "schedules":
		return []string{"list", "show", "set", "delete", "pause", "resume", "run"}
	case "limits":
		return []string{"list", "get", "show", "set", "delete", "take"}
	}
	return nil
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands in the order usage shows them.
func commands() []command {
	return []command{
		{"serve", "serve the HTTP API", runServe},
		{"migrate", "bring the database schema up to date, or show its status", runMigrate},
		{"enqueue", "enqueue a job from flags, or many from JSON lines on stdin", runEnqueue},
		{"jobs", "list, show, cancel, retry or run now jobs", runJobs},
		{"flows", "enqueue a flow: jobs that run after other jobs", runFlows},
		{"batches", "open a batch, add jobs to it, seal it or show it", runBatches},
		{"queues", "list queues, or pause or resume one", runQueues},
		{"schedules", "list, show, set, delete, pause, resume or run now periodic jobs", runSchedules},
		{"limits", "list, get, set or delete limits per key, or take tokens from a key's rate", runLimits},
		{"stats", "show job counts per queue and state", runStats},
		{"bench", "run the benchmark scenarios against a database of its own", runBench},
		{"version", "print the version", runVersion},
	}
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the exit code: 0 on success,
// 2 on a usage error, 1 on any other error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" || name == "-help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		if len(args) > 1 && slices.Contains(actions(name), args[1]) {
			name += " " + args[1] // messages name the action
		}
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "readpast %s: %v\n", name, err)
			fmt.Fprintf(stderr, "Run 'readpast %s -h' for usage.\n", name)
			return 2
		}
		fmt.Fprintf(stderr, "readpast %s: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(stderr, "readpast: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

// usage prints the list of subcommands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "readpast: a durable job queue in a SQL table.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: readpast COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'readpast COMMAND -h' for a command's flags.")
}
