package dashboard

import (
	"net/url"
	"testing"
)

// TestRetriesFlash: the message after an action of the Retries view says
// how many jobs it acted on and names those it could not, and shows
// nothing a made-up address puts in it.
func TestRetriesFlash(t *testing.T) {
	for q, want := range map[string]string{
		"done=retries-run&count=3":                           "3 jobs made due now.",
		"done=retries-cancel&count=1":                        "1 job given up (cancelled).",
		"done=retries-run&count=0":                           "No job was selected.",
		"done=retries-cancel&count=1&missed=12:running":      "1 job given up (cancelled). Not acted on: job 12 (it started running meanwhile).",
		"done=retries-run&count=0&missed=7:gone,8:succeeded": "0 jobs made due now. Not acted on: job 7 (it is gone), job 8 (it succeeded meanwhile).",
		"done=retries-run&count=2&missed=9:failed&more=4":    "2 jobs made due now. Not acted on: job 9 (it failed for good meanwhile) and 4 more.",
		"done=retries-run&count=2&missed=9:<b>hi</b>,x:gone": "2 jobs made due now.",
		"done=retries-delete&count=2":                        "",
		"done=retries-run&count=-1":                          "",
		"done=retries-run":                                   "",
	} {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := retriesFlash(v); got != want {
			t.Errorf("retriesFlash(%s) = %q, want %q", q, got, want)
		}
	}
}
