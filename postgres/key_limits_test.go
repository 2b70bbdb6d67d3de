package postgres_test

import (
	"context"
	"testing"

	"github.com/readpast/readpast"
)

// TestKeyLimitsTriesOnlyTemplatesThatExist: readpast_key_limits, which a
// claim uses for the keys whose rows it creates, tries a key's prefixes
// only at the lengths the templates have (schema 24). Every key still
// gets the limit readpast_key_limit (every prefix tried) gives it: its
// own, else its longest matching template, else none, among templates of
// many lengths, '*' itself, keys ending in '*' (which no job names), and keys of several
// bytes a character.
func TestKeyLimitsTriesOnlyTemplatesThatExist(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for _, k := range []string{"c*", "cu*", "customer:*", "customer:1*", "customer:12345", "a*", "é*", "éé:*", "x:y*"} {
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: k, Concurrency: len(k)}); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{"c", "cu", "cust", "customer:", "customer:1", "customer:12", "customer:12345", "customer:123456",
		"customer:2", "a*", "a", "ab*", "ab**", "ab***", "b", "é", "éé", "éé:1", "éa", "x:y", "x:yz", "x:", ""}
	want := map[string]string{
		"c": "c*", "cu": "cu*", "cust": "cu*", "customer:": "customer:*", "customer:1": "customer:1*",
		"customer:12": "customer:1*", "customer:12345": "customer:12345", "customer:123456": "customer:1*",
		"customer:2": "customer:*", "a*": "a*", "a": "a*", "ab*": "a*", "ab**": "a*", "ab***": "a*",
		"b": "", "é": "é*", "éé": "é*", "éé:1": "éé:*", "éa": "é*", "x:y": "x:y*", "x:yz": "x:y*", "x:": "", "": "",
	}
	check := func(name string) {
		t.Helper()
		rows, err := s.Pool().Query(ctx, `
			SELECT k.group_key, coalesce(k.limit_key, ''), coalesce(one.limit_key, '')
			FROM readpast_key_limits($1::text[]) k, readpast_key_limit(k.group_key) one`, keys)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		seen := 0
		for rows.Next() {
			var key, got, each string
			if err := rows.Scan(&key, &got, &each); err != nil {
				t.Fatal(err)
			}
			seen++
			if got != want[key] || each != want[key] {
				t.Errorf("%s: key %q governed by %q (readpast_key_limits) and %q (readpast_key_limit), want %q", name, key, got, each, want[key])
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if seen != len(keys) {
			t.Errorf("%s: readpast_key_limits returned %d keys, want %d", name, seen, len(keys))
		}
	}
	check("templates of many lengths")

	// '*' governs every key no other limit does.
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "*", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"b", "x:", ""} {
		want[k] = "*"
	}
	check("with '*'")

	// A template deleted leaves no length behind that matters.
	if err := s.DeleteLimit(ctx, "customer:1*"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"customer:1", "customer:12", "customer:123456"} {
		want[k] = "customer:*"
	}
	check("after a delete")
}
