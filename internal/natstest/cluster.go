package natstest

import (
	"context"
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
// its own temporary store, and waits until JetStream can place an n-replica
// stream. The nodes shut down when the test ends. The route ports are free
// ports found just before the start (another process could take one in
// between; the start then fails).
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
	// JetStream answers only once the nodes have elected a meta leader, and
	// places an n-replica stream only once the leader knows every peer:
	// poll by creating (and removing) one until it works.
	nc, err := nats.Connect(srvs[0].ClientURL())
	if err != nil {
		t.Fatalf("natstest: connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond) // one try
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "NATSTEST_READY", Subjects: []string{"natstest.ready"}, Replicas: n, Storage: jetstream.MemoryStorage})
		if err == nil {
			err = js.DeleteStream(ctx, "NATSTEST_READY")
		}
		cancel()
		if err == nil {
			return srvs
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: cluster JetStream not ready within 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // no event to wait on: the meta leader election
	}
}
