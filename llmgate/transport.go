package llmgate

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edictrt/edict/priority"
)

// DefaultModelCapacity is the capacity of a model's gate when
// [Transport.Capacities] has no entry for it.
const DefaultModelCapacity = 32

// DefaultMaxBodyBytes is the largest request body the Transport reads when
// [Transport.MaxBodyBytes] is zero.
const DefaultMaxBodyBytes = 32 << 20

// DefaultMaxModels is the number of distinct models a Transport gates when
// [Transport.MaxModels] is zero.
const DefaultMaxModels = 1024

// gatedPaths are the OpenAI-compatible endpoints the Transport gates, matched
// at the end of the URL path (so a server mounted under a prefix is gated).
var gatedPaths = [...]string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings"}

// Transport is an [http.RoundTripper] for OpenAI-compatible servers (vLLM,
// SGLang, llama.cpp) that admits every model call through its model's
// [Gate]. For a POST to /v1/chat/completions, /v1/completions or
// /v1/embeddings it reads "model" from the JSON body, takes a slot of that
// model's gate with the class of the request's context (blocking until
// admitted or the context is done, when RoundTrip returns the context's
// error), and holds the slot until the response body has been read to its
// end or closed — a streaming response holds it for the whole stream. A
// body without a model uses [DefaultModel]. Every other request passes
// through untouched.
//
// Set its fields before first use; a Transport is then safe for concurrent
// use and must not be copied.
type Transport struct {
	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper

	// Registry holds the gates. Nil means a registry of the Transport's own
	// with the zero Config. Share one with [Map] callers to make them
	// contend with the Transport's calls; give a model the same capacity
	// everywhere, as a new capacity resizes its gate.
	Registry *Registry

	// Capacities gives a model's gate capacity (floored at 1), by model
	// name; names are matched trimmed and in any letter case. A model not
	// listed gets DefaultCapacity.
	Capacities map[string]int

	// DefaultCapacity is the capacity of a model not in Capacities. Zero or
	// negative means DefaultModelCapacity.
	DefaultCapacity int

	// SendPriority, when set, puts "priority": <rank of the request
	// context's class> into the JSON body (replacing any value there; the
	// other members keep their bytes and order). vLLM started with
	// --scheduling-policy priority serves lower ranks sooner. The gate is
	// enforced either way.
	SendPriority bool

	// MaxBodyBytes bounds the body of a gated request; a larger one fails
	// with [ErrBodyTooLarge]. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// MaxModels bounds the distinct models the Transport gates, the
	// models in Capacities included; a request for one more fails with
	// [ErrTooManyModels]. Zero means DefaultMaxModels.
	MaxModels int

	once   sync.Once
	reg    *Registry
	caps   map[string]int
	mu     sync.Mutex
	models map[string]struct{} // the model keys seen, Capacities' included
}

// RoundTrip implements [http.RoundTripper].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Method != http.MethodPost || !gatedPath(req.URL.Path) {
		return base.RoundTrip(req)
	}
	b, err := t.readBody(req)
	if err != nil {
		return nil, err
	}
	info, isObject := scanBody(b)
	g, err := t.gate(info.model)
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	if err := g.Acquire(ctx); err != nil {
		return nil, err
	}
	if t.SendPriority && isObject {
		b = withPriority(b, info, priority.VLLMPriority(ctx))
	}
	out := req.Clone(ctx)
	out.Body = io.NopCloser(bytes.NewReader(b))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	out.ContentLength = int64(len(b))
	resp, err := base.RoundTrip(out)
	if err != nil {
		g.Release()
		return nil, err
	}
	if resp.Body == nil {
		g.Release()
		return resp, nil
	}
	resp.Body = &heldBody{rc: resp.Body, g: g}
	return resp, nil
}

func gatedPath(p string) bool {
	p = strings.TrimRight(p, "/")
	for _, s := range gatedPaths {
		if strings.HasSuffix(p, s) {
			return true
		}
	}
	return false
}

// readBody reads and closes the request body, bounded by MaxBodyBytes.
func (t *Transport) readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil {
		return nil, nil
	}
	defer req.Body.Close()
	limit := t.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("llmgate: read request body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
	}
	return b, nil
}

// gate returns the gate of model at its configured capacity, or
// ErrTooManyModels for a new model past MaxModels.
func (t *Transport) gate(model string) (*Gate, error) {
	t.once.Do(func() {
		t.reg = t.Registry
		if t.reg == nil {
			t.reg = NewRegistry(Config{})
		}
		t.caps = make(map[string]int, len(t.Capacities))
		t.models = make(map[string]struct{}, len(t.Capacities))
		for m, c := range t.Capacities {
			t.caps[modelKey(m)] = max(1, c)
			t.models[modelKey(m)] = struct{}{}
		}
	})
	key := modelKey(model)
	c, ok := t.caps[key]
	if !ok {
		c = t.DefaultCapacity
		if c <= 0 {
			c = DefaultModelCapacity
		}
		limit := t.MaxModels
		if limit <= 0 {
			limit = DefaultMaxModels
		}
		t.mu.Lock()
		_, seen := t.models[key]
		if !seen && len(t.models) >= limit {
			t.mu.Unlock()
			return nil, fmt.Errorf("%w: %q would be model %d of at most %d", ErrTooManyModels, truncateModel(key), len(t.models)+1, limit)
		}
		t.models[key] = struct{}{}
		t.mu.Unlock()
	}
	return t.reg.Gate(key, c), nil
}

// truncateModel shortens a model name for an error text.
func truncateModel(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// heldBody is a response body that releases its gate slot at its end or
// when closed, whichever comes first, once.
type heldBody struct {
	rc   io.ReadCloser
	g    *Gate
	done atomic.Bool
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.release()
	}
	return n, err
}

func (b *heldBody) Close() error {
	err := b.rc.Close()
	b.release()
	return err
}

func (b *heldBody) release() {
	if b.done.CompareAndSwap(false, true) {
		b.g.Release()
	}
}
