package workitems_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/engine/work"
	"github.com/edictrt/edict/internal/natstest"
	"github.com/edictrt/edict/workitems"
)

// Example submits two items to a real engine (an in-process nats-server
// with JetStream, the work service behind the engine service), claims them
// highest class first and acknowledges each.
func Example() {
	dir, err := os.MkdirTemp("", "workitems-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(natstest.Options(dir))
	if err != nil {
		log.Fatal(err)
	}
	srv.Start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	if !srv.ReadyForConnections(10 * time.Second) {
		log.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := work.Open(ctx, js, work.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	eng, err := service.Start(ctx, nc, service.Config{Work: w})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	c, err := workitems.New(nc, workitems.Config{})
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range []workitems.Item{
		{ID: "report-1", Type: "document", Payload: json.RawMessage(`{"doc":"a.pdf"}`)},
		{ID: "question-1", Type: "conversation", Payload: json.RawMessage(`{"q":"hi"}`)},
	} {
		if _, err := c.Submit(ctx, it); err != nil {
			log.Fatal(err)
		}
	}
	r, err := c.Submit(ctx, workitems.Item{ID: "report-1", Type: "document"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("re-submit is a duplicate:", r.Duplicate)
	for {
		cl, err := c.Claim(ctx, workitems.ClaimRequest{})
		if err != nil {
			log.Fatal(err)
		}
		if cl == nil {
			fmt.Println("nothing left to claim")
			break
		}
		fmt.Println(cl.ID, cl.Class, "attempt", cl.Attempt, string(cl.Payload))
		if err := cl.Ack(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// re-submit is a duplicate: true
	// question-1 interactive attempt 1 {"q":"hi"}
	// report-1 background_ingestion attempt 1 {"doc":"a.pdf"}
	// nothing left to claim
}
