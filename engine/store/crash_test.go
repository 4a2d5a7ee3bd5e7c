package store_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edictrt/edict/engine/store"
)

const crashChildEnv = "EDICT_STORE_CRASH_CHILD_DIR"

// crashChild is the child process of TestCrashDurability: it writes nodes
// and KV rows from 8 goroutines forever and prints "ack <graph> <id>" for
// every write the store reported durable.
func crashChild() {
	dir := os.Getenv(crashChildEnv)
	s, err := store.Open(dir, store.Config{Shards: 2, InitialMmapSize: 64 << 20})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			g := fmt.Sprintf("g%d", w%3)
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, err := s.NodePut(context.Background(), g, store.Node{ID: id, Labels: []string{"crash"}}); err != nil {
					fmt.Fprintln(os.Stderr, "put:", err)
					os.Exit(1)
				}
				if err := s.KVPut(context.Background(), g, "ns", id, []byte(id)); err != nil {
					fmt.Fprintln(os.Stderr, "kv:", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Fprintf(out, "ack %s %s\n", g, id)
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestCrashDurability kills a writing child with SIGKILL; on reopen every
// write it was told was durable is there and the files pass Check.
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary as a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Reading the child's acks is the event we wait on; the named deadline
	// bounds a child that stops writing.
	const wantAcks = 400
	const deadline = 60 * time.Second
	timer := time.AfterFunc(deadline, func() { cmd.Process.Kill() })
	defer timer.Stop()
	acked := map[string][]string{}
	n := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "ack" {
			t.Fatalf("child said %q", sc.Text())
		}
		acked[f[1]] = append(acked[f[1]], f[2])
		if n++; n == wantAcks {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Acks already in the pipe were durable too.
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 {
			acked[f[1]] = append(acked[f[1]], f[2])
			n++
		}
	}
	cmd.Wait()
	if n < wantAcks {
		t.Fatalf("child acked only %d writes before %v", n, deadline)
	}
	s := open(t, dir, store.Config{})
	if err := s.Check(t.Context()); err != nil {
		t.Fatalf("Check after SIGKILL: %v", err)
	}
	for g, ids := range acked {
		for _, id := range ids {
			if _, err := s.NodeGet(t.Context(), g, id); err != nil {
				t.Errorf("acked node %s/%s: %v", g, id, err)
			}
			if v, err := s.KVGet(t.Context(), g, "ns", id); err != nil || string(v) != id {
				t.Errorf("acked kv %s/%s: %q %v", g, id, v, err)
			}
		}
	}
	t.Logf("%d acked writes survived SIGKILL", n)
}
