package llmgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/edictrt/edict/priority"
)

// httpDeadline bounds each test against the local httptest server; nothing
// here waits on time, so it only turns a hang into a failure.
const httpDeadline = 20 * time.Second

// llmServer is an OpenAI-compatible test server. Each gated request's JSON
// body is sent on bodies; a streaming response sends one chunk, then waits
// for a value on proceed before the rest.
type llmServer struct {
	*httptest.Server
	bodies  chan map[string]any
	proceed chan struct{}
}

func newLLMServer(t *testing.T) *llmServer {
	s := &llmServer{bodies: make(chan map[string]any, 16), proceed: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body := s.record(w, r)
		if body == nil {
			return
		}
		model, _ := body["model"].(string)
		if stream, _ := body["stream"].(bool); !stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,`+
				`"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`, model)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(content string) {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,"+
				"\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", model, content)
			w.(http.Flusher).Flush()
		}
		chunk("hel")
		select {
		case <-s.proceed:
		case <-r.Context().Done():
			return
		}
		chunk("lo")
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	mux.HandleFunc("POST /v1/embeddings", func(w http.ResponseWriter, r *http.Request) {
		body := s.record(w, r)
		if body == nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],`+
			`"model":%q,"usage":{"prompt_tokens":1,"total_tokens":1}}`, body["model"])
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[]}`)
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *llmServer) record(w http.ResponseWriter, r *http.Request) map[string]any {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	s.bodies <- body
	return body
}

func (s *llmServer) client(tr *Transport) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(s.URL+"/v1/"),
		option.WithAPIKey("test"),
		option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: tr}),
	)
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}
}

func TestTransportOpenAINonStreaming(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), httpDeadline)
	defer cancel()
	srv := newLLMServer(t)
	reg := NewRegistry(Config{})
	tr := &Transport{Base: srv.Client().Transport, Registry: reg, SendPriority: true,
		Capacities: map[string]int{"Qwen": 2}}
	client := srv.client(tr)

	tests := []struct {
		name string
		ctx  context.Context
		want float64
	}{
		{"interactive", priority.With(ctx, priority.Interactive), 0},
		{"background", priority.With(ctx, priority.BackgroundIngestion), 3},
		{"untagged", ctx, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := client.Chat.Completions.New(tt.ctx, chatParams("Qwen"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Choices[0].Message.Content != "hello" {
				t.Fatalf("response %+v", res)
			}
			body := <-srv.bodies
			if body["priority"] != tt.want || body["model"] != "Qwen" || body["messages"] == nil {
				t.Fatalf("body sent = %v, want priority %v and the client's fields", body, tt.want)
			}
		})
	}
	g := reg.Gate("qwen", 2)
	if s := g.Stats(); s.InFlight != 0 || s.Admitted.Total() != 3 || s.Capacity != 2 {
		t.Fatalf("gate after the calls: %+v", s)
	}

	// Embeddings have their own key and gate.
	_, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "embedding",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-srv.bodies
	if e := reg.Gate("embedding", DefaultModelCapacity).Stats(); e.Admitted.Total() != 1 || e.Capacity != DefaultModelCapacity {
		t.Fatalf("embedding gate: %+v", e)
	}
	if g.Stats().Admitted.Total() != 3 {
		t.Fatal("the embedding call went through the generator's gate")
	}
}

// The slot is held until the response body has been read to its end: the
// stream's first chunk arrives with the slot still held.
func TestTransportOpenAIStreaming(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), httpDeadline)
	defer cancel()
	srv := newLLMServer(t)
	reg := NewRegistry(Config{})
	tr := &Transport{Base: srv.Client().Transport, Registry: reg, SendPriority: true, DefaultCapacity: 1}
	client := srv.client(tr)
	g := reg.Gate("m", 1)

	stream := client.Chat.Completions.NewStreaming(priority.With(ctx, priority.Interactive), chatParams("m"))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	if got := stream.Current().Choices[0].Delta.Content; got != "hel" {
		t.Fatalf("first chunk %q", got)
	}
	if body := <-srv.bodies; body["priority"] != 0.0 || body["stream"] != true {
		t.Fatalf("body sent = %v", body)
	}
	if s := g.Stats(); s.InFlight != 1 {
		t.Fatalf("mid-stream: %d in flight, want 1 (the slot is held)", s.InFlight)
	}
	// The gate is full: a second call with a done context is refused.
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := client.Chat.Completions.New(done, chatParams("m")); !errors.Is(err, context.Canceled) {
		t.Fatalf("second call on a full gate = %v, want canceled", err)
	}
	srv.proceed <- struct{}{}
	var rest strings.Builder
	for stream.Next() {
		rest.WriteString(stream.Current().Choices[0].Delta.Content)
	}
	if err := stream.Err(); err != nil || rest.String() != "lo" {
		t.Fatalf("rest of the stream %q, err %v", rest.String(), err)
	}
	if err := stream.Close(); err != nil {
		t.Fatal(err)
	}
	if s := g.Stats(); s.InFlight != 0 || s.Admitted.Of(priority.Interactive) != 1 || s.Cancelled.Of(priority.Orchestration) != 1 {
		t.Fatalf("after the stream: %+v", s)
	}

	// A stream abandoned early releases its slot on Close.
	stream = client.Chat.Completions.NewStreaming(ctx, chatParams("m"))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	<-srv.bodies
	stream.Close()
	if s := g.Stats(); s.InFlight != 0 {
		t.Fatalf("after closing early: %d in flight", s.InFlight)
	}
}

// With a raw client: the slot is held while the body is unread, released at
// its end, and Close after that releases nothing more.
func TestTransportHoldsUntilBodyRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), httpDeadline)
	defer cancel()
	srv := newLLMServer(t)
	reg := NewRegistry(Config{})
	hc := &http.Client{Transport: &Transport{Base: srv.Client().Transport, Registry: reg}}
	g := reg.Gate("m", DefaultModelCapacity)

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","priority":9,"messages":[]}`))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := <-srv.bodies; body["priority"] != 9.0 {
		t.Fatalf("without SendPriority the body changed: %v", body)
	}
	if g.Stats().InFlight != 1 {
		t.Fatalf("body unread: %d in flight, want 1", g.Stats().InFlight)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if g.Stats().InFlight != 0 {
		t.Fatal("body read to its end: slot still held")
	}
	resp.Body.Close() // releases nothing more (Release would panic)

	// Not gated: other paths and methods.
	before := len(reg.gates)
	resp, err = hc.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(reg.gates) != before {
		t.Fatal("GET /v1/models went through a gate")
	}
}

func TestTransportErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), httpDeadline)
	defer cancel()
	reg := NewRegistry(Config{})
	refused := errors.New("refused")
	tr := &Transport{Registry: reg, MaxBodyBytes: 16,
		Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, refused })}
	post := func(body string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://llm.invalid/v1/completions", strings.NewReader(body))
		_, err := tr.RoundTrip(req)
		return err
	}
	if err := post(`{"model":"m","prompt":"a long prompt"}`); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("large body: %v", err)
	}
	if err := post(`{"model":"m"}`); !errors.Is(err, refused) {
		t.Fatalf("base error: %v", err)
	}
	if s := reg.Gate("m", DefaultModelCapacity).Stats(); s.InFlight != 0 || s.Admitted.Total() != 1 {
		t.Fatalf("after a failed round trip: %+v", s)
	}
}

// TestTransportMaxModels: past MaxModels distinct models a new one is
// refused before anything is sent, the known ones (and those configured in
// Capacities) keep working.
func TestTransportMaxModels(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), httpDeadline)
	defer cancel()
	reg := NewRegistry(Config{})
	sent := 0
	tr := &Transport{Registry: reg, MaxModels: 3, Capacities: map[string]int{"Configured": 2},
		Base: roundTripFunc(func(*http.Request) (*http.Response, error) {
			sent++
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
		})}
	post := func(model string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://llm.invalid/v1/completions", strings.NewReader(`{"model":"`+model+`"}`))
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	for _, m := range []string{"a", "B", "configured", "b", "A"} {
		if err := post(m); err != nil {
			t.Fatalf("model %q: %v", m, err)
		}
	}
	if err := post("c"); !errors.Is(err, ErrTooManyModels) {
		t.Fatalf("a fourth distinct model: %v, want ErrTooManyModels", err)
	}
	if sent != 5 {
		t.Fatalf("%d requests sent, want 5 (the refused one is not)", sent)
	}
	if err := post("a"); err != nil {
		t.Fatalf("a known model after the refusal: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestGatedPath(t *testing.T) {
	tests := map[string]bool{
		"/v1/chat/completions":        true,
		"/v1/completions/":            true,
		"/v1/embeddings":              true,
		"/openai/v1/chat/completions": true,
		"/v1/models":                  false,
		"/xv1/completions":            false,
		"/v1/completions/x":           false,
		"":                            false,
	}
	for p, want := range tests {
		if got := gatedPath(p); got != want {
			t.Errorf("gatedPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestWithPriority(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{}`, `{"priority":0}`},
		{` { } `, ` {"priority":0 } `},
		{`{"model":"m"}`, `{"priority":0,"model":"m"}`},
		{`{"priority": 5, "model":"m"}`, `{"priority": 0, "model":"m"}`},
		{`{"priority":"x","a":{"priority":3},"priority":null}`, `{"priority":0,"a":{"priority":3},"priority":0}`},
	}
	for _, tt := range tests {
		info, ok := scanBody([]byte(tt.in))
		if !ok {
			t.Fatalf("scanBody(%s) not ok", tt.in)
		}
		if got := withPriority([]byte(tt.in), info, 0); string(got) != tt.want {
			t.Errorf("withPriority(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
	for _, in := range []string{``, `[]`, `"x"`, `{"a":1`, `{} {}`, `null`} {
		if _, ok := scanBody([]byte(in)); ok {
			t.Errorf("scanBody(%q) ok, want not a JSON object", in)
		}
	}
}

func FuzzScanBody(f *testing.F) {
	for _, s := range []string{`{}`, `{"model":"qwen","priority":2}`, `{"model":1}`, `{"model":"a","model":"b"}`,
		` {"pri\u006frity" : [1,{"priority":0}], "x":"\ud800"} `, `[]`, `{"model":"m"`, `{"a":1e400}`,
		"{\"model\":\"\xff\"}"} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, rank int) {
		info, ok := scanBody(b)
		orig, err := decodeObject(b)
		isObject := json.Valid(b) && err == nil && orig != nil
		if ok != isObject {
			t.Fatalf("scanBody ok = %v, json object = %v", ok, isObject)
		}
		if !ok {
			return
		}
		if m, _ := orig["model"].(string); m != info.model {
			t.Fatalf("model = %q, want %q", info.model, m)
		}
		out := withPriority(b, info, rank)
		got, err := decodeObject(out)
		if err != nil || !json.Valid(out) {
			t.Fatalf("rewritten body %q: %v", out, err)
		}
		if got["priority"] != json.Number(fmt.Sprint(rank)) {
			t.Fatalf("priority = %v, want %d", got["priority"], rank)
		}
		delete(got, "priority")
		delete(orig, "priority")
		if !reflect.DeepEqual(got, orig) {
			t.Fatalf("other members changed:\n got %v\nwant %v", got, orig)
		}
	})
}

// decodeObject decodes a JSON object keeping numbers as written.
func decodeObject(b []byte) (map[string]any, error) {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	err := d.Decode(&m)
	return m, err
}
