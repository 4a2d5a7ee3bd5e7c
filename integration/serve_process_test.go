package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveStartTimeout bounds how long edict serve may take to log that it is
// ready; serveStopTimeout how long it may take to exit after SIGTERM (its
// drain is bounded by 30 s, but nothing is in flight here).
const (
	serveStartTimeout = 60 * time.Second
	serveStopTimeout  = 30 * time.Second
)

var readyRE = regexp.MustCompile(`msg="edict serve: ready" nats=(\S+) http=(\S*)`)

// serveProcess is a running "edict serve".
type serveProcess struct {
	cmd     *exec.Cmd
	natsURL string
	httpURL string
	mu      sync.Mutex
	log     bytes.Buffer
	done    chan error
}

func (p *serveProcess) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// startServe runs edict serve on dataDir with random ports and waits for
// its ready line.
func startServe(t *testing.T, dataDir string, extra ...string) *serveProcess {
	t.Helper()
	args := append([]string{"--data", dataDir, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, extra...)
	return startServeEnv(t, nil, args...)
}

// startServeEnv runs edict serve with args and extra environment env and
// waits for its ready line.
func startServeEnv(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	p := &serveProcess{cmd: exec.Command(edictBin, append([]string{"serve"}, args...)...), done: make(chan error, 1)}
	p.cmd.Env = append(p.cmd.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := readyRE.FindStringSubmatch(line); m != nil {
				ready <- [2]string{m[1], m[2]}
			}
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case u := <-ready:
		p.natsURL, p.httpURL = u[0], u[1]
		if p.httpURL == "off" {
			p.httpURL = ""
		}
	case err := <-p.done:
		p.done <- err
		t.Fatalf("edict serve exited before ready: %v\n%s", err, p.logs())
	case <-time.After(serveStartTimeout):
		t.Fatalf("edict serve not ready within %v\n%s", serveStartTimeout, p.logs())
	}
	return p
}

// stop sends SIGTERM and returns the exit code.
func (p *serveProcess) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(serveStopTimeout):
		t.Fatalf("edict serve did not exit within %v of SIGTERM\n%s", serveStopTimeout, p.logs())
	}
	return -1
}

// edict runs an edict client subcommand against url and returns its output.
func edict(t *testing.T, url string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, edictBin, args...)
	cmd.Env = append(cmd.Environ(), "EDICT_NATS_URL="+url)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("edict %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}
