package main

import (
	"context"
	"fmt"
	"io"
)

// runGraph is not built yet: its issue is still open.
func runGraph(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "edict: this command is not built yet")
	return 2
}
