package natstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/internal/daemon/embedded"
)

// Accounts is a running two-account server as edict serve embeds it (see
// package embedded): the engine connects with EngineOptions, applications
// connect without credentials and cross the service imports.
type Accounts struct {
	Server *server.Server
	// Engine holds the engine account's credentials.
	Engine embedded.Credentials
}

// EngineOptions returns the connect options of the engine account.
func (a *Accounts) EngineOptions() []nats.Option {
	return []nats.Option{nats.UserInfo(a.Engine.User, a.Engine.Password)}
}

// RunAccounts starts the two-account server with JetStream on t.TempDir()
// on a random loopback port; maxPayload 0 keeps the default. It shuts down
// when the test ends.
func RunAccounts(t testing.TB, maxPayload int32) *Accounts {
	t.Helper()
	opts, creds, err := embedded.Options(embedded.Config{Port: server.RANDOM_PORT, StoreDir: t.TempDir(), MaxPayload: maxPayload})
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return &Accounts{Server: Run(t, opts), Engine: creds}
}
