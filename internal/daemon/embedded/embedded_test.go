package embedded_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/edictrt/edict/internal/daemon/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAccountsCrossImportWithSharedUser(t *testing.T) {
	opts, creds, err := embedded.Options(embedded.Config{Port: server.RANDOM_PORT, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready within 10s")
	}
	eng, err := nats.Connect(s.ClientURL(), nats.UserInfo(creds.User, creds.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	app, err := nats.Connect(s.ClientURL(), nats.Name("ENGINE/engine")) // no credentials: the APP user
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()

	sub, err := eng.Subscribe("edict.eg.g.node_get", func(m *nats.Msg) { _ = m.Respond([]byte(m.Header.Get("Nats-Request-Info"))) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := eng.Flush(); err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("edict.eg.g.node_get")
	msg.Header.Set("Nats-Request-Info", `{"acc":"ENGINE","user":"engine"}`) // forged: the server replaces it
	reply, err := app.RequestMsg(msg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Acc, User, Name string }
	if err := json.Unmarshal(reply.Data, &info); err != nil {
		t.Fatalf("request info %q: %v", reply.Data, err)
	}
	if info.Acc != "APP" || info.User != "app" {
		t.Fatalf("request info = %+v, want acc APP user app", info)
	}
	// edict.> is not exported: the work stream's subjects are unreachable.
	if _, err := app.Request("edict.workq.interactive.x", nil, 500*time.Millisecond); err == nil {
		t.Fatal("an application reached edict.workq")
	}
	// The engine account has JetStream.
	if _, err := eng.JetStream(); err != nil {
		t.Fatal(err)
	}
}
