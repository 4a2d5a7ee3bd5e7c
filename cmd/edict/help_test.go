package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHelp checks that every subcommand's --help goes to standard output
// with exit status 0, documents its flags, and points at documents users
// have (the README), not the internal DESIGN.md.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		cmd   string
		flags []string
	}{
		{"serve", []string{"-data", "-listen", "-http", "-shards", "-nats-url", "-nats-creds", "-ceiling", "-trust-request-info", "-trace", "-otlp-endpoint", "README"}},
		{"migrate-shards", []string{"-data", "-shards", "-dest"}},
		{"graph", []string{"-graph", "-nats-url", "-class"}},
		{"kv", []string{"-graph", "-nats-url"}},
		{"status", []string{"-nats-url"}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run([]string{tc.cmd, "--help"}, &out, &errb); code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errb.String())
			}
			if errb.Len() != 0 {
				t.Errorf("help written to stderr: %q", errb.String())
			}
			text := out.String()
			for _, f := range tc.flags {
				if !strings.Contains(text, f) {
					t.Errorf("help lacks %q:\n%s", f, text)
				}
			}
			if strings.Contains(text, "DESIGN.md") {
				t.Errorf("help refers to DESIGN.md, which users do not have:\n%s", text)
			}
		})
	}
}
