//go:build unix

package sqlite

import "syscall"

// writable reports whether this process may write path (a file, or a
// directory to create files in).
func writable(path string) bool {
	return syscall.Access(path, 2 /* W_OK */) == nil
}
