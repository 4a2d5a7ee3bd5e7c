// Package embedded builds the options of the nats-server that edict serve
// runs in-process: two accounts, ENGINE (JetStream enabled, the engine's
// user with a random password) exporting edict.eg.>, edict.work.>,
// edict.admin.> and $SRV.> (streamed responses), and APP importing them
// with sharing on (so Nats-Request-Info carries the caller's user), with a
// no-credentials user as no_auth_user so local clients just work.
//
// edict.> is never exported: that would let any application publish
// straight into the work stream (edict.workq.…).
package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// Account and user names of the embedded server.
const (
	EngineAccount = "ENGINE"
	AppAccount    = "APP"
	EngineUser    = "engine"
	AppUser       = "app"
)

// Config configures the embedded server. The zero value listens on
// 127.0.0.1:4222 without JetStream.
type Config struct {
	// Host is the client listen host; "" means 127.0.0.1.
	Host string
	// Port is the client port; 0 means 4222, server.RANDOM_PORT (-1) a
	// random one.
	Port int
	// StoreDir holds the JetStream store; "" disables JetStream.
	StoreDir string
	// ServerName names the server; "" means "edict".
	ServerName string
	// MaxPayload overrides the server's max_payload; 0 means 1 MiB.
	MaxPayload int32
}

// Credentials are the engine account's user and password, valid for one
// server start.
type Credentials struct {
	User     string
	Password string
}

// conf is the accounts block of the README, with the engine's password
// substituted.
const conf = `
accounts {
  ENGINE: {
    jetstream: enabled
    users: [{user: engine, password: %s}]
    exports: [ {service: "edict.eg.>"}, {service: "edict.work.>"}, {service: "edict.admin.>"},
               {service: "$SRV.>", response_type: stream} ]
  }
  APP: {
    users: [{user: app}]
    imports: [ {service: {account: ENGINE, subject: "edict.eg.>"}, share: true},
               {service: {account: ENGINE, subject: "edict.work.>"}, share: true},
               {service: {account: ENGINE, subject: "edict.admin.>"}, share: true},
               {service: {account: ENGINE, subject: "$SRV.>"}} ]
  }
}
no_auth_user: app
`

// Options returns the server options and the engine's credentials.
func Options(cfg Config) (*server.Options, Credentials, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, Credentials{}, fmt.Errorf("embedded: password: %w", err)
	}
	creds := Credentials{User: EngineUser, Password: hex.EncodeToString(b[:])}
	opts := &server.Options{}
	if err := opts.ProcessConfigString(fmt.Sprintf(conf, strconv.Quote(creds.Password))); err != nil {
		return nil, Credentials{}, fmt.Errorf("embedded: accounts: %w", err)
	}
	opts.Host = cfg.Host
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	opts.Port = cfg.Port
	if opts.Port == 0 {
		opts.Port = 4222
	}
	opts.ServerName = cfg.ServerName
	if opts.ServerName == "" {
		opts.ServerName = "edict"
	}
	if cfg.MaxPayload > 0 {
		opts.MaxPayload = cfg.MaxPayload
	}
	opts.NoSigs = true
	opts.NoLog = true
	if cfg.StoreDir != "" {
		opts.JetStream = true
		opts.StoreDir = cfg.StoreDir
	}
	return opts, creds, nil
}
