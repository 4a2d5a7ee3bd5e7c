package identity_test

import (
	"errors"
	"testing"

	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

func TestPrincipal(t *testing.T) {
	tests := []struct {
		name    string
		h       map[string][]string
		trust   bool
		want    string
		wantErr bool
	}{
		{"untrusted ignores the header", map[string][]string{"Nats-Request-Info": {`{"acc":"APP","user":"bob"}`}}, false, "anonymous", false},
		{"absent", nil, true, "anonymous", false},
		{"acc and user", map[string][]string{"Nats-Request-Info": {`{"acc":"APP","user":"bob","name":"alice"}`}}, true, "APP/bob", false},
		{"acc only", map[string][]string{"Nats-Request-Info": {`{"acc":"APP","name":"alice"}`}}, true, "APP", false},
		{"name is never identity", map[string][]string{"Nats-Request-Info": {`{"acc":"APP","user":"","name":"ENGINE/root"}`}}, true, "APP", false},
		{"lower-case spelling is not the server's header", map[string][]string{"nats-request-info": {`{"acc":"ENGINE","user":"engine"}`}}, true, "anonymous", false},
		{"the server's value is the last one", map[string][]string{"Nats-Request-Info": {`{"acc":"ENGINE","user":"engine"}`, `{"acc":"APP","user":"bob"}`}}, true, "APP/bob", false},
		{"no account", map[string][]string{"Nats-Request-Info": {`{"user":"bob"}`}}, true, "anonymous", true},
		{"garbage", map[string][]string{"Nats-Request-Info": {`{`}}, true, "anonymous", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := identity.Principal(tt.h, tt.trust)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("Principal = %q, %v; want %q, err %v", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, identity.ErrUnauthenticated) {
				t.Fatalf("err %v is not ErrUnauthenticated", err)
			}
		})
	}
}

func TestClass(t *testing.T) {
	tests := []struct {
		h       map[string][]string
		want    priority.Class
		wantErr bool
	}{
		{nil, priority.Orchestration, false},
		{map[string][]string{"X-Resource-Priority": {"interactive"}}, priority.Interactive, false},
		{map[string][]string{"x-resource-priority": {" BACKGROUND_INGESTION "}}, priority.BackgroundIngestion, false},
		{map[string][]string{"X-Resource-Priority": {"urgent"}}, 0, true},
		{map[string][]string{"X-Resource-Priority": {""}}, 0, true},
		{map[string][]string{"baggage": {"edict.priority=interactive"}}, priority.Orchestration, false},
	}
	for _, tt := range tests {
		got, err := identity.Class(tt.h)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("Class(%v) = %v, %v; want %v, err %v", tt.h, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, identity.ErrUnknownClass) {
			t.Errorf("err %v is not ErrUnknownClass", err)
		}
	}
}

func TestParseCeilings(t *testing.T) {
	c, err := identity.ParseCeilings(identity.SplitList(" APP/ingest=background_ingestion, APP/ui = Interactive ,,"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Ceiling("APP/ingest") != priority.BackgroundIngestion || c.Ceiling("APP/ui") != priority.Interactive || c.Ceiling("other") != priority.Interactive {
		t.Fatalf("ceilings = %v", c)
	}
	for _, bad := range []string{"noequals", "=interactive", "APP/x=urgent"} {
		if _, err := identity.ParseCeilings([]string{bad}); !errors.Is(err, identity.ErrCeiling) {
			t.Errorf("ParseCeilings(%q) err = %v, want ErrCeiling", bad, err)
		}
	}
}

func TestResolveClamps(t *testing.T) {
	r := identity.Resolver{TrustRequestInfo: true, Ceilings: identity.Ceilings{"APP/ingest": priority.BackgroundIngestion}}
	h := map[string][]string{
		"Nats-Request-Info":   {`{"acc":"APP","user":"ingest","name":"APP/ui"}`},
		"X-Resource-Priority": {"interactive"},
	}
	got, err := r.Resolve(h)
	want := protocol.Caller{Principal: "APP/ingest", Class: priority.BackgroundIngestion, Ceiling: priority.BackgroundIngestion}
	if err != nil || got != want {
		t.Fatalf("Resolve = %+v, %v; want %+v", got, err, want)
	}
	// Hydration is below Orchestration in the clamp order.
	r.Ceilings["APP/ingest"] = priority.Hydration
	h["X-Resource-Priority"] = []string{"orchestration"}
	if got, _ := r.Resolve(h); got.Class != priority.Hydration {
		t.Fatalf("orchestration clamped to hydration = %v", got.Class)
	}
	h["X-Resource-Priority"] = []string{"background_ingestion"}
	if got, _ := r.Resolve(h); got.Class != priority.BackgroundIngestion {
		t.Fatalf("a lower class is never raised: %v", got.Class)
	}
	h["X-Resource-Priority"] = []string{"nope"}
	if _, err := r.Resolve(h); !errors.Is(err, identity.ErrUnknownClass) {
		t.Fatalf("unknown class err = %v", err)
	}
}

func FuzzParseRequestInfo(f *testing.F) {
	for _, s := range []string{`{"acc":"APP","user":"u"}`, `{"acc":"A"}`, `{}`, `[]`, `null`, `{"acc":1}`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := identity.ParseRequestInfo(s)
		if err != nil && p != protocol.Anonymous {
			t.Fatalf("error %v with principal %q", err, p)
		}
		if err == nil && p == "" {
			t.Fatal("empty principal without error")
		}
	})
}

func FuzzParseCeilings(f *testing.F) {
	for _, s := range []string{"a=interactive", "a=x", "=", "a/b=hydration,c=orchestration", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := identity.ParseCeilings(identity.SplitList(s))
		if err != nil {
			return
		}
		for p, cl := range c {
			if p == "" || !cl.Valid() {
				t.Fatalf("bad entry %q=%v from %q", p, cl, s)
			}
		}
	})
}
