package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/edictrt/edict/internal/daemon"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startTimeout bounds the daemon's start-up.
const startTimeout = 30 * time.Second

// run starts the daemon on dir and returns its Info and a stop function
// that cancels it and returns Run's error.
func run(t *testing.T, dir string) (daemon.Info, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan daemon.Info, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{
			DataDir: dir, Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Shards: 2,
			Ready: func(i daemon.Info) { ready <- i },
		})
	}()
	select {
	case info := <-ready:
		return info, func() error { cancel(); return <-done }
	case err := <-done:
		cancel()
		t.Fatalf("daemon exited before ready: %v", err)
	case <-time.After(startTimeout):
		cancel()
		t.Fatal("daemon not ready within the start timeout")
	}
	return daemon.Info{}, nil
}

func request(t *testing.T, nc *nats.Conn, subject, body string) (string, string) {
	t.Helper()
	m, err := nc.Request(subject, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	return m.Header.Get("Nats-Service-Error-Code"), string(m.Data)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	info, stop := run(t, dir)
	nc, err := nats.Connect(info.NATSURL) // no credentials: the APP account
	if err != nil {
		t.Fatal(err)
	}
	if code, data := request(t, nc, "edict.eg.g.node_put", `{"id":"a","props":{"x":1}}`); code != "" {
		t.Fatalf("node_put: %s %s", code, data)
	}
	if code, data := request(t, nc, "edict.work.stats", `{}`); code != "" {
		t.Fatalf("work stats: %s %s", code, data)
	}
	if code, body := get(t, info.HTTPURL+"/healthz"); code != 200 {
		t.Fatalf("healthz = %d %s", code, body)
	}
	_, metrics := get(t, info.HTTPURL+"/metrics")
	for _, name := range []string{"edict_engine_requests_total", "edict_engine_request_seconds", "edict_engine_in_flight", "edict_engine_inflight_permits_available"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	nc.Close()
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}

	info, stop = run(t, dir)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	nc, err = nats.Connect(info.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	code, data := request(t, nc, "edict.eg.g.node_get", `{"id":"a"}`)
	var n struct{ ID string }
	if code != "" || json.Unmarshal([]byte(data), &n) != nil || n.ID != "a" {
		t.Fatalf("after restart node_get = %s %s", code, data)
	}
	if info.Shards != 2 || info.Sizes.MaxInFlight < 1 {
		t.Fatalf("info = %+v", info)
	}
}
