-- Set the lock_timeout ($1, as '10ms') of the transaction it runs in, for
-- the statements after it: a lock wait longer than that ends the statement
-- with SQLSTATE 55P03 (lockWaitEnded) and the transaction is undone.
SELECT set_config('lock_timeout', $1, true)
