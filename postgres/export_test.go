package postgres

// ClaimTx exposes claimTx to the tests of package postgres_test.
var ClaimTx = claimTx
