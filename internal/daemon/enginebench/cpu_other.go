//go:build !unix

package enginebench

// cpuMeter reports 0 (not measured) where getrusage is missing.
func cpuMeter() func() float64 { return func() float64 { return 0 } }
