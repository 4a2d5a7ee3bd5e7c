package identity

import (
	"encoding/json"
	"testing"
	"time"
)

// natsRequestInfo is a Nats-Request-Info value as nats-server v2 writes it.
const natsRequestInfo = `{"start":"2026-12-01T07:30:04.123456789Z","host":"127.0.0.1","id":7,"acc":"APP","svc":"ENGINE",` +
	`"user":"ingest","lang":"go","ver":"1.55.0","rtt":"151.2µs","server":"NBX","tags":["a","b"],"kind":"Client","client_type":"nats"}`

func TestPrincipalFast(t *testing.T) {
	for _, tc := range []struct {
		raw       string
		acc, user string
		ok        bool
	}{
		{`{"acc":"APP","user":"u"}`, "APP", "u", true},
		{` { "acc" : "A" , "n": -1.5e+3, "b": [true,false,null,{"x":[]}] } `, "A", "", true},
		{`{}`, "", "", true},
		{`{"acc":"A","acc":"B"}`, "B", "", true},
		{`{"ACC":"A"}`, "", "", false},    // case-folded key: encoding/json decides
		{`{"acc":"a\"b"}`, "", "", false}, // escapes: encoding/json decides
		{`{"acc":1}`, "", "", false},      // wrong type: encoding/json reports it
		{`{"acc":"A"} x`, "", "", false},  // trailing data
		{`{"acc":"A",}`, "", "", false},   // trailing comma
		{`{"n":01,"acc":"A"}`, "", "", false},
		{`[]`, "", "", false},
		{``, "", "", false},
	} {
		acc, user, ok := principalFast(tc.raw)
		if ok != tc.ok || (ok && (acc != tc.acc || user != tc.user)) {
			t.Errorf("principalFast(%q) = %q, %q, %v; want %q, %q, %v", tc.raw, acc, user, ok, tc.acc, tc.user, tc.ok)
		}
	}
	// The NATS server's own header takes the fast path.
	if acc, user, ok := principalFast(natsRequestInfo); !ok || acc != "APP" || user != "ingest" {
		t.Errorf("nats request info: %q %q %v", acc, user, ok)
	}
}

// FuzzRequestInfoFastPath holds the fast path to encoding/json: whatever it
// accepts, json.Unmarshal accepts too, with the same acc and user.
func FuzzRequestInfoFastPath(f *testing.F) {
	for _, s := range []string{natsRequestInfo, `{"acc":"APP","user":"u"}`, `{"acc":"A","acc":"B"}`, `{"Acc":"A"}`,
		`{"a":[1,2,{"b":"c"}],"acc":"x"}`, `{"n":-0.5E-2}`, `{"acc":null}`, `{"s":"\u00e9"}`, `{}`, ` {} `, `{"acc":"A"}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		acc, user, ok := principalFast(s)
		if !ok {
			return
		}
		var ri requestInfo
		if err := json.Unmarshal([]byte(s), &ri); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json: %v", s, err)
		}
		if ri.Account != acc || ri.User != user {
			t.Fatalf("%q: fast %q/%q, encoding/json %q/%q", s, acc, user, ri.Account, ri.User)
		}
	})
}

// BenchmarkParseRequestInfo times ParseRequestInfo on the NATS server's
// header against encoding/json decoding the same value, interleaved, and
// reports x-vs-encoding-json.
func BenchmarkParseRequestInfo(b *testing.B) {
	var fast, slow time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := ParseRequestInfo(natsRequestInfo); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var ri requestInfo
		if err := json.Unmarshal([]byte(natsRequestInfo), &ri); err != nil {
			b.Fatal(err)
		}
		fast += t1.Sub(t0)
		slow += time.Since(t1)
	}
	b.ReportMetric(float64(fast)/float64(max(slow, 1)), "x-vs-encoding-json")
}
