package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/edictrt/edict/engine/store"
)

func Example() {
	dir, _ := os.MkdirTemp("", "edict-store-example")
	defer os.RemoveAll(dir)
	s, err := store.Open(dir, store.Config{Shards: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	ctx := context.Background()
	s.NodePut(ctx, "__commons__", store.Node{ID: "alice", Labels: []string{"person"}, Props: json.RawMessage(`{"age":30}`)})
	s.NodePut(ctx, "__commons__", store.Node{ID: "bob", Labels: []string{"person"}})
	s.EdgePut(ctx, "__commons__", store.Edge{From: "alice", Type: "knows", To: "bob"})
	n, _ := s.NodeGet(ctx, "__commons__", "alice")
	out, _ := json.Marshal(n)
	fmt.Println(string(out))
	ids, _ := s.Traverse(ctx, "__commons__", "alice", 1, nil, 0)
	fmt.Println(ids)
	// Output:
	// {"id":"alice","labels":["person"],"props":{"age":30},"version":1}
	// [alice bob]
}
