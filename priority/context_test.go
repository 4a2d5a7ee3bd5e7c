package priority_test

import (
	"context"
	"testing"

	"github.com/edictrt/edict/priority"
)

func TestContextCarrier(t *testing.T) {
	ctx := context.Background()
	if got := priority.From(ctx); got != priority.Orchestration {
		t.Fatalf("untagged From = %v, want orchestration", got)
	}
	if _, ok := priority.Lookup(ctx); ok {
		t.Fatal("untagged Lookup reported a class")
	}
	if got := priority.VLLMPriority(ctx); got != 1 {
		t.Fatalf("untagged VLLMPriority = %d, want 1", got)
	}
	outer := priority.With(ctx, priority.BackgroundIngestion)
	inner := priority.With(outer, priority.Interactive)
	if got := priority.From(inner); got != priority.Interactive {
		t.Fatalf("inner = %v", got)
	}
	if got := priority.VLLMPriority(inner); got != 0 {
		t.Fatalf("inner VLLMPriority = %d", got)
	}
	if got := priority.From(outer); got != priority.BackgroundIngestion {
		t.Fatalf("outer after nesting = %v, want background_ingestion", got)
	}
	if c, ok := priority.Lookup(outer); !ok || c != priority.BackgroundIngestion {
		t.Fatalf("Lookup(outer) = %v, %v", c, ok)
	}
	if got := priority.VLLMPriority(outer); got != 3 {
		t.Fatalf("outer VLLMPriority = %d", got)
	}
	if got := priority.From(priority.With(ctx, priority.Class(0))); got != priority.Orchestration {
		t.Fatalf("invalid class reads as %v, want orchestration", got)
	}
}

func TestFromDoesNotAllocate(t *testing.T) {
	ctx := priority.With(context.Background(), priority.Interactive)
	untagged := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		_ = priority.From(ctx)
		_ = priority.From(untagged)
		_ = priority.Interactive.String()
	}); n != 0 {
		t.Fatalf("From allocates %v times per call", n)
	}
}

func BenchmarkFrom(b *testing.B) {
	ctx := priority.With(context.Background(), priority.Interactive)
	for b.Loop() {
		_ = priority.From(ctx)
	}
}
