// Package faults is readpast's fault suite: its tests do real damage to
// worker processes, PostgreSQL, the network and the disk while jobs flow,
// and check the whole history with internal/history. See docs/faults.md.
package faults
