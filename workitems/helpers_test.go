package workitems_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/internal/natstest"
	"github.com/edictrt/edict/workitems"
)

// engine is a real nats-server with JetStream, the work service and the
// engine's micro service in front of it.
type engine struct {
	nc   *nats.Conn
	work *work.Service
	svc  *service.Service
}

func startEngine(t testing.TB, wcfg work.Config, qos admission.QoSConfig) *engine {
	t.Helper()
	s := natstest.Run(t, nil)
	nc := natstest.Connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // setup deadline
	defer cancel()
	w, err := work.Open(ctx, js, wcfg)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.Start(ctx, nc, service.Config{Work: w, QoS: qos})
	if err != nil {
		_ = w.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = svc.Close()
		_ = w.Close()
	})
	return &engine{nc: nc, work: w, svc: svc}
}

func newClient(t testing.TB, nc *nats.Conn, cfg workitems.Config) *workitems.Client {
	t.Helper()
	c, err := workitems.New(nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// reqCtx is one test step's deadline.
func reqCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
