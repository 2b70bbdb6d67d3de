package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A routine is a hot-path statement run inside a PL/pgSQL function of its
// own (sql/routines/), so that each server session plans it once instead
// of on every call: planning the claim and completion statements was
// 40-65% of their time (docs/benchmarks.md). Sent as they are, on the
// unnamed statement, they are planned afresh with the actual parameters.
//
// A plan made once must be right at any table size, since it is kept
// while the tables grow from empty to millions of rows (a generic plan of
// the claim made on an empty table went to sequential scans: 346 ms a
// claim). So the functions run with enable_seqscan off, and every table
// access in the statements has exactly one index that serves it: the
// statements are written so that no other index applies (see the
// comments at used_marks and new_groups in sql/claim.sql), and
// TestRoutinePlansSurviveGrowth proves it on tables grown after the plans
// were made. plan_cache_mode = force_generic_plan keeps the plan: left to
// itself PostgreSQL would compare it with custom plans and plan again.
//
// And they run with jit off. A generic plan's cost is estimated for the
// whole table: once the statistics show a few hundred thousand jobs in a
// queue, the claim's estimate passes jit_above_cost (100,000 by default)
// and, with the JIT on (PostgreSQL's default where it is built with
// LLVM), every execution compiled the plan's expressions first: 65-80 ms
// a claim instead of about 1 ms, measured with 393,000 jobs waiting
// (docs/benchmarks.md). The plans read a few rows per job; compiling never
// pays. TestRoutinesNeverJIT proves it.
//
// The function's name carries a digest of its definition, so every build
// of readpast calls the statements it was built with: during a rolling
// upgrade old and new processes share one database, each calling its
// own. Migrate defines this build's routines; a store whose routine is
// missing (the database was migrated by another build) defines them
// itself on first use. Routines of other builds are left in place.
//
// Inside a caller's transaction (ClaimTx in tests, CompleteTx) the plain
// statement is sent instead: a missing routine there would abort the
// caller's transaction, and planning one statement is not the cost that
// matters there.
type routine struct {
	name   string // readpast_<statement>_<8 hex digits of the definition's SHA-256>
	define string // CREATE OR REPLACE FUNCTION ...
	call   string // the statement the store sends
}

// The routines.
var (
	claimRoutine = mustRoutine("claim", "$1::text[], $2::text, $3::bigint, $4::bigint, $5::uuid, $6::integer, $7::timestamptz",
		map[string]string{"Queues": claimQueuesSQL, "Body": claimSQL, "Ungrouped": claimUngroupedSQL, "UngroupedFrom": claimUngroupedFromSQL})
	completeRoutine = mustRoutine("complete", "$1::bigint[], $2::uuid[], $3::jsonb[], $4::boolean",
		map[string]string{"Body": completeSQL})

	routines = []routine{claimRoutine, completeRoutine}
)

// mustRoutine wraps statements in the function of sql/routines/function.sql,
// with the signature (and the body, where it defines one) of
// sql/routines/name.sql; statements maps the names the body uses ("Body"
// for the one statement of the default body) to statement texts. The
// call's arguments are constants: no routine text depends on input.
func mustRoutine(name, args string, statements map[string]string) routine {
	t := template.Must(template.New(name).Option("missingkey=error").
		ParseFS(sqlFiles, "sql/routines/function.sql", "sql/routines/"+name+".sql"))
	data := map[string]string{}
	for k, s := range statements {
		data[k] = strings.TrimRight(strings.TrimSpace(s), ";")
	}
	render := func(fn string) string {
		var b strings.Builder
		data["Name"] = fn
		if err := t.ExecuteTemplate(&b, "function.sql", data); err != nil {
			panic(fmt.Sprintf("postgres: routine %s: %v", name, err))
		}
		return b.String()
	}
	sum := sha256.Sum256([]byte(render("readpast_" + name)))
	fn := "readpast_" + name + "_" + hex.EncodeToString(sum[:4])
	return routine{
		name:   fn,
		define: render(fn),
		call:   "SELECT * FROM " + fn + "(" + args + ")",
	}
}

// routineExecMode is the exec mode of the routines' calls, given the
// pool's default mode (see New). A call's parameter and result types are
// fixed by the routine's name (a digest of its definition), and its
// statement is planned once per server session inside the function
// whatever the call's mode, so the call itself may be a prepared
// statement: under cache_statement (pgx's default) each connection
// prepares it once, instead of parsing, analyzing and planning it on every
// call (5% of the server's CPU in a 100-worker drain, docs/benchmarks.md).
// The modes whose every statement is one round trip on the unnamed
// statement, which transaction-mode poolers pass through (exec,
// simple_protocol, cache_describe), are kept; describe_exec becomes
// cache_describe, one round trip instead of two.
func routineExecMode(def pgx.QueryExecMode) pgx.QueryExecMode {
	switch def {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe:
		return def
	}
	return pgx.QueryExecModeCacheDescribe
}

// missingRoutinesSQL returns the function names of $1 that the database
// does not define.
const missingRoutinesSQL = "SELECT coalesce(array_agg(n), '{}') FROM unnest($1::text[]) n WHERE to_regproc(n) IS NULL"

// defineRoutines defines this build's routines that the database lacks,
// in tx, which holds the migration lock.
func defineRoutines(ctx context.Context, tx pgx.Tx) error {
	names := make([]string, len(routines))
	for i, r := range routines {
		names[i] = r.name
	}
	var missing []string
	err := tx.QueryRow(ctx, missingRoutinesSQL, names).Scan(&missing)
	if err != nil {
		return fmt.Errorf("look up the routines: %w", err)
	}
	for _, r := range routines {
		if !slices.Contains(missing, r.name) {
			continue
		}
		if _, err := tx.Exec(ctx, r.define); err != nil {
			return fmt.Errorf("define %s: %w", r.name, err)
		}
	}
	return nil
}

// defineRoutinesNow defines the missing routines in a transaction of its
// own, under the migration lock.
func (s *Store) defineRoutinesNow(ctx context.Context) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockKey)); err != nil {
			return err
		}
		return defineRoutines(ctx, tx)
	})
}

// withRoutines runs f, and once more after defining this build's routines
// when f failed because one of them is missing.
func withRoutines[T any](ctx context.Context, s *Store, f func() (T, error)) (T, error) {
	v, err := f()
	if !missingRoutine(err) {
		return v, err
	}
	if derr := s.defineRoutinesNow(ctx); derr != nil {
		return v, fmt.Errorf("%w (and defining this build's routines failed: %v)", err, derr)
	}
	return f()
}

// missingRoutine reports whether err says one of the routines does not
// exist (SQLSTATE 42883, undefined_function).
func missingRoutine(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42883" {
		return false
	}
	for _, r := range routines {
		if strings.Contains(pgErr.Message, r.name) {
			return true
		}
	}
	return false
}
