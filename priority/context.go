package priority

import "context"

type ctxKey struct{}

// With returns a copy of ctx that carries class c. Scopes nest: ctx itself
// keeps whatever class it had.
func With(ctx context.Context, c Class) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// Lookup returns the class ctx carries and whether one was set.
func Lookup(ctx context.Context) (Class, bool) {
	c, ok := ctx.Value(ctxKey{}).(Class)
	if !ok || !c.Valid() {
		return 0, false
	}
	return c, true
}

// From returns the class ctx carries, or Orchestration when it carries none:
// untagged work is high, only explicitly background work yields. From does
// not allocate.
func From(ctx context.Context) Class {
	if c, ok := Lookup(ctx); ok {
		return c
	}
	return Orchestration
}

// VLLMPriority returns the value for the "priority" field of an
// OpenAI-compatible request body (vLLM with --scheduling-policy priority):
// the rank of ctx's class, lower is sooner; 1 when ctx is untagged.
func VLLMPriority(ctx context.Context) int { return From(ctx).Rank() }
