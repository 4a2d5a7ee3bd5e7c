package service_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/engine/store"
	"github.com/edictrt/edict/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requestTimeout bounds every request a test makes.
const requestTimeout = 10 * time.Second

type engine struct {
	svc   *service.Service
	store *store.Store
	app   *nats.Conn // an application connection (APP account)
	eng   *nats.Conn // the engine's connection (ENGINE account)
}

// startEngine runs the two-account server, a store on t.TempDir() and the
// service with cfg (Store and TrustRequestInfo filled in unless set).
func startEngine(t *testing.T, cfg service.Config, maxPayload int32) *engine {
	t.Helper()
	acc := natstest.RunAccounts(t, maxPayload)
	e := &engine{eng: natstest.Connect(t, acc.Server, acc.EngineOptions()...), app: natstest.Connect(t, acc.Server)}
	if cfg.Store == nil {
		st, err := store.Open(t.TempDir(), store.Config{Shards: 2})
		if err != nil {
			t.Fatalf("store: %v", err)
		}
		t.Cleanup(func() {
			if err := st.Close(); err != nil {
				t.Errorf("store close: %v", err)
			}
		})
		cfg.Store = st
	}
	e.store = cfg.Store
	cfg.TrustRequestInfo = true
	svc, err := service.Start(t.Context(), e.eng, cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	e.svc = svc
	return e
}

// reply is a decoded engine answer.
type reply struct {
	code int // 0 on success
	text string
	data []byte
}

func (r reply) decode(t testing.TB, v any) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("error reply %d %s", r.code, r.text)
	}
	if err := json.Unmarshal(r.data, v); err != nil {
		t.Fatalf("decode %s: %v", r.data, err)
	}
}

// call sends body to subject with headers and returns the answer; a NATS
// error is returned as is.
func call(nc *nats.Conn, subject string, body any, hdr map[string]string) (reply, error) {
	var data []byte
	switch b := body.(type) {
	case nil:
	case string:
		data = []byte(b)
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			return reply{}, err
		}
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	for k, v := range hdr {
		msg.Header[k] = []string{v}
	}
	m, err := nc.RequestMsg(msg, requestTimeout)
	if err != nil {
		return reply{}, err
	}
	r := reply{data: m.Data}
	if c := m.Header.Get(protocol.HeaderErrorCode); c != "" {
		r.code, _ = strconv.Atoi(c)
		r.text = m.Header.Get(protocol.HeaderError)
	}
	return r, nil
}

func mustCall(t testing.TB, nc *nats.Conn, subject string, body any, hdr map[string]string) reply {
	t.Helper()
	r, err := call(nc, subject, body, hdr)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	return r
}

// echoWork is a protocol.Handler that answers with the caller it was given;
// its op "block" waits for release to close (ignoring ctx) and its op
// "wait" waits for ctx.
type echoWork struct {
	release chan struct{}
	started chan struct{} // optional: "block" sends on it once running
	blocked *atomic.Int32 // optional: counts "block" calls that returned
}

func (echoWork) Ops() []string { return []string{"submit", "stats", "block", "wait"} }

func (w echoWork) Handle(ctx context.Context, req protocol.Request) (any, error) {
	switch req.Op {
	case "block":
		if w.started != nil {
			w.started <- struct{}{}
		}
		<-w.release
		if w.blocked != nil {
			w.blocked.Add(1)
		}
	case "wait":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	class, _ := classOf(ctx)
	return map[string]string{"principal": req.Caller.Principal, "class": req.Caller.Class.String(), "ceiling": req.Caller.Ceiling.String(), "ctx_class": class, "op": req.Op}, nil
}
