package daemon_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/internal/daemon"
)

func ExampleRun() {
	dir, _ := os.MkdirTemp("", "edict-daemon-example-")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{
			DataDir: dir, Listen: "127.0.0.1:0", HTTP: "off", Shards: 1,
			Ready: func(info daemon.Info) {
				nc, err := nats.Connect(info.NATSURL) // an application: no credentials
				if err != nil {
					fmt.Println(err)
					cancel()
					return
				}
				m, err := nc.Request("edict.eg.__commons__.node_put", []byte(`{"id":"a"}`), 5*time.Second)
				if err == nil {
					fmt.Println(string(m.Data))
				}
				nc.Close()
				cancel() // what SIGTERM does in edict serve
			},
		})
	}()
	fmt.Println("clean shutdown:", <-done == nil)
	// Output:
	// {"version":1}
	// clean shutdown: true
}
