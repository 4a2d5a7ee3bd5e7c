package llmgate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/edictrt/edict/llmgate"
	"github.com/edictrt/edict/priority"
)

func ExampleGate() {
	g, err := llmgate.New(llmgate.Config{Capacity: 4, Reserve: 1, Model: "qwen"})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	background := priority.With(ctx, priority.BackgroundIngestion)
	interactive := priority.With(ctx, priority.Interactive)

	n := 0
	for g.TryAcquire(background) { // background fills capacity-reserve
		n++
	}
	fmt.Println("background in flight:", n)

	// The reserved slot is free: an interactive call lands at once.
	if err := g.Acquire(interactive); err != nil {
		panic(err)
	}
	fmt.Println("interactive admitted, in flight:", g.Stats().InFlight)
	g.Release()
	for range n {
		g.Release()
	}
	// Output:
	// background in flight: 3
	// interactive admitted, in flight: 4
}

func ExampleMap() {
	g, _ := llmgate.New(llmgate.Config{Capacity: 8})
	ctx := priority.With(context.Background(), priority.Orchestration)
	lengths, err := llmgate.Map(ctx, g, []string{"a", "bb", "ccc"}, func(ctx context.Context, s string) (int, error) {
		return len(s), nil // a model call, holding one slot of g
	})
	fmt.Println(lengths, err)
	// Output: [1 2 3] <nil>
}

func ExampleTransport() {
	// An OpenAI-compatible server that echoes the priority it was sent.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprint(w, string(b))
	}))
	defer srv.Close()

	reg := llmgate.NewRegistry(llmgate.Config{})
	client := &http.Client{Transport: &llmgate.Transport{
		Registry:     reg,
		Capacities:   map[string]int{"qwen": 8},
		SendPriority: true,
	}}
	ctx := priority.With(context.Background(), priority.Interactive)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"qwen","messages":[]}`))
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body) // the gate slot is released at the body's end
	resp.Body.Close()
	fmt.Println(string(body))
	fmt.Println("in flight after the body:", reg.Gate("qwen", 8).Stats().InFlight)
	// Output:
	// {"priority":0,"model":"qwen","messages":[]}
	// in flight after the body: 0
}
