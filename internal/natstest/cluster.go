package natstest

import (
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RunCluster starts an n-node JetStream cluster on loopback, each node with
// its own temporary store, and waits until JetStream has a meta leader. The
// nodes shut down when the test ends.
func RunCluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	routes := make([]*url.URL, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: cluster port: %v", err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		routes[i] = &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", ports[i])}
	}
	srvs := make([]*server.Server, n)
	for i := range n {
		o := Options(t.TempDir())
		o.ServerName = fmt.Sprintf("n%d", i)
		o.Cluster.Name = "natstest"
		o.Cluster.Host = "127.0.0.1"
		o.Cluster.Port = ports[i]
		o.Routes = routes
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatalf("natstest: new cluster server: %v", err)
		}
		s.Start()
		srvs[i] = s
		t.Cleanup(func() {
			s.Shutdown()
			s.WaitForShutdown()
		})
	}
	for _, s := range srvs {
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("natstest: cluster server not ready within 10s")
		}
	}
	// JetStream answers its API only once the nodes have elected a meta
	// leader; poll its account info until it does.
	nc, err := nats.Connect(srvs[0].ClientURL())
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := js.AccountInfo(t.Context()); err == nil {
			return srvs
		} else if time.Now().After(deadline) {
			t.Fatalf("natstest: cluster JetStream not ready within 20s: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // no event to wait on: the meta leader election
	}
}
