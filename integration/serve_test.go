package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestServeProcess(t *testing.T) {
	dataDir := t.TempDir()
	p := startServe(t, dataDir, "--shards", "2")
	if !strings.HasPrefix(p.natsURL, "nats://127.0.0.1:") {
		t.Fatalf("nats url %q", p.natsURL)
	}

	// A client over TCP, no credentials (the APP account).
	nc, err := nats.Connect(p.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("edict.eg.__commons__.node_put")
	msg.Data = []byte(`{"id":"alice","labels":["Person"],"props":{"age":30}}`)
	msg.Header.Set("X-Resource-Priority", "interactive")
	m, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Header.Get("Nats-Service-Error-Code"); c != "" {
		t.Fatalf("node_put: %s %s", c, m.Header.Get("Nats-Service-Error"))
	}
	if _, err := nc.Request("edict.eg.__commons__.nope", nil, 5*time.Second); err != nats.ErrNoResponders {
		t.Fatalf("unknown op: err = %v, want no responders", err)
	}
	nc.Close()

	// The client subcommands.
	if out, errs, code := edict(t, p.natsURL, "graph", "put", "bob", "--label", "Person", "--props", `{"age":41}`); code != 0 {
		t.Fatalf("graph put: %d %s %s", code, out, errs)
	}
	out, errs, code := edict(t, p.natsURL, "graph", "get", "alice")
	var n struct {
		ID    string
		Props map[string]int
	}
	if code != 0 || json.Unmarshal([]byte(out), &n) != nil || n.ID != "alice" || n.Props["age"] != 30 {
		t.Fatalf("graph get: %d %q %s", code, out, errs)
	}
	if _, _, code := edict(t, p.natsURL, "graph", "get", "nobody"); code != 1 {
		t.Fatalf("graph get of an absent node exit = %d, want 1", code)
	}
	if _, errs, code := edict(t, p.natsURL, "kv", "put", "prefs", "theme", "dark"); code != 0 {
		t.Fatalf("kv put: %d %s", code, errs)
	}
	if out, errs, code := edict(t, p.natsURL, "kv", "get", "prefs", "theme"); code != 0 || out != "dark" {
		t.Fatalf("kv get: %d %q %s", code, out, errs)
	}
	if out, errs, code := edict(t, p.natsURL, "status"); code != 0 || !strings.Contains(out, "edict-engine") || !strings.Contains(out, "eg_node_put") {
		t.Fatalf("status: %d %q %s", code, out, errs)
	}

	resp, err := http.Get(p.httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `edict_engine_requests_total{`) {
		t.Fatalf("/metrics lacks edict_engine_requests_total:\n%.2000s", body)
	}

	if code := p.stop(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0\n%s", code, p.logs())
	}

	// Restart on the same data.
	p = startServe(t, dataDir)
	out, errs, code = edict(t, p.natsURL, "graph", "get", "bob")
	if code != 0 || !strings.Contains(out, `"bob"`) {
		t.Fatalf("graph get after restart: %d %q %s", code, out, errs)
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("second exit code = %d, want 0\n%s", code, p.logs())
	}
}

func TestServeHelpExplainsEveryFlag(t *testing.T) {
	out, errs, code := edict(t, "", "serve", "--help")
	if code != 0 {
		t.Fatalf("serve --help exit %d", code)
	}
	help := out + errs
	for _, f := range []string{"-data", "-listen", "-http", "-shards", "-nats-url", "-nats-creds", "-ceiling", "-trust-request-info", "-trace", "-otlp-endpoint",
		"EDICT_DATA_DIR", "EDICT_LISTEN", "EDICT_HTTP", "EDICT_SHARDS", "EDICT_NATS_URL", "EDICT_NATS_CREDS", "EDICT_CEILINGS", "EDICT_TRUST_REQUEST_INFO", "EDICT_TRACE", "EDICT_OTLP_ENDPOINT"} {
		if !strings.Contains(help, f) {
			t.Errorf("serve --help does not mention %s", f)
		}
	}
	for _, sub := range [][]string{{"graph", "--help"}, {"kv", "--help"}, {"status", "--help"}, {"bench", "--help"}} {
		if _, _, code := edict(t, "", sub...); code != 0 {
			t.Errorf("edict %v exit %d", sub, code)
		}
	}
}

func TestServeFlagWinsOverEnv(t *testing.T) {
	envDir, flagDir := t.TempDir(), t.TempDir()
	p := startServeEnv(t, []string{"EDICT_DATA_DIR=" + envDir, "EDICT_HTTP=off", "EDICT_LISTEN=127.0.0.1:0"}, "--data", flagDir)
	if p.httpURL != "" {
		t.Errorf("EDICT_HTTP=off ignored: http %q", p.httpURL)
	}
	if _, err := os.Stat(filepath.Join(flagDir, "engine")); err != nil {
		t.Errorf("--data not used: %v", err)
	}
	if _, err := os.Stat(filepath.Join(envDir, "engine")); err == nil {
		t.Error("EDICT_DATA_DIR won over --data")
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.logs())
	}
}
