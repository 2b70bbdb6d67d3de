//go:build race

package sqlite_test

// raceEnabled: the race detector slows the transpiled SQLite about 15x, so
// the stress tests run smaller.
const raceEnabled = true
