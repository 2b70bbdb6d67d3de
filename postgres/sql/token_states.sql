-- Where the given jobs are now, to explain a worker write that matched
-- nothing: finished with that token, held by another claim, or unknown.
SELECT id, state, token::text FROM readpast_jobs WHERE id = ANY($1::bigint[])
UNION ALL
SELECT id, state, token::text FROM readpast_jobs_history WHERE id = ANY($1::bigint[]);
