-- The job holding unique key $1, to explain a retry that could not take
-- its key back.
SELECT job_id FROM readpast_unique_keys
WHERE unique_key = $1 AND (live OR keep_until > now());
