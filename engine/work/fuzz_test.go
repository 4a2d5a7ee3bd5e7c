package work

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/internal/natstest"
	"github.com/edictrt/edict/priority"
)

func FuzzToken(f *testing.F) {
	key := bytes.Repeat([]byte{7}, 32)
	f.Add(encodeToken(key, grant{ID: "a", Seq: 1, Delivered: 1}))
	f.Add(encodeToken(key, grant{ID: "b", Seq: 7, Delivered: 1, Nonce: 99, LeaseUntil: 1 << 41, Reply: "$JS.ACK.EDICT_WORK.w_ingest_document.1.7.7.1764547200000000000.0"}))
	f.Add(encodeToken(key, grant{ID: "0123456789abcdef0123456789abcdef", Seq: 1 << 40, Delivered: 3}))
	f.Add("")
	f.Add("AQ")
	f.Add("!!!!")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := verifyToken(key, s)
		if err != nil {
			return
		}
		// Anything that verifies re-encodes to itself.
		if got := encodeToken(key, g); got != s {
			t.Fatalf("verified token %q re-encodes as %q", s, got)
		}
		if !validID(g.ID) {
			t.Fatalf("verified token with invalid id %q", g.ID)
		}
	})
}

func FuzzTokenRoundTrip(f *testing.F) {
	f.Add("id-1", uint64(1), uint64(1), uint64(7), int64(1764547200000), "$JS.ACK.EDICT_WORK.w_ingest_document.1.1.1.1764547200000000000.0")
	f.Add("x", uint64(0), ^uint64(0), ^uint64(0), int64(-1), "")
	f.Fuzz(func(t *testing.T, id string, seq, delivered, nonce uint64, until int64, reply string) {
		if !validID(id) || len(reply) > maxReplyLen {
			return
		}
		key := bytes.Repeat([]byte{1}, 32)
		g := grant{ID: id, Seq: seq, Delivered: delivered, Nonce: nonce, LeaseUntil: until, Reply: reply}
		got, err := verifyToken(key, encodeToken(key, g))
		if err != nil || got != g {
			t.Fatalf("round trip %+v = %+v, %v", g, got, err)
		}
		if _, err := verifyToken(bytes.Repeat([]byte{2}, 32), encodeToken(key, g)); err == nil {
			t.Fatal("token verified under another key")
		}
	})
}

// FuzzHandle feeds arbitrary bodies to every op of a live service: nothing
// panics, and every failure is a *protocol.Error.
func FuzzHandle(f *testing.F) {
	seeds := []struct{ op, body string }{
		{"submit", `{"type":"conversation","payload":{"a":1}}`},
		{"submit", `{"id":"x","type":"document","class":"hydration","tenant":"t","payload":[1,2],"max_attempts":2}`},
		{"claim", `{"worker":"w","classes":["interactive"],"lanes":["queries"],"types":["conversation"],"lease_seconds":1,"wait_ms":0}`},
		{"ack", `{"token":"AQAAAAAAAAABAAAAAAAAAAEBYQ"}`},
		{"ack", `{"token":"x","next":{"worker":"w","classes":["interactive"],"wait_ms":0}}`},
		{"ack", `{"token":"x","next":{"worker":"w","wait_ms":5}}`},
		{"retry", `{"token":"x","error":"e"}`},
		{"defer", `{"token":"x","delay_ms":5}`},
		{"extend", `{"token":"x","lease_seconds":1e308}`},
		{"dead", `{"token":"x","reason":"r"}`},
		{"dead_list", `{"class":"interactive","after":"3","limit":2}`},
		{"dead_replay", `{"ids":["x"]}`},
		{"stats", `{}`},
		{"claim", `{"worker":"w","lease_seconds":NaN}`},
		{"submit", "\x00"},
	}
	for _, s := range seeds {
		f.Add(s.op, []byte(s.body))
	}
	srv := natstest.Run(f, nil)
	nc := natstest.Connect(f, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // setup deadline
	defer cancel()
	svc, err := Open(ctx, js, Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = svc.Close() })
	f.Fuzz(func(t *testing.T, op string, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // one request's deadline
		defer cancel()
		_, err := svc.Handle(ctx, protocol.Request{Op: op, Caller: protocol.Caller{Principal: "fuzz", Class: priority.Orchestration, Ceiling: priority.Interactive}, Body: body})
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("%s %q: %v is not a *protocol.Error", op, body, err)
		}
		if pe != nil && pe.Code >= 500 && pe.Code != protocol.CodeBusy {
			t.Fatalf("%s %q: server error %v", op, body, err)
		}
	})
}
