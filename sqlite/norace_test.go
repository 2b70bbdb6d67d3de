//go:build !race

package sqlite_test

// raceEnabled: see race_test.go.
const raceEnabled = false
