-- If server session $1 is still there, running or having run the claim
-- statement $2 (the first 200 characters are compared), end it, so that
-- its transaction is over: committed or rolled back for good. One row
-- comes back while such a session exists. Used when a claim's caller gave
-- up on it (postgres.Store.Claim), which calls again until no row comes
-- back. Ending a session needs the session's role, which the store's own
-- sessions have.
SELECT pg_terminate_backend(pid)
FROM pg_stat_activity
WHERE pid = $1 AND left(query, 200) = left($2, 200);
