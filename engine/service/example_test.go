package service_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/engine/store"
	"github.com/edictrt/edict/internal/daemon/embedded"
)

func ExampleStart() {
	dir, _ := os.MkdirTemp("", "edict-example-")
	defer os.RemoveAll(dir)
	opts, creds, _ := embedded.Options(embedded.Config{Port: server.RANDOM_PORT})
	ns, _ := server.NewServer(opts)
	ns.Start()
	defer ns.Shutdown()
	ns.ReadyForConnections(10 * time.Second)

	engine, _ := nats.Connect(ns.ClientURL(), nats.UserInfo(creds.User, creds.Password))
	defer engine.Close()
	st, _ := store.Open(dir, store.Config{Shards: 1})
	defer st.Close()
	svc, err := service.Start(context.Background(), engine, service.Config{Store: st, TrustRequestInfo: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer svc.Close()

	app, _ := nats.Connect(ns.ClientURL()) // an application, no credentials
	defer app.Close()
	put, _ := app.Request("edict.eg.__commons__.node_put", []byte(`{"id":"alice","labels":["Person"],"props":{"age":30}}`), 5*time.Second)
	fmt.Println(string(put.Data))
	get, _ := app.Request("edict.eg.__commons__.node_get", []byte(`{"id":"alice"}`), 5*time.Second)
	fmt.Println(string(get.Data))
	bad, _ := app.Request("edict.eg.__commons__.node_get", []byte(`{"id":"alice","colour":"red"}`), 5*time.Second)
	fmt.Println(bad.Header.Get("Nats-Service-Error-Code"))
	// Output:
	// {"version":1}
	// {"id":"alice","labels":["Person"],"props":{"age":30},"version":1}
	// 400
}
