-- Claim up to $3 jobs from the queues $1 for worker $2, with a lease of $4
-- microseconds, all under the claim token $5, in ONE statement.
--
-- Never waits: every row it takes is locked SKIP LOCKED (jobs and marks
-- FOR UPDATE, key rows FOR NO KEY UPDATE), so a row another transaction
-- holds (a claim, a finisher, a caller's open CompleteTx or EnqueueTx) is
-- passed over, and the only other lock it takes is
-- pg_try_advisory_xact_lock. A finisher's FOR KEY SHARE on the row of a
-- key without a bound or with room (fragments/free_slots.sql) does not
-- conflict with FOR NO KEY UPDATE, so such a key is not passed over for
-- it. Never overshoots a group limit: a
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
-- locked: the rows of the groups (keys) those marks name, locked SKIP
--   LOCKED, with their newest running count and limit: max_running, the
--   rate as interval_us (0: none), burst and tat (the bucket's
--   theoretical arrival time; docs/design/flow-control.md), and weight.
-- locked_freed / locked_folds (fragment fold_locked): the freed-slot
--   counts of the bounded keys locked (migrations/0025), deleted, and
--   subtracted from their running counts in decided and bumped: only
--   the counts this DELETE removed, not those the snapshot shows, which
--   a fold committed since the snapshot may already have subtracted from
--   the row locked (TestClaimFoldsOnlyCountsItDeletes). Only holders of
--   a key's row delete its counts, so the DELETE waits for nobody. Keys
--   without a bound are never full, and their counts wait for Tidy.
--   more_locked_freed / more_locked_folds do the same for later keys.
-- new_keys / new_groups: marked keys that have no row in this snapshot
--   (looked up in one object of the keys with rows, as taken below).
--   This claim creates their rows, under a try-lock on the key that every
--   transaction inserting or deleting a key's row takes, so two of them
--   never insert one key at once (the second INSERT would wait for the
--   first). The CASE takes the try-lock only for keys without a row.
--   readpast_key_limits (migrations/0020) gives them the limits that
--   govern them, read in one statement under the limits' lock, taken
--   shared and without waiting, with a snapshot of its own: keys whose
--   limit is being changed are passed over, and so are keys whose row
--   another claim created since this statement's snapshot (the INSERT
--   would wait for whoever updated that row since).
-- key_time: a clock read once the first keys' rows are locked and the new
--   ones' limits resolved (the joins force locked and new_groups first).
-- decided: per first key held, how many jobs it gives (takes): its free
--   slots, the tokens its bucket has at key_time, and $3, whichever is
--   least; and the jobs taken in its turn, at most weight - 1 (a weight
--   lowered below them ends the turn at the next job; bumped counts them
--   so too).
-- heads: per decided group, its first due pending jobs across all queues
--   (a group is one ordered stream), as many as it has free slots, plus
--   one to mark when this claim's own limit is what stops it. Each has a
--   turn: the later of its run_at and when a claim last took jobs of its
--   key (served_at), so that keys take turns within a priority.
-- heads_more / heads_extra / taken_heads: when a key's heads this claim
--   may take name more keys, its extra head (the one past its takes, read
--   by heads_extra when heads did not read it) is taken as well:
--   a head held back by a later key then leaves its place to it, so that
--   claims of a few jobs still start the key's jobs behind a held one
--   (readpast_fit_keys keeps the key to its takes).
-- taken_heads: those heads in our queues, locked SKIP LOCKED; the state
--   and run-at are re-checked on the newest row version, so a head claimed,
--   finished or rescheduled since the snapshot is left alone.
-- more_needed / more_locked / more_new: the keys after the first that
--   the heads this claim may take name (jobs with several keys, more_keys),
--   other than the first keys it marked: their rows locked SKIP LOCKED,
--   and the rows it creates, as for first keys (try-lock, then
--   readpast_key_limits with a snapshot of its own). None when no head
--   names more than one key.
-- claim_time: the claim's time, the jobs' started_at, read once every row
--   it may take, job or key, is locked or resolved: a job's claims are in
--   started_at order (a claim that read its clock before it locked an
--   ungrouped job could record a start earlier than the end of the claim
--   before, ConcurrentGroupsNoOverlap), and every bucket is judged at a
--   time after every change to its row this claim can see, a prune
--   included (decided's takes, judged at key_time, are never more than
--   the tokens at claim_time).
-- more_decided / key_state: the later keys' free slots and what they may
--   give (as decided), beside the first keys'.
-- candidates: the jobs this claim may take, ungrouped or taken heads,
--   each at its turn (an ungrouped job's turn is its run_at) and in its
--   round (its place among its key's heads this claim took, after the
--   turn_used jobs earlier claims took in the key's current turn, divided
--   by the key's weight; an ungrouped job's is the first, as a key of one
--   job). Heads it cannot take (in other queues, held, or changed since
--   the snapshot) have no round, so they push no job of their key back.
--   Along a key's stream neither the round nor the turn goes back, so any
--   cut is a prefix of it.
-- picked: the first $3 candidates in claim order: priority, round, turn,
--   run_at, id, so that a claim takes up to weight jobs of each key it
--   reads before more of any. When a candidate names more than one key
--   (with_more), readpast_fit_keys (migrations/0021) takes them in that
--   order instead, each only while every key it names has some of its
--   takes left, which it uses one of (fitted); the others are passed over
--   (blocked) with the first key that had none left.
-- counts / firsts: the jobs picked per key, over every key they name (a
--   key's running count and tokens), and per first key (its turn).
-- blocked / waits: why a passed-over job's later key had nothing left:
--   full (no free slot once this claim's jobs count), throttled (out of
--   tokens), held (its row is another transaction's), or this claim's own
--   limit. A first key whose job waits for a full key is written on that
--   key's row as a waiter, and is marked again when that key frees a slot
--   (migrations/0021, the announce trigger); a job that waits for tokens
--   is marked at that key's next start.
-- taken: counts as one object, by key. bumped looks each row's count up in
--   it (a binary search) rather than joining counts: a plan made once
--   would join them by a nested loop whose inner index scan sorts and
--   probes the whole array of keys again for each row, in the square of
--   the keys a claim takes (223 ms of a claim of 1,000 jobs of 1,000
--   keys).
-- created / bumped: the key rows count their newly running jobs and, with
--   a rate, move tat on by one interval a start; served_at becomes the
--   claim's time once the key has started its weight's worth of jobs in
--   its turn (turn_used + n reaches weight; turn_used keeps the rest),
--   else the key keeps its turn (a key taken only as a later key keeps its
--   turn, which follows its own jobs). Rows gain the waiters of blocked.
--   A key whose row another transaction
--   created since the snapshot is not in new_groups (readpast_key_limits
--   reads the rows anew under the key's try-lock); should one conflict
--   anyway, nothing is inserted, and that key's jobs are not claimed.
-- held: the keys whose rows this claim holds (locked or created), first
--   or later; held_first: the first keys among them, whose marks it uses.
-- claimed (fragments/claim_jobs.sql): the picked jobs, ungrouped or whose
--   every key this claim holds, become running.
-- used_marks / announced: every due mark of each group this claim holds
--   is used up (not only the walked ones, so a full group's backlog of
--   marks does not clog the front of the claim order), and each such group
--   with a free slot left is marked again at its first job this claim did
--   not take, per queue (left_heads): at the job's run_at, or at the
--   bucket's next start when its tokens ran out (paced), and never
--   before its turn (for a key whose turn this claim moved, the start of
--   this claim's transaction: a claim that began before this one's clock
--   read, and reads this mark, counts it as due); so a key out of tokens
--   costs no claim anything until then; due lists those times (the
--   earliest 256, "due:" as for jobs enqueued for later; and the next
--   start of each key this claim filled and left out of tokens, whose next
--   job a completion before then marks at that time) in a row of its
--   own after the jobs (claim_result_due), which the store announces once
--   the claim has committed (postgres/due.go), so that every process's
--   claimers wake for each; a NOTIFY sent here would hold PostgreSQL's
--   notify lock, which serializes the commits of every transaction that
--   notifies, through this claim's commit. Marks of jobs not yet due
--   stay: nobody else would mark those jobs when they come due. A job
--   passed over for a full later key is not marked when its first key
--   started nothing in this claim (the key waits on the full key's row,
--   and no claim reads it again until then); one passed over for a later
--   key's tokens is marked at that key's next start, under the same
--   condition (a key that started a job is marked as usual, and the next
--   claim reads on past the held job).
-- passed / more: "more:" and a job id when keyed jobs this claim could
--   not take may be claimable now: it marked a key again at a due time
--   (left_heads), or one of its queues has a due mark of a key it did
--   not hold (another claim holds the mark, or another transaction the
--   key's row, and neither wakes anybody when it ends; or the walk of $3
--   marks ended before it, on marks of full keys or several marks of one
--   key: a completion and an enqueue behind it each mark the key). The
--   store then has its claimers look again soon after a short claim
--   (postgres/claimmore.go); the id, the first such job in claim order,
--   tells it whether the same one is passed over again. Only a short
--   claim reads them (the store acts on nothing else): in the claim-order
--   index, without a lock, up to the first mark per queue of a key not
--   held, past the held keys' marks, which used_marks deletes anyway; the
--   held keys are looked up in a hashed subplan, not an array searched
--   once per mark. Due is judged
--   by statement_timestamp(), not now(): in a transaction begun before
--   the call (claims in READ COMMITTED transactions of their own), a key
--   another claim marked meanwhile at its own now() is due for the next
--   claim, though not for this one's walk.
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
    SELECT group_key, running, max_running, interval_us, burst, tat, served_at, weight, turn_used
    FROM readpast_groups
    WHERE group_key = ANY (ARRAY(SELECT group_key FROM marked))
    FOR NO KEY UPDATE SKIP LOCKED
),
{{template "fold_locked" "locked"}},
new_keys AS (
    SELECT group_key
    FROM marked m
    WHERE {{template "missing_keys" "marked"}}
),
new_groups AS (
    SELECT k.group_key, 0 AS running, k.max_running, k.interval_us, k.burst,
           NULL::timestamptz AS tat, NULL::timestamptz AS served_at, k.weight, 0 AS turn_used, k.limit_key
    FROM readpast_key_limits(ARRAY(SELECT group_key FROM new_keys)) k
),
key_time AS (
    SELECT clock_timestamp() AS at
    FROM (SELECT count(*) FROM locked) l, (SELECT count(*) FROM new_groups) n
),
decided AS (
    SELECT g.group_key, g.max_running - g.running AS free,
           {{template "key_takes" "t.at"}} AS takes,
           g.interval_us, g.burst, g.tat, g.served_at, g.weight,
           least(g.turn_used, g.weight - 1) AS turn_used
    FROM (SELECT l.group_key, l.running - coalesce(f.n, 0) AS running, l.max_running, l.interval_us, l.burst,
                 l.tat, l.served_at, l.weight, l.turn_used
          FROM locked l LEFT JOIN locked_folds f USING (group_key)
          UNION ALL
          SELECT group_key, running, max_running, interval_us, burst, tat, served_at, weight, turn_used FROM new_groups) g
    CROSS JOIN key_time t
),
heads AS (
    SELECT h.id, h.queue, h.priority, h.run_at, greatest(h.run_at, d.served_at) AS turn,
           d.weight, d.turn_used, d.group_key, h.rn <= d.takes AS claimable, h.more_keys
    FROM decided d
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at, more_keys, row_number() OVER (ORDER BY priority, run_at, id) AS rn
        FROM readpast_jobs
        WHERE group_key = d.group_key AND state = 'pending' AND run_at <= now()
        ORDER BY priority, run_at, id
        LIMIT CASE WHEN d.free > d.takes THEN d.takes + 1 ELSE d.takes END
    ) h
),
heads_more AS (
    SELECT DISTINCT group_key FROM heads WHERE claimable AND more_keys IS NOT NULL
),
heads_extra AS (
    SELECT h.id, h.queue, h.priority, h.run_at, greatest(h.run_at, d.served_at) AS turn,
           d.weight, d.turn_used, d.group_key, false AS claimable, h.more_keys
    FROM (SELECT * FROM decided
          WHERE free <= takes AND takes > 0 AND group_key IN (SELECT group_key FROM heads_more)) d
    CROSS JOIN LATERAL (
        SELECT id, queue, priority, run_at, more_keys
        FROM readpast_jobs
        WHERE group_key = d.group_key AND state = 'pending' AND run_at <= now()
        ORDER BY priority, run_at, id
        OFFSET d.takes
        LIMIT 1
    ) h
),
heads_all AS (
    SELECT id, queue, priority, run_at, turn, weight, turn_used, group_key, claimable, more_keys FROM heads
    UNION ALL
    SELECT id, queue, priority, run_at, turn, weight, turn_used, group_key, claimable, more_keys FROM heads_extra
),
taken_heads AS (
    SELECT id, priority, run_at, group_key, more_keys
    FROM readpast_jobs
    WHERE id = ANY (ARRAY(SELECT id FROM heads_all
                          WHERE (claimable OR group_key IN (SELECT group_key FROM heads_more))
                            AND queue IN (SELECT name FROM open_queues)))
      AND state = 'pending' AND run_at <= now()
      AND readpast_stall('claim.group_heads', id)
    FOR UPDATE SKIP LOCKED
),
more_needed AS (
    SELECT DISTINCT k AS group_key
    FROM taken_heads t CROSS JOIN LATERAL unnest(t.more_keys) k
    WHERE t.more_keys IS NOT NULL
      AND k <> ALL (ARRAY(SELECT group_key FROM marked))
      AND readpast_stall('claim.more_keys', k)
),
more_locked AS (
    SELECT group_key, running, max_running, interval_us, burst, tat
    FROM readpast_groups
    WHERE group_key = ANY (ARRAY(SELECT group_key FROM more_needed))
    FOR NO KEY UPDATE SKIP LOCKED
),
{{template "fold_locked" "more_locked"}},
more_new_keys AS (
    SELECT group_key
    FROM more_needed m
    WHERE {{template "missing_keys" "more_needed"}}
),
more_new AS (
    SELECT k.group_key, 0 AS running, k.max_running, k.interval_us, k.burst, NULL::timestamptz AS tat,
           k.weight, k.limit_key
    FROM (SELECT ARRAY(SELECT group_key FROM more_new_keys) AS keys) a
    CROSS JOIN LATERAL readpast_key_limits(a.keys) k
    WHERE cardinality(a.keys) > 0
),
claim_time AS (
    SELECT clock_timestamp() AS at
    FROM (SELECT count(*) FROM key_time) k, (SELECT count(*) FROM ungrouped) u,
         (SELECT count(*) FROM taken_heads) h, (SELECT count(*) FROM more_locked) l,
         (SELECT count(*) FROM more_new) n
),
more_decided AS (
    SELECT g.group_key, g.max_running - g.running AS free,
           {{template "key_takes" "t.at"}} AS takes,
           g.interval_us, g.burst, g.tat
    FROM (SELECT l.group_key, l.running - coalesce(f.n, 0) AS running, l.max_running, l.interval_us, l.burst, l.tat
          FROM more_locked l LEFT JOIN more_locked_folds f USING (group_key)
          UNION ALL
          SELECT group_key, running, max_running, interval_us, burst, tat FROM more_new) g
    CROSS JOIN claim_time t
),
key_state AS (
    SELECT group_key, free, takes, interval_us, burst, tat FROM decided
    UNION ALL
    SELECT group_key, free, takes, interval_us, burst, tat FROM more_decided
),
candidates AS (
    SELECT id, priority, 1::bigint AS round, run_at AS turn, run_at, group_key, NULL::text[] AS more_keys,
           true AS claimable
    FROM ungrouped
    UNION ALL
    SELECT t.id, t.priority,
           (row_number() OVER (PARTITION BY t.group_key ORDER BY t.priority, t.run_at, t.id) - 1
                + h.turn_used) / h.weight + 1,
           h.turn, t.run_at, t.group_key, t.more_keys, h.claimable
    FROM taken_heads t JOIN heads_all h USING (id)
),
with_more AS (
    SELECT EXISTS (SELECT 1 FROM taken_heads WHERE more_keys IS NOT NULL) AS some_more
    FROM claim_time t
    WHERE readpast_stall('claim.fit', t.at)
),
fitted AS (
    SELECT f.id, f.blocked_by
    FROM readpast_fit_keys(
        (SELECT jsonb_agg(jsonb_build_array(id, group_key, more_keys) ORDER BY priority, round, turn, run_at, id)
         FROM candidates),
        (SELECT jsonb_object_agg(group_key, takes) FROM key_state),
        $3::integer) f
    WHERE (SELECT some_more FROM with_more)
),
picked AS (
    SELECT id, group_key, more_keys
    FROM (SELECT id, group_key, more_keys, priority, round, turn, run_at
          FROM candidates
          WHERE claimable AND NOT (SELECT some_more FROM with_more)
          ORDER BY priority, round, turn, run_at, id
          LIMIT $3) c
    UNION ALL
    SELECT c.id, c.group_key, c.more_keys
    FROM fitted f JOIN candidates c USING (id)
    WHERE f.blocked_by IS NULL
),
counts AS (
    SELECT group_key, count(*)::int AS n
    FROM (SELECT group_key FROM picked WHERE group_key IS NOT NULL
          UNION ALL
          SELECT unnest(more_keys) FROM picked WHERE more_keys IS NOT NULL) k
    GROUP BY group_key
),
firsts AS (
    SELECT group_key, count(*)::int AS n FROM picked WHERE group_key IS NOT NULL GROUP BY group_key
),
blocked AS (
    SELECT f.id, c.group_key AS first_key, f.blocked_by,
           CASE WHEN s.group_key IS NULL THEN 'held'
                WHEN s.free - coalesce(n.n, 0) <= 0 THEN 'full'
                WHEN s.interval_us > 0 AND s.takes - coalesce(n.n, 0) <= 0 AND s.free - coalesce(n.n, 0) > 0
                     AND s.takes < least(s.free, $3) THEN 'throttled'
                ELSE 'limit' END AS why,
           CASE WHEN s.interval_us > 0
           THEN greatest(s.tat, t.at) + (coalesce(n.n, 0) - s.burst + 1) * s.interval_us * interval '1 microsecond'
           END AS next_start
    FROM fitted f
    JOIN candidates c USING (id)
    LEFT JOIN key_state s ON s.group_key = f.blocked_by
    LEFT JOIN counts n ON n.group_key = f.blocked_by
    CROSS JOIN claim_time t
    WHERE f.blocked_by IS NOT NULL AND f.blocked_by <> c.group_key
),
waits AS (
    SELECT coalesce(jsonb_object_agg(blocked_by, firsts), '{}') AS w
    FROM (SELECT blocked_by, jsonb_agg(DISTINCT first_key) AS firsts FROM blocked WHERE why = 'full' GROUP BY blocked_by) b
),
created AS (
    INSERT INTO readpast_groups (group_key, running, max_running, interval_us, burst, weight, limit_key, tat,
                                 served_at, turn_used, waiters)
    SELECT n.group_key, coalesce(c.n, 0), n.max_running, n.interval_us, n.burst, n.weight, n.limit_key,
           CASE WHEN n.interval_us > 0
           THEN t.at + coalesce(c.n, 0) * n.interval_us * interval '1 microsecond' END,
           CASE WHEN f.n >= n.weight THEN t.at END,
           coalesce(f.n, 0) % n.weight,
           CASE WHEN w.w ? n.group_key THEN ARRAY(SELECT jsonb_array_elements_text(w.w -> n.group_key)) END
    FROM (SELECT group_key, max_running, interval_us, burst, weight, limit_key FROM new_groups
          UNION ALL
          SELECT group_key, max_running, interval_us, burst, weight, limit_key FROM more_new) n
    LEFT JOIN counts c USING (group_key) LEFT JOIN firsts f USING (group_key)
    CROSS JOIN claim_time t CROSS JOIN waits w
    ORDER BY n.group_key
    ON CONFLICT (group_key) DO NOTHING
    RETURNING group_key
),
taken AS (
    SELECT coalesce((SELECT jsonb_object_agg(group_key, n) FROM counts), '{}') AS n,
           coalesce((SELECT jsonb_object_agg(group_key, n) FROM firsts), '{}') AS f,
           coalesce((SELECT jsonb_object_agg(group_key, n)
                     FROM (SELECT group_key, n FROM locked_folds UNION ALL SELECT group_key, n FROM more_locked_folds) x),
                    '{}') AS folded
),
bumped AS (
    UPDATE readpast_groups g
    SET running = g.running + coalesce((k.n ->> g.group_key)::int, 0) - coalesce((k.folded ->> g.group_key)::int, 0),
        tat = CASE WHEN g.interval_us > 0 AND k.n ? g.group_key
              THEN greatest(g.tat, t.at) + (k.n ->> g.group_key)::int * g.interval_us * interval '1 microsecond'
              ELSE g.tat END,
        served_at = CASE WHEN k.f ? g.group_key
                         AND least(g.turn_used, g.weight - 1) + (k.f ->> g.group_key)::int >= g.weight
                    THEN greatest(g.served_at, t.at) ELSE g.served_at END,
        turn_used = CASE WHEN k.f ? g.group_key
                    THEN (least(g.turn_used, g.weight - 1) + (k.f ->> g.group_key)::int) % g.weight
                    ELSE g.turn_used END,
        waiters = CASE WHEN w.w ? g.group_key
                  THEN ARRAY(SELECT DISTINCT x FROM unnest(coalesce(g.waiters, '{}')
                                 || ARRAY(SELECT jsonb_array_elements_text(w.w -> g.group_key))) x ORDER BY x)
                  ELSE g.waiters END
    FROM taken k, claim_time t, waits w
    WHERE g.group_key = ANY (ARRAY(SELECT group_key FROM locked UNION ALL SELECT group_key FROM more_locked))
      AND (k.n ? g.group_key OR w.w ? g.group_key OR k.folded ? g.group_key)
),
held AS (
    SELECT group_key FROM locked UNION ALL SELECT group_key FROM more_locked UNION ALL SELECT group_key FROM created
),
held_first AS (
    SELECT group_key FROM locked
    UNION ALL
    SELECT group_key FROM created WHERE group_key IN (SELECT group_key FROM new_groups)
),
{{template "claim_jobs"}},
used_marks AS (
    DELETE FROM readpast_group_ready
    WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM readpast_group_ready
        WHERE group_key = ANY (ARRAY(SELECT group_key FROM held_first))
          AND run_at + interval '0' <= now()
        FOR UPDATE SKIP LOCKED))
),
paced AS (
    SELECT d.group_key,
           CASE WHEN d.interval_us > 0
           THEN greatest(d.tat, t.at) + (coalesce(c.n, 0) - d.burst + 1) * d.interval_us * interval '1 microsecond'
           END AS next_start,
           CASE WHEN d.turn_used + f.n >= d.weight OR d.served_at > now() THEN now() ELSE d.served_at END AS mark_at
    FROM decided d LEFT JOIN counts c USING (group_key) LEFT JOIN firsts f USING (group_key) CROSS JOIN claim_time t
),
left_heads AS (
    SELECT h.queue, h.priority, greatest(h.run_at, p.next_start, p.mark_at, b.next_start) AS run_at, h.id, h.group_key,
           p.next_start > h.run_at OR b.next_start > h.run_at AS throttled
    FROM heads_all h JOIN paced p USING (group_key)
    LEFT JOIN blocked b ON b.id = h.id AND b.why = 'throttled'
                           AND h.group_key NOT IN (SELECT group_key FROM firsts)
    WHERE h.group_key IN (SELECT group_key FROM held_first)
      AND h.id <> ALL (ARRAY(SELECT id FROM picked))
      AND (h.group_key IN (SELECT group_key FROM firsts)
           OR h.id <> ALL (ARRAY(SELECT id FROM blocked WHERE why = 'full')))
),
due AS (
    SELECT 'due:' || string_agg(t::text, ',' ORDER BY t) AS payload
    FROM (
        SELECT DISTINCT (extract(epoch FROM at) * 1000000)::bigint AS t
        FROM (SELECT run_at AS at FROM left_heads WHERE throttled
              UNION ALL
              -- A key this claim filled and left out of tokens: a
              -- completion before its next start marks its next job
              -- then, and wakes no one.
              SELECT p.next_start
              FROM paced p JOIN decided d USING (group_key) JOIN counts c USING (group_key)
              CROSS JOIN claim_time t
              WHERE d.free - c.n <= 0 AND p.next_start > t.at) x
        ORDER BY t
        LIMIT 256
    ) w
    HAVING count(*) > 0
),
announced AS (
    INSERT INTO readpast_group_ready (queue, priority, run_at, job_id, group_key)
    SELECT DISTINCT ON (h.group_key, h.queue) h.queue, h.priority, h.run_at, h.id, h.group_key
    FROM left_heads h
    ORDER BY h.group_key, h.queue, h.priority, h.run_at, h.id
),
passed AS (
    SELECT m.job_id, m.priority, m.run_at
    FROM open_queues q
    CROSS JOIN LATERAL (
        SELECT job_id, priority, run_at
        FROM readpast_group_ready
        WHERE queue = q.name AND run_at <= statement_timestamp()
          AND group_key NOT IN (SELECT group_key FROM held_first)
        ORDER BY priority, run_at, job_id
        LIMIT 1
    ) m
    WHERE (SELECT count(*) FROM claimed) < $3
    UNION ALL
    SELECT id, priority, run_at FROM left_heads WHERE run_at <= statement_timestamp()
),
more AS (
    SELECT 'more:' || job_id AS payload
    FROM passed
    ORDER BY priority, run_at, job_id
    LIMIT 1
)
{{template "claim_result_due"}};
