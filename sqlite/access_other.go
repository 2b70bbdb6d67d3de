//go:build !unix

package sqlite

// writable reports whether this process may write path. Where there is no
// access(2), it answers yes, and errors name only the database.
func writable(string) bool { return true }
