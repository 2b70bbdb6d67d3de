-- Claim up to $3 jobs from the queues $1 for worker $2, with a lease of $4
-- microseconds, all under the claim token $5, in ONE statement.
--
-- Never waits: every row it takes is locked FOR UPDATE SKIP LOCKED, so a
-- row another transaction holds (a claim, a finisher, a caller's open
-- CompleteTx or EnqueueTx) is passed over, and the only other lock it
-- takes is pg_try_advisory_xact_lock. Never overshoots a group limit: a
-- group's free slots are read from its row AFTER locking it, and when a
-- concurrent commit changed that row since this statement's snapshot,
-- PostgreSQL hands the lock, and the values, of the newest version.
--
-- open_queues, ungrouped (fragments/claim_start.sql): the queues of $1
--   that are not paused, and per queue the first pending ungrouped jobs in
--   claim order, locked SKIP LOCKED.
-- marks: per queue, the first ready marks in claim order (see
--   migrations/002_ready_marks.sql), locked SKIP LOCKED so concurrent
--   claims walk disjoint marks. Full and idle groups have no marks, so
--   they cost nothing here.
-- locked: the rows of the groups those marks name, locked SKIP LOCKED,
--   with their newest running and max_running.
-- new_groups: marked groups that have no row in this snapshot (a missing
--   row means running 0, limit 1). This claim creates their rows, under a
--   try-lock on the key that every transaction inserting or deleting a
--   group row takes, so two of them never insert one key at once (the
--   second INSERT would wait for the first). The CASE takes the try-lock
--   only for keys without a row.
-- heads: per decided group, its first due pending jobs across all queues
--   (a group is one ordered stream), as many as it has free slots, plus
--   one to mark when this claim's own limit is what stops it.
-- taken_heads: those heads in our queues, locked SKIP LOCKED; the state
--   and run-at are re-checked on the newest row version, so a head claimed,
--   finished or rescheduled since the snapshot is left alone.
-- picked: the first $3 of both kinds in claim order.
-- created / bumped: the group rows count their newly running jobs. A key
--   created by another transaction since the snapshot conflicts, nothing is
--   inserted, and that group's jobs are not claimed.
-- held: the groups whose rows this claim holds (locked or created).
-- claimed (fragments/claim_jobs.sql): the picked jobs, ungrouped or of a
--   group this claim holds, become running.
-- used_marks / announced: every due mark of each group this claim holds
--   is used up (not only the walked ones, so a full group's backlog of
--   marks does not clog the front of the claim order), and each such group
--   with a free slot left is marked again at its first job this claim did
--   not take, per queue. Marks of jobs not yet due stay: nobody else would
--   mark those jobs when they come due.
--
-- When no group of $1 is ready, the claim routine sends
-- claim_ungrouped.sql instead: this statement's ungrouped branch alone.
--
-- Plans made once (the claim routine, postgres/routines.go) must be right
-- at any table size, so every read of a table is bounded by an index
-- condition on a lateral value or on a small array computed first
-- (= ANY (ARRAY(...))), and no other index can serve it: joins to a big
-- table (new_groups, bumped) are written as such array lookups, and
-- used_marks's run_at test is an expression (run_at + interval '0'), so
-- that the claim-order index of the marks, whose third column is run_at,
-- cannot be walked whole for it.
WITH {{template "claim_start"}},
marks AS (
    SELECT m.mark, m.group_key
    FROM open_queues q
    CROSS JOIN LATERAL (
        SELECT ctid AS mark, group_key
        FROM readpast_group_ready
        WHERE queue = q.name AND run_at <= now()
          AND readpast_stall('claim.before_locks', q.name)
        ORDER BY priority, run_at, job_id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ) m
),
marked AS (
    SELECT DISTINCT group_key FROM marks WHERE readpast_stall('claim.group_rows', group_key)
),
locked AS (
    SELECT group_key, running, max_running
    FROM readpast_groups
    WHERE group_key = ANY (ARRAY(SELECT group_key FROM marked))
    FOR UPDATE SKIP LOCKED
),
new_groups AS (
    SELECT group_key, 0 AS running, 1 AS max_running
    FROM marked m
    WHERE CASE WHEN m.group_key <> ALL (ARRAY(
                   SELECT group_key FROM readpast_groups
                   WHERE group_key = ANY (ARRAY(SELECT group_key FROM marked))))
          THEN pg_try_advisory_xact_lock(1919181683, hashtext(m.group_key))
          ELSE false END
),
decided AS (
    SELECT group_key, max_running - running AS free, least(greatest(max_running - running, 0), $3) AS takes
    FROM (SELECT * FROM locked UNION ALL SELECT * FROM new_groups) g
),
heads AS (
    SELECT h.id, h.queue, h.priority, h.run_at, d.group_key, h.rn <= d.takes AS claimable
    FROM decided d
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at, row_number() OVER (ORDER BY priority, run_at, id) AS rn
        FROM readpast_jobs
        WHERE group_key = d.group_key AND state = 'pending' AND run_at <= now()
        ORDER BY priority, run_at, id
        LIMIT CASE WHEN d.free > d.takes THEN d.takes + 1 ELSE d.takes END
    ) h
),
taken_heads AS (
    SELECT id, priority, run_at, group_key
    FROM readpast_jobs
    WHERE id = ANY (ARRAY(SELECT id FROM heads WHERE claimable AND queue IN (SELECT name FROM open_queues)))
      AND state = 'pending' AND run_at <= now()
      AND readpast_stall('claim.group_heads', id)
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, group_key
    FROM (SELECT * FROM ungrouped UNION ALL SELECT * FROM taken_heads) c
    ORDER BY priority, run_at, id
    LIMIT $3
),
counts AS (
    SELECT group_key, count(*)::int AS n FROM picked WHERE group_key IS NOT NULL GROUP BY group_key
),
created AS (
    INSERT INTO readpast_groups (group_key, running)
    SELECT n.group_key, coalesce(c.n, 0)
    FROM new_groups n LEFT JOIN counts c USING (group_key)
    ORDER BY n.group_key
    ON CONFLICT (group_key) DO NOTHING
    RETURNING group_key
),
bumped AS (
    UPDATE readpast_groups g
    SET running = g.running + c.n
    FROM counts c
    WHERE g.group_key = ANY (ARRAY(SELECT group_key FROM counts))
      AND g.group_key = c.group_key AND g.group_key IN (SELECT group_key FROM locked)
),
held AS (
    SELECT group_key FROM locked UNION ALL SELECT group_key FROM created
),
{{template "claim_jobs"}},
used_marks AS (
    DELETE FROM readpast_group_ready
    WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM readpast_group_ready
        WHERE group_key = ANY (ARRAY(SELECT group_key FROM held))
          AND run_at + interval '0' <= now()
        FOR UPDATE SKIP LOCKED))
),
announced AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT DISTINCT ON (h.group_key, h.queue) h.queue, h.priority, h.run_at, h.id, h.group_key
    FROM heads h
    WHERE h.group_key IN (SELECT group_key FROM held)
      AND h.id <> ALL (ARRAY(SELECT id FROM picked))
    ORDER BY h.group_key, h.queue, h.priority, h.run_at, h.id
)
{{template "claim_result"}};
