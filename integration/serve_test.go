package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
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
	// On a terminal kv get ends the value with a newline (the pty turns it
	// into CR LF); piped, above, it prints the raw bytes.
	if got, err := kvGetOnTerminal(t, p.natsURL, "prefs", "theme"); err != nil {
		t.Logf("kv get on a terminal not checked: %v", err)
	} else if got != "dark\r\n" {
		t.Errorf("kv get on a terminal printed %q, want %q", got, "dark\r\n")
	}
	if _, errs, code := edict(t, p.natsURL, "kv", "get", "prefs", "nokey"); code != 1 || !strings.Contains(errs, "404") || !strings.Contains(errs, `"nokey"`) {
		t.Errorf("kv get of an absent key: exit %d, stderr %q; want 1 and the 404 text", code, errs)
	}
	if _, errs, code := edict(t, p.natsURL, "graph", "neighbors", "alice", "--dir", "sideways"); code != 1 || !strings.Contains(errs, "400") || !strings.Contains(errs, "sideways") {
		t.Errorf("graph neighbors --dir sideways: exit %d, stderr %q; want 1 and the 400 text", code, errs)
	}
	if _, errs, code := edict(t, p.natsURL, "graph", "get", "--graph", "bad.name", "alice"); code != 2 || !strings.Contains(errs, "bad --graph") {
		t.Errorf("graph get --graph bad.name: exit %d, stderr %q; want 2 and a bad --graph message", code, errs)
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
	// A person watching the log sees a clean stop, step by step.
	logs := p.logs()
	for _, line := range []string{"draining in-flight ones", "in-flight requests drained", "nats connection flushed and closed",
		"embedded nats server stopped", "store writers flushed, shard files closed (K=2)", "stopped cleanly"} {
		if !strings.Contains(logs, line) {
			t.Errorf("the shutdown log lacks %q:\n%s", line, logs)
		}
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

// kvGetOnTerminal runs "edict kv get ns key" with its standard output on a
// pseudo-terminal and returns what the terminal received, or the error of
// a system without pseudo-terminals.
func kvGetOnTerminal(t *testing.T, url, ns, key string) (string, error) {
	t.Helper()
	master, tty, err := openPTY(t)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, edictBin, "kv", "get", ns, key)
	cmd.Env = append(cmd.Environ(), "EDICT_NATS_URL="+url)
	cmd.Stdout = tty
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kv get on a terminal: %v %s", err, errb.String())
	}
	tty.Close()
	_ = master.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	buf := make([]byte, 256)
	for {
		n, err := master.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil { // EIO once the terminal side is closed and drained
			break
		}
	}
	return string(got), nil
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
	// Asked for, help goes to standard output with exit 0.
	for _, sub := range [][]string{{"graph", "--help"}, {"graph", "get", "-h"}, {"kv", "--help"}, {"kv", "get", "--help"},
		{"status", "--help"}, {"bench", "--help"}, {"serve", "--help"}} {
		if out, _, code := edict(t, "", sub...); code != 0 || !strings.HasPrefix(out, "usage: edict "+sub[0]) {
			t.Errorf("edict %v: exit %d, stdout %.80q; want 0 and the usage", sub, code, out)
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
