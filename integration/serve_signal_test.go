package integration

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"
)

// secondSignalExit bounds how long edict serve may take to exit after a
// second SIGTERM while its drain is waiting on a 30 s request: "at once".
const secondSignalExit = 5 * time.Second

// inFlightPoll is the fixed interval at which the test polls $SRV.STATS
// for the long request to be in flight, up to serveStartTimeout.
const inFlightPoll = 20 * time.Millisecond

// TestServeSecondSignalExitsAtOnce holds a request in flight (a work claim
// that long-polls an empty queue for 30 s), sends SIGTERM — the daemon logs
// that it is draining one request — and then a second SIGTERM, after which
// the process must be gone within secondSignalExit, killed by the signal
// rather than exiting cleanly.
func TestServeSecondSignalExitsAtOnce(t *testing.T) {
	p := startServe(t, t.TempDir(), "--http", "off")
	nc, err := nats.Connect(p.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	claim := make(chan error, 1)
	go func() {
		msg := nats.NewMsg("edict.work.claim")
		msg.Data = []byte(`{"worker":"w1","wait_ms":30000}`)
		msg.Header.Set("X-Resource-Priority", "interactive")
		_, err := nc.RequestMsg(msg, 60*time.Second)
		claim <- err
	}()

	// Cross-process: poll $SRV.STATS at a fixed interval until the claim is
	// in flight.
	deadline := time.Now().Add(serveStartTimeout)
	for !claimInFlight(t, nc) {
		if time.Now().After(deadline) {
			t.Fatalf("the claim never showed in flight within %v\n%s", serveStartTimeout, p.logs())
		}
		time.Sleep(inFlightPoll)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Cross-process: poll the log at a fixed interval for the drain line.
	deadline = time.Now().Add(serveStopTimeout)
	for !strings.Contains(p.logs(), "draining in-flight ones") {
		if time.Now().After(deadline) {
			t.Fatalf("no drain log line within %v of SIGTERM\n%s", serveStopTimeout, p.logs())
		}
		time.Sleep(inFlightPoll)
	}
	if !strings.Contains(p.logs(), "in_flight=1") {
		t.Errorf("drain line does not count the claim in flight:\n%s", p.logs())
	}
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("after the second SIGTERM: wait = %v, want killed by the signal", err)
		}
		ws, ok := ee.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("after the second SIGTERM: %v, want killed by SIGTERM", err)
		}
		t.Logf("exited %v after the second signal", time.Since(sent).Round(time.Millisecond))
	case <-time.After(secondSignalExit):
		t.Fatalf("edict serve still running %v after a second SIGTERM\n%s", secondSignalExit, p.logs())
	}
	if strings.Contains(p.logs(), "stopped cleanly") {
		t.Errorf("a killed daemon logged a clean stop:\n%s", p.logs())
	}
	nc.Close() // the claim's request now fails at once
	if err := <-claim; err == nil {
		t.Error("the claim got an answer from a killed daemon")
	}
}

// claimInFlight reports whether $SRV.STATS shows work_claim in flight.
func claimInFlight(t *testing.T, nc *nats.Conn) bool {
	t.Helper()
	m, err := nc.Request("$SRV.STATS.edict-engine", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Endpoints []struct {
			Name string `json:"name"`
			Data struct {
				InFlight map[string]int64 `json:"in_flight"`
			} `json:"data"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(m.Data, &st); err != nil {
		t.Fatal(err)
	}
	for _, ep := range st.Endpoints {
		if ep.Name == "work_claim" && ep.Data.InFlight["interactive"] > 0 {
			return true
		}
	}
	return false
}

// openPTY opens a pseudo-terminal pair: the master, which reads what is
// written to the terminal, and the terminal itself. It fails where the
// system has no pseudo-terminals.
func openPTY(t *testing.T) (master, tty *os.File, err error) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*os.File, *os.File, error) { m.Close(); return nil, nil, err }
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return fail(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		return fail(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return fail(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s, nil
}
