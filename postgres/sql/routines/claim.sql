{{/* The claim routine: its parameters, the claimed jobs in claim order
(and the row that lists the next starts of keys left out of tokens:
sql/fragments/claim_jobs.sql), and its body. When no group of the queues $1 has a due ready mark, the
claim's group branches would find nothing: it sends the ungrouped branch
alone (sql/claim_ungrouped.sql, a plan of 28 nodes instead of
sql/claim.sql's 91), and sql/claim.sql otherwise. The check reads the
marks' claim-order index (queue first) up to the first due mark, due by
the call's statement_timestamp(), so that a mark another claim wrote
after this transaction began still gets sql/claim.sql, which says it
passed it over (its "more" note). Given a
start in claim order ($6 priority, $7 run_at; NULLs for none), the
ungrouped claim starts there (sql/claim_ungrouped.sql rendered "from";
postgres/claimfrom.go says when the store sends one). First of all, in
a statement of its own, it keeps of $1 the queues whose pause keys it
gets (sql/claim_queues.sql): the claim's statement, with a later
snapshot, then reads every pause that committed before it took the key,
and a pause waits for it to end. That holds in READ COMMITTED only, where
each statement of the routine takes a new snapshot: in a session whose
default isolation is stricter, the routine refuses (SQLSTATE RP001)
before it does anything, and the store runs its claims in READ COMMITTED
transactions of their own (postgres/jobs.go). A claim takes rows SKIP
LOCKED and never means to wait, but PostgreSQL, locking a row whose
version another transaction has just replaced, also locks the newer
versions and waits for whoever holds them, whatever the SKIP LOCKED; a
claim holding key rows that waits so can close a deadlock with
completions, which wait for key rows in key order, and everyone in it
waits for deadlock_timeout (1 s by default). The routine's lock_timeout
ends any such wait after 10 ms: the claim fails with nothing done
(SQLSTATE 55P03) and the store claims again (postgres/claim.go). */}}{{define "signature"}}(text[], text, bigint, bigint, uuid, integer, timestamptz)
RETURNS TABLE (
    id bigint, queue text, kind text, payload jsonb, priority integer,
    attempt integer, max_attempts integer, run_at timestamptz, group_key text,
    created_at timestamptz, started_at timestamptz, errors jsonb,
    unique_key text, unique_until timestamptz, tags text, snoozes integer,
    traceparent text, tracestate text, more_keys text, due text){{end}}
{{define "settings"}}
SET lock_timeout = '10ms'{{end}}
{{define "declare"}}DECLARE
    kept_queues ALIAS FOR $1;
{{end}}{{define "body"}}IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'readpast: a claim needs READ COMMITTED, this transaction is %', current_setting('transaction_isolation')
        USING ERRCODE = 'RP001';
END IF;
kept_queues := ({{.Queues}});
IF EXISTS (SELECT 1 FROM readpast_group_ready WHERE queue = ANY ($1) AND run_at <= statement_timestamp()) THEN
RETURN QUERY
{{.Body}};
ELSIF $6 IS NULL THEN
RETURN QUERY
{{.Ungrouped}};
ELSE
RETURN QUERY
{{.UngroupedFrom}};
END IF;{{end}}
