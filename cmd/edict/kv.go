package main

import (
	"context"
	"fmt"
	"io"
)

// runKV is not built yet: its issue is still open.
func runKV(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "edict: this command is not built yet")
	return 2
}
