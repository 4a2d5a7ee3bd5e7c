package scheduler

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edictrt/edict/leases"
)

// childLeaseEnv switches the test binary into a child process that holds a
// foreground lease in the named directory until it is killed (see
// TestThrottleSeesOtherProcess).
const childLeaseEnv = "EDICT_SCHEDULER_TEST_LEASE_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childLeaseEnv); dir != "" {
		os.Exit(holdLeaseChild(dir))
	}
	goleak.VerifyTestMain(m)
}

func holdLeaseChild(dir string) int {
	t := NewThrottle(ThrottleConfig{LeaseDir: dir, Lease: crossProcessLease})
	done := t.Foreground(context.Background())
	defer done()
	fmt.Println("holding")
	time.Sleep(time.Hour) // until the parent kills us
	return 0
}

// crossProcessLease is the lease configuration of the cross-process test,
// shared by parent and child.
var crossProcessLease = leases.Config{TTL: time.Second, Refresh: 200 * time.Millisecond}
