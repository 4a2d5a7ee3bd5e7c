package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// edictBin is the edict binary built once by TestMain.
var edictBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "edict-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	edictBin = filepath.Join(dir, "edict")
	build := exec.Command("go", "build", "-o", edictBin, "github.com/edictrt/edict/cmd/edict")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: go build edict:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}
