package workitems

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"

	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/scheduler"
)

// subjectPrefix prefixes the engine's work endpoints: edict.work.<op>.
const subjectPrefix = "edict.work."

const (
	headerErrorCode = "Nats-Service-Error-Code"
	headerError     = "Nats-Service-Error"
)

func defaultRand() float64 { return mrand.Float64() }

// Client talks to the engine's work endpoints over one NATS connection.
// Create it with New.
type Client struct {
	nc      *nats.Conn
	cfg     Config
	prop    propagation.TextMapPropagator
	pacer   *Pacer
	timeout time.Duration
}

var _ scheduler.Claimer = (*Client)(nil)

// New returns a Client on nc, which it never closes.
func New(nc *nats.Conn, cfg Config) (*Client, error) {
	if nc == nil {
		return nil, ErrNoConn
	}
	if cfg.Worker == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		cfg.Worker = "worker:" + hex.EncodeToString(b[:])
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 60 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	pacer, err := NewPacer(cfg.Pacing, cfg.Now, cfg.Rand, cfg.Logger)
	if err != nil {
		return nil, err
	}
	prop := cfg.Propagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}, priority.Propagator{})
	}
	return &Client{nc: nc, cfg: cfg, prop: prop, pacer: pacer, timeout: cfg.Timeout}, nil
}

// Pacer returns the client's claim pacer (for snapshots and resets).
func (c *Client) Pacer() *Pacer { return c.pacer }

// Worker returns the client's default worker identity.
func (c *Client) Worker() string { return c.cfg.Worker }

// call sends one request to edict.work.<op> and decodes the reply into out.
func (c *Client) call(ctx context.Context, op string, in, out any, extra time.Duration) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("workitems: %s: encode: %w", op, err)
	}
	msg := nats.NewMsg(subjectPrefix + op)
	msg.Data = body
	c.prop.Inject(ctx, priority.Carrier(msg.Header))
	priority.Carrier(msg.Header).Set(priority.Header, priority.From(ctx).String())
	if _, ok := ctx.Deadline(); !ok || extra > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout+extra)
		defer cancel()
	}
	rep, err := c.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return ctxErr
		}
		return fmt.Errorf("workitems: %s: %w", op, err)
	}
	if code := rep.Header.Get(headerErrorCode); code != "" {
		n, _ := strconv.Atoi(code)
		return &EngineError{Op: op, Code: n, Text: rep.Header.Get(headerError)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rep.Data, out); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBackend, op, err)
	}
	return nil
}

// Item is a work item to submit.
type Item struct {
	// ID makes the submit idempotent; empty lets the engine choose one.
	ID string
	// Type is the task type, one subject token (required).
	Type string
	// Class is the item's class; zero means priority.ForTaskType(Type). The
	// engine clamps it to the caller's ceiling.
	Class priority.Class
	// Tenant groups items for the per-tenant lease quota.
	Tenant string
	// Payload is any JSON value, kept verbatim; nil means null.
	Payload json.RawMessage
	// MaxAttempts is the number of attempts; zero means the engine's default (3).
	MaxAttempts int
}

// Receipt is a submit's answer.
type Receipt struct {
	ID string
	// Duplicate is true when an item with this ID was already submitted;
	// it was not queued again.
	Duplicate bool
}

type submitBody struct {
	ID          string          `json:"id,omitempty"`
	Type        string          `json:"type"`
	Class       string          `json:"class,omitempty"`
	Tenant      string          `json:"tenant,omitempty"`
	Payload     json.RawMessage `json:"payload"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
}

// Submit queues it durably. Submitting an ID again answers Duplicate.
func (c *Client) Submit(ctx context.Context, it Item) (Receipt, error) {
	body := submitBody{ID: it.ID, Type: it.Type, Tenant: it.Tenant, Payload: it.Payload, MaxAttempts: it.MaxAttempts}
	if it.Class.Valid() {
		body.Class = it.Class.String()
	}
	if body.Payload == nil {
		body.Payload = json.RawMessage("null")
	}
	var out struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	if err := c.call(ctx, "submit", body, &out, 0); err != nil {
		return Receipt{}, err
	}
	return Receipt{ID: out.ID, Duplicate: out.Duplicate}, nil
}

// ClaimRequest selects what a claim may return. Classes, Lanes and Types
// combine with AND; empty ones match everything.
type ClaimRequest struct {
	// Worker identifies the claimer; empty means the client's Worker.
	Worker  string
	Classes []priority.Class
	Lanes   []string
	Types   []string
	// Lease is the lease to ask for; zero means the client's Lease.
	Lease time.Duration
	// Wait long-polls the engine up to this long for an item; zero answers at once.
	Wait time.Duration
}

type claimBody struct {
	Worker       string   `json:"worker"`
	Classes      []string `json:"classes,omitempty"`
	Lanes        []string `json:"lanes,omitempty"`
	Types        []string `json:"types,omitempty"`
	LeaseSeconds float64  `json:"lease_seconds,omitempty"`
	WaitMS       int64    `json:"wait_ms,omitempty"`
}

type claimReply struct {
	Claimed        bool            `json:"claimed"`
	Reason         string          `json:"reason"`
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Class          string          `json:"class"`
	Tenant         string          `json:"tenant"`
	Payload        json.RawMessage `json:"payload"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseExpiresAt string          `json:"lease_expires_at"`
	Token          string          `json:"token"`
}

// Claim claims the next item r allows, highest class first. It returns
// (nil, nil) when there is nothing to claim (the engine answered empty or
// tenant_quota). The claim is paced per class of ctx (priority.From): while
// that class is paced it fails with a *PacedError without contacting the
// engine; a shed answer opens the window and is returned as is.
func (c *Client) Claim(ctx context.Context, r ClaimRequest) (*Claim, error) {
	cls := priority.From(ctx)
	if err := c.pacer.RaiseIfPaced(cls); err != nil {
		return nil, err
	}
	body := c.claimBody(r)
	var rep claimReply
	err := c.call(ctx, "claim", body, &rep, max(r.Wait, 0))
	if err != nil {
		if IsBusyShed(err) {
			c.pacer.RecordShed(cls)
		}
		return nil, err
	}
	c.pacer.RecordAdmitted(cls)
	cl, err := claimFromReply(rep)
	if cl != nil {
		cl.c = c
	}
	return cl, err
}

// claimBody is r on the wire.
func (c *Client) claimBody(r ClaimRequest) claimBody {
	body := claimBody{Worker: r.Worker, Lanes: r.Lanes, Types: r.Types}
	if body.Worker == "" {
		body.Worker = c.cfg.Worker
	}
	for _, k := range r.Classes {
		body.Classes = append(body.Classes, k.String())
	}
	lease := r.Lease
	if lease <= 0 {
		lease = c.cfg.Lease
	}
	body.LeaseSeconds = lease.Seconds()
	if r.Wait > 0 {
		body.WaitMS = max(1, r.Wait.Milliseconds())
	}
	return body
}

// claimFromReply validates a claim reply: (nil, nil) for claimed:false, a
// Claim (without its client) for a complete claimed reply, otherwise an
// error wrapping ErrBackend.
func claimFromReply(rep claimReply) (*Claim, error) {
	if !rep.Claimed {
		return nil, nil
	}
	if rep.ID == "" || rep.Token == "" || rep.Attempt < 1 || rep.MaxAttempts < 1 {
		return nil, fmt.Errorf("%w: claimed reply without id, token, attempt or max_attempts", ErrBackend)
	}
	cl := &Claim{ID: rep.ID, Type: rep.Type, Tenant: rep.Tenant, Payload: rep.Payload, Attempt: rep.Attempt, MaxAttempts: rep.MaxAttempts, Token: rep.Token}
	var err error
	if cl.Class, err = priority.Parse(rep.Class); err != nil {
		return nil, fmt.Errorf("%w: class %q", ErrBackend, truncate(rep.Class, 64))
	}
	if cl.LeaseExpiresAt, err = time.Parse(time.RFC3339, rep.LeaseExpiresAt); err != nil {
		return nil, fmt.Errorf("%w: lease_expires_at %q", ErrBackend, truncate(rep.LeaseExpiresAt, 64))
	}
	return cl, nil
}

// Stats is the engine's per-class and per-lane view of the queue.
type Stats struct {
	Classes map[string]ClassStats `json:"classes"`
	Lanes   map[string]LaneStats  `json:"lanes"`
}

// ClassStats counts one class's items.
type ClassStats struct {
	Queued   int `json:"queued"`
	InFlight int `json:"in_flight"`
	Dead     int `json:"dead"`
}

// LaneStats counts one lane's ready items.
type LaneStats struct {
	Queued int `json:"queued"`
}

// Stats returns the engine's queue statistics.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.call(ctx, "stats", struct{}{}, &s, 0)
	return s, err
}

// DeadItem is one dead letter.
type DeadItem struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Class    string          `json:"class"`
	Tenant   string          `json:"tenant"`
	Payload  json.RawMessage `json:"payload"`
	Attempts int             `json:"attempts"`
	Reason   string          `json:"reason"`
}

// DeadList returns up to limit dead letters (0: the engine's default)
// of class (zero: all) after the cursor after, and the cursor of the next
// page ("" at the end).
func (c *Client) DeadList(ctx context.Context, class priority.Class, after string, limit int) ([]DeadItem, string, error) {
	in := struct {
		Class string `json:"class,omitempty"`
		After string `json:"after,omitempty"`
		Limit int    `json:"limit,omitempty"`
	}{After: after, Limit: limit}
	if class.Valid() {
		in.Class = class.String()
	}
	var out struct {
		Items []DeadItem `json:"items"`
		Next  string     `json:"next"`
	}
	err := c.call(ctx, "dead_list", in, &out, 0)
	return out.Items, out.Next, err
}

// DeadReplay queues the dead letters ids again with fresh attempts and
// returns how many were replayed.
func (c *Client) DeadReplay(ctx context.Context, ids []string) (int, error) {
	var out struct {
		Replayed int `json:"replayed"`
	}
	err := c.call(ctx, "dead_replay", struct {
		IDs []string `json:"ids"`
	}{ids}, &out, 0)
	return out.Replayed, err
}
