-- Renew a running job's lease from now (the database clock), only for the
-- current claim.
UPDATE readpast_jobs
SET lease_expires_at = now() + $3::bigint * interval '1 microsecond'
WHERE id = $1 AND token = $2 AND state = 'running'
RETURNING lease_expires_at;
