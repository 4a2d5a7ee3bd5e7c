//go:build unix

package enginebench

import (
	"syscall"
	"time"
)

// cpuMeter starts measuring the process's CPU time (user and system); the
// returned function reports the cores used on average since.
func cpuMeter() func() float64 {
	sample := func() time.Duration {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
			return 0
		}
		return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	}
	c0, t0 := sample(), time.Now()
	return func() float64 {
		c1, wall := sample(), time.Since(t0)
		if c0 == 0 || wall <= 0 {
			return 0
		}
		return float64(c1-c0) / float64(wall)
	}
}
