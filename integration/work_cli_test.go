package integration

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// work_compact returns raw JSON without insignificant space.
func work_compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("payload %q: %v", raw, err)
	}
	return b.String()
}

// TestWorkCLI drives "edict work submit|claim|stats|dead" against a running
// edict serve as a person at a terminal would: an idempotent submit, a claim
// that acknowledges, stats, a dead letter listed and replayed, and bad input
// (a stray positional argument, a negative lease) refused with exit 2
// without queuing anything.
func TestWorkCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process CLI test")
	}
	p := startServe(t, t.TempDir())
	run := func(want int, args ...string) string {
		t.Helper()
		out, errs, code := edict(t, p.natsURL, append([]string{"work"}, args...)...)
		if code != want {
			t.Fatalf("edict work %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, want, out, errs)
		}
		return out
	}
	decode := func(out string, v any) {
		t.Helper()
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("output %q: %v", out, err)
		}
	}
	var rcpt struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	decode(run(0, "submit", "--type", "document", "--id", "d1", "--payload", `{"n":1}`), &rcpt)
	if rcpt.ID != "d1" || rcpt.Duplicate {
		t.Fatalf("first submit = %+v", rcpt)
	}
	decode(run(0, "submit", "--type", "document", "--id", "d1"), &rcpt)
	if !rcpt.Duplicate {
		t.Fatalf("re-submit = %+v, want a duplicate", rcpt)
	}
	// Bad input is refused before anything is sent.
	run(2, "submit", "--type", "document", `{"n":2}`)
	run(2, "claim", "--lease", "-1s")
	run(2, "stats", "extra")
	if out := run(0, "stats"); !strings.Contains(out, "background_ingestion          1") {
		t.Fatalf("stats after one submit:\n%s", out)
	}
	var cl struct {
		Claimed bool            `json:"claimed"`
		ID      string          `json:"id"`
		Class   string          `json:"class"`
		Attempt int             `json:"attempt"`
		Payload json.RawMessage `json:"payload"`
		Token   string          `json:"token"`
	}
	decode(run(0, "claim", "--classes", "background_ingestion", "--ack"), &cl)
	if !cl.Claimed || cl.ID != "d1" || cl.Class != "background_ingestion" || cl.Attempt != 1 || work_compact(t, cl.Payload) != `{"n":1}` || cl.Token == "" {
		t.Fatalf("claim = %+v", cl)
	}
	decode(run(0, "claim"), &cl)
	if cl.Claimed {
		t.Fatalf("claim after the ack = %+v, want nothing", cl)
	}
	// One attempt and a one-second lease: the lease runs out, the item is
	// dead-lettered (lease_exhausted) at its redelivery.
	run(0, "submit", "--type", "conversation", "--id", "q1", "--max-attempts", "1")
	decode(run(0, "claim", "--types", "conversation", "--lease", "1s"), &cl)
	if !cl.Claimed || cl.ID != "q1" {
		t.Fatalf("claim of q1 = %+v", cl)
	}
	var dead struct {
		Items []struct {
			ID       string `json:"id"`
			Attempts int    `json:"attempts"`
			Reason   string `json:"reason"`
		} `json:"items"`
	}
	// The lease runs out and the engine redelivers the item; the next claim
	// that meets the redelivery dead-letters it instead of handing it out.
	// Polled every 250 ms up to a 15 s deadline (a cross-process test).
	deadline := time.Now().Add(15 * time.Second)
	for {
		decode(run(0, "claim", "--types", "conversation"), &cl)
		if cl.Claimed {
			t.Fatalf("exhausted item handed out again: %+v", cl)
		}
		decode(run(0, "dead"), &dead)
		if len(dead.Items) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(dead.Items) != 1 || dead.Items[0].ID != "q1" || dead.Items[0].Attempts != 1 || dead.Items[0].Reason != "lease_exhausted" {
		t.Fatalf("dead letters = %+v", dead)
	}
	var rep struct {
		Replayed int `json:"replayed"`
	}
	decode(run(0, "dead", "--replay", "q1"), &rep)
	if rep.Replayed != 1 {
		t.Fatalf("replay = %+v", rep)
	}
	decode(run(0, "claim", "--types", "conversation", "--ack"), &cl)
	if !cl.Claimed || cl.ID != "q1" || cl.Attempt != 1 {
		t.Fatalf("claim of the replayed item = %+v", cl)
	}
	decode(run(0, "dead"), &dead)
	if len(dead.Items) != 0 {
		t.Fatalf("dead letters after the replay = %+v", dead)
	}
}
