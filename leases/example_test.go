package leases_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/edictrt/edict/leases"
)

func ExampleHold() {
	base, err := os.MkdirTemp("", "leases-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "runtime", "foreground-leases")

	// A background process on the same host watches the directory.
	watcher := leases.NewScanner(dir, leases.Config{})
	fmt.Println("before:", watcher.Active())

	// The foreground process publishes its lease while it works.
	l, err := leases.Hold(context.Background(), dir, leases.Config{})
	if err != nil {
		panic(err)
	}
	watcher.Reset()
	fmt.Println("holding:", watcher.Active())

	if err := l.Close(); err != nil {
		panic(err)
	}
	watcher.Reset()
	fmt.Println("after:", watcher.Active())
	// Output:
	// before: false
	// holding: true
	// after: false
}
