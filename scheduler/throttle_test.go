package scheduler

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/edictrt/edict/leases"
)

func leaseFiles(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return len(es)
}

func TestForegroundIsReentrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "runtime", "foreground-leases")
		th := NewThrottle(ThrottleConfig{LeaseDir: dir})
		if th.Active() {
			t.Fatal("active before any foreground")
		}
		done1 := th.Foreground(t.Context())
		done2 := th.Foreground(t.Context())
		if !th.Active() || leaseFiles(t, dir) != 1 {
			t.Fatalf("Active = %v with %d lease files, want true and 1", th.Active(), leaseFiles(t, dir))
		}
		done1()
		done1() // idempotent: must not release the second entry
		if !th.Active() || leaseFiles(t, dir) != 1 {
			t.Fatal("first done released the outer foreground")
		}
		time.Sleep(10 * time.Second) // the lease is refreshed meanwhile
		other := NewThrottle(ThrottleConfig{LeaseDir: dir})
		if !other.Active() {
			t.Fatal("another throttle does not see the refreshed lease")
		}
		done2()
		if th.Active() {
			t.Fatal("active after the last done")
		}
		if n := leaseFiles(t, dir); n != 0 {
			t.Fatalf("%d lease files after the last done", n)
		}
		time.Sleep(leases.DefaultCacheInterval)
		if other.Active() {
			t.Fatal("the other throttle still sees a removed lease")
		}
	})
}

func TestForegroundWithUnsafeLeaseDir(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := t.TempDir()
		target := filepath.Join(base, "target")
		if err := os.Mkdir(target, 0o700); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(base, "link")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		th := NewThrottle(ThrottleConfig{LeaseDir: link})
		done := th.Foreground(t.Context())
		if !th.Active() {
			t.Error("local foreground lost with an unsafe lease dir")
		}
		if n := leaseFiles(t, target); n != 0 {
			t.Errorf("lease written through a symlinked dir: %d files", n)
		}
		done()
		if th.Active() {
			t.Error("active after done")
		}
	})
}

func TestCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := NewThrottle(ThrottleConfig{MaxWait: 2 * time.Second})
		start := time.Now()
		if err := th.Checkpoint(t.Context()); err != nil || time.Since(start) != 0 {
			t.Fatalf("Checkpoint while clear = %v after %v", err, time.Since(start))
		}

		// Foreground that never ends: background proceeds after MaxWait.
		done := th.Foreground(t.Context())
		start = time.Now()
		if err := th.Checkpoint(t.Context()); err != nil || time.Since(start) != 2*time.Second {
			t.Fatalf("Checkpoint = %v after %v, want nil after MaxWait 2s", err, time.Since(start))
		}

		// Foreground that ends at 1.2 s: Checkpoint returns then.
		go func() { time.Sleep(1200 * time.Millisecond); done() }()
		start = time.Now()
		if err := th.Checkpoint(t.Context()); err != nil || time.Since(start) != 1200*time.Millisecond {
			t.Fatalf("Checkpoint = %v after %v, want nil at 1.2s", err, time.Since(start))
		}

		// Cancellation while waiting.
		defer th.Foreground(t.Context())()
		ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
		defer cancel()
		if err := th.Checkpoint(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Checkpoint = %v, want ctx.Err()", err)
		}
	})
}

func TestCheckpointNoWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := NewThrottle(ThrottleConfig{MaxWait: -1})
		defer th.Foreground(t.Context())()
		start := time.Now()
		if err := th.Checkpoint(t.Context()); err != nil || time.Since(start) != 0 {
			t.Fatalf("Checkpoint = %v after %v, want nil at once", err, time.Since(start))
		}
	})
}

func TestCheckpointDefaultMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := NewThrottle(ThrottleConfig{})
		defer th.Foreground(t.Context())()
		start := time.Now()
		if err := th.Checkpoint(t.Context()); err != nil || time.Since(start) != DefaultMaxWait {
			t.Fatalf("Checkpoint = %v after %v, want nil after 120s", err, time.Since(start))
		}
	})
}

func TestSlotBoundsBackgroundConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := NewThrottle(ThrottleConfig{})
		r1, err1 := th.Slot(t.Context())
		r2, err2 := th.Slot(t.Context())
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		start := time.Now()
		if _, err := th.Slot(t.Context()); !errors.Is(err, ErrSlotTimeout) || time.Since(start) != DefaultAcquireTimeout {
			t.Fatalf("third Slot = %v after %v, want ErrSlotTimeout after 30s", err, time.Since(start))
		}
		r1()
		r1() // idempotent: frees one slot, not two
		r3, err := th.Slot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := th.Slot(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Slot with all slots taken = %v, want ctx.Err()", err)
		}
		r2()
		r3()
	})
}

func TestSlotRechecksForegroundAfterTakingIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := NewThrottle(ThrottleConfig{Slots: 1})
		hold, err := th.Slot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			r, err := th.Slot(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			got <- time.Now()
			r()
		}()
		synctest.Wait() // the waiter is waiting for the slot
		// Foreground starts while the waiter waits, then the slot frees up.
		done := th.Foreground(t.Context())
		hold()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Slot returned while foreground is active")
		default:
		}
		start := time.Now()
		time.Sleep(3 * time.Second)
		done()
		if at := <-got; at.Sub(start) != 3*time.Second {
			t.Fatalf("Slot returned %v after the foreground began, want when it ended (3s)", at.Sub(start))
		}
	})
}

func TestSlotWaitsForForegroundBoundedByCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := NewThrottle(ThrottleConfig{})
		defer th.Foreground(t.Context())()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := th.Slot(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Slot during foreground = %v, want ctx.Err()", err)
		}
	})
}

// TestThrottleSeesOtherProcess runs the test binary again as a child that
// holds a foreground lease, checks that this process's throttle sees it,
// kills the child with SIGKILL and checks that the throttle stops yielding
// within TTL + cache interval. Real processes have no fake clock and no
// event to wait on, so the test polls Active at a fixed interval up to a
// named deadline.
func TestThrottleSeesOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-process test: runs a child process and real time")
	}
	dir := filepath.Join(t.TempDir(), "runtime", "foreground-leases")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childLeaseEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	// The child prints "holding" after its lease is written.
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() && sc.Text() == "holding" {
			ready <- nil
			return
		}
		ready <- errors.New("child exited before holding its lease")
	}()
	const startDeadline = 30 * time.Second // a cold start of the test binary
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(startDeadline):
		t.Fatalf("child did not hold its lease within %v", startDeadline)
	}

	th := NewThrottle(ThrottleConfig{LeaseDir: dir, Lease: crossProcessLease})
	if !th.Active() {
		t.Fatal("throttle does not see the child's lease")
	}
	// Past the TTL the child's refresher keeps the lease live.
	time.Sleep(crossProcessLease.TTL + 2*leases.DefaultCacheInterval)
	if !th.Active() {
		t.Fatal("child's refreshed lease not seen after one TTL")
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	killedAt := time.Now()

	// Deadline: the lease's TTL plus the scan cache interval, plus a 1 s
	// margin for scheduling on a loaded CI machine.
	const (
		margin = time.Second
		poll   = 50 * time.Millisecond
	)
	deadline := killedAt.Add(crossProcessLease.TTL + leases.DefaultCacheInterval + margin)
	for th.Active() {
		if time.Now().After(deadline) {
			t.Fatalf("throttle still yields %v after SIGKILL (TTL %v + cache %v + margin %v)",
				time.Since(killedAt), crossProcessLease.TTL, leases.DefaultCacheInterval, margin)
		}
		time.Sleep(poll)
	}
	t.Logf("stopped yielding %v after SIGKILL", time.Since(killedAt).Round(time.Millisecond))
}
