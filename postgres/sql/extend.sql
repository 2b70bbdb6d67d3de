-- Renew a running job's lease from now (the database clock), only for the
-- current claim: a job's token is set exactly while it runs (CHECK on
-- readpast_jobs), so id and token are the whole check, and the lookup goes
-- by primary key (see complete.sql).
UPDATE readpast_jobs
SET lease_expires_at = now() + $3::bigint * interval '1 microsecond'
WHERE id = $1 AND token = $2
RETURNING lease_expires_at;
