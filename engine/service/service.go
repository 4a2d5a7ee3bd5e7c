package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/edictrt/edict/engine/admission"
	"github.com/edictrt/edict/engine/identity"
	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// Span attribute keys.
const (
	attrGraph     = attribute.Key("edict.graph")
	attrOp        = attribute.Key("edict.op")
	attrAdmission = attribute.Key("edict.admission")
)

// Per-graph admission keys of requests without a graph; they cannot be graph
// names.
const (
	workKey  = "$work"
	adminKey = "$admin"
)

// TimeoutText is the 504 text of a request abandoned at the dispatch
// deadline.
const TimeoutText = "TIMEOUT: request exceeded the server dispatch deadline and was abandoned"

// TooLargeReplyText is the 413 text that replaces a reply over max_payload.
const TooLargeReplyText = "response frame exceeds the configured resource limit"

// shuttingDown is the 503 answer of a request that arrives during shutdown.
var shuttingDown = protocol.Busy("engine shutting down")

// job is the admitted part of a request, run on its own goroutine.
type job func(ctx context.Context, c protocol.Caller) (any, error)

// family is one of the three request families.
type family int

const (
	graphFamily family = iota
	workFamily
	adminFamily
)

// endpoint is one op's endpoint.
type endpoint struct {
	name    string
	subject string
	op      string
	family  family
	write   bool
	decode  func(graph string, body []byte) (job, error)
	opSet   metric.MeasurementOption // {op}, built once
	stats   endpointStats
}

// Service is a running edict-engine micro service.
type Service struct {
	cfg      Config
	nc       *nats.Conn
	svc      micro.Service
	gate     *admission.Gate
	qos      *admission.QoS
	resolver identity.Resolver
	deadline time.Duration
	log      *slog.Logger
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	metrics  *instruments
	now      func() time.Time

	base   context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closing   bool
	endpoints []*endpoint
	wg        sync.WaitGroup
}

// Start registers the edict-engine service on nc (which it does not own or
// close) and returns once every endpoint is subscribed.
func Start(ctx context.Context, nc *nats.Conn, cfg Config) (*Service, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrConfig)
	}
	s := &Service{
		cfg:      cfg,
		nc:       nc,
		gate:     admission.NewGate(cfg.Admission),
		resolver: identity.Resolver{TrustRequestInfo: cfg.TrustRequestInfo, Ceilings: cfg.Ceilings},
		deadline: cfg.DispatchDeadline,
		log:      cfg.Logger,
		prop:     cfg.Propagator,
		now:      cfg.Now,
	}
	if s.deadline <= 0 {
		s.deadline = admission.DefaultDispatchDeadline
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	s.tracer = tp.Tracer("github.com/edictrt/edict/engine/service")
	if s.prop == nil {
		s.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}, priority.Propagator{})
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.QoS.Enabled {
		s.qos = admission.NewQoS(cfg.QoS, s.gate.Sizes().MaxInFlight)
	}
	m, err := newInstruments(cfg.MeterProvider, s.gate)
	if err != nil {
		return nil, fmt.Errorf("service: metrics: %w", err)
	}
	s.metrics = m
	version := cfg.Version
	if version == "" {
		version = "0.1.0"
	}
	s.base, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.endpoints = s.buildEndpoints()
	svc, err := micro.AddService(nc, micro.Config{
		Name:         protocol.ServiceName,
		Version:      version,
		Description:  "edict graph engine: graph, work-item and admin operations",
		StatsHandler: s.endpointStats,
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.log.Warn("service: subscription error", "subject", e.Subject, "error", e.Description)
		},
	})
	if err != nil {
		s.cancel()
		m.close()
		return nil, fmt.Errorf("service: add service: %w", err)
	}
	s.svc = svc
	for _, ep := range s.endpoints {
		if err := svc.AddEndpoint(ep.name, s.handler(ep), micro.WithEndpointSubject(ep.subject)); err != nil {
			_ = svc.Stop()
			s.cancel()
			m.close()
			return nil, fmt.Errorf("service: endpoint %s: %w", ep.name, err)
		}
	}
	// Make sure the server has every subscription before callers are told
	// the service is up.
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	err = nc.FlushWithContext(fctx)
	fcancel()
	if err != nil {
		_ = svc.Stop()
		s.cancel()
		m.close()
		return nil, fmt.Errorf("service: flush: %w", err)
	}
	sz := s.gate.Sizes()
	s.log.Info("engine service started", "endpoints", len(s.endpoints), "max_in_flight", sz.MaxInFlight,
		"per_graph", sz.PerGraph, "read_reserved", sz.ReadReserved, "dispatch_deadline", s.deadline, "qos", cfg.QoS.Enabled)
	return s, nil
}

// Sizes returns the effective admission sizes.
func (s *Service) Sizes() admission.Config { return s.gate.Sizes() }

// InFlight returns the number of admitted requests that hold permits.
func (s *Service) InFlight() int {
	sz := s.gate.Sizes()
	return sz.MaxInFlight - s.gate.GlobalAvailable() + sz.ReadReserved - s.gate.ReadAvailable()
}

// Info returns the micro service info (name, id, endpoints).
func (s *Service) Info() micro.Info { return s.svc.Info() }

// Shutdown stops taking requests (new ones get no responders once the
// subscriptions are drained, or a 503 while they drain) and waits for the
// in-flight requests to finish or for ctx to be done, whichever is first;
// in the second case their contexts are cancelled and ctx's error is
// returned. It is idempotent.
func (s *Service) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	already := s.closing
	s.closing = true
	s.mu.Unlock()
	var err error
	if !already {
		err = s.svc.Stop()
		// Stop drains the subscriptions asynchronously; a round trip makes
		// sure the server has dropped them, so new requests get no
		// responders from here on.
		if ferr := s.nc.FlushTimeout(5 * time.Second); ferr != nil && !errors.Is(ferr, nats.ErrConnectionClosed) {
			err = errors.Join(err, ferr)
		}
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
		err = errors.Join(err, ctx.Err())
	}
	s.cancel()
	s.metrics.close()
	return err
}

// Close stops the service, cancels the in-flight requests and waits for
// their goroutines to return.
func (s *Service) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Shutdown(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// handler returns ep's micro handler: the dispatch path.
func (s *Service) handler(ep *endpoint) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		s.dispatch(ep, req)
	})
}

func (s *Service) dispatch(ep *endpoint, req micro.Request) {
	start := time.Now()
	h := map[string][]string(req.Headers())
	ctx := s.prop.Extract(s.base, priority.Carrier(h))
	ctx, span := s.tracer.Start(ctx, "edict-engine "+ep.op, trace.WithSpanKind(trace.SpanKindServer))
	s.metrics.requests.Add(ctx, 1, ep.opSet)

	var graph string
	key := adminKey
	switch ep.family {
	case graphFamily:
		graph = graphToken(req.Subject())
		key = graph
	case workFamily:
		key = workKey
	}
	span.SetAttributes(attrOp.String(ep.op), attrGraph.String(graph))

	reject := func(e *protocol.Error, c priority.Class, outcome string) {
		span.SetAttributes(priority.Attribute(c), attrAdmission.String(outcome))
		span.SetStatus(codes.Error, e.Text)
		span.End()
		s.metrics.requestTime.Record(ctx, time.Since(start).Seconds(), ep.opSet)
		_ = req.Error(fmt.Sprint(e.Code), e.Text, nil)
	}
	// Engine spec §2 order: body, graph name, class.
	run, err := ep.decode(graph, req.Data())
	if err != nil {
		reject(protocol.As(err), priority.Orchestration, "bad_request")
		return
	}
	if ep.family == graphFamily && !protocol.ValidName(graph) {
		reject(protocol.BadRequest("bad graph name %q: want ^[A-Za-z0-9_-]{1,128}$", truncate(graph)), priority.Orchestration, "bad_request")
		return
	}
	caller, err := s.resolver.Resolve(h)
	if errors.Is(err, identity.ErrUnknownClass) {
		reject(protocol.BadRequest("%s", strings.TrimPrefix(err.Error(), "identity: ")), priority.Orchestration, "bad_request")
		return
	}
	if err != nil && s.qos != nil {
		s.metrics.authFailures.Add(ctx, 1)
		reject(&protocol.Error{Code: protocol.CodeForbidden, Text: "AUTHENTICATION_REQUIRED: authenticated principal is required for admission"}, caller.Class, "forbidden")
		return
	}
	class := caller.Class

	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		reject(shuttingDown, class, "busy")
		return
	}
	var qp *admission.QoSPermit
	if s.qos != nil {
		var reason admission.Reason
		qp, reason = s.qos.TryAdmit(class, caller.Principal, s.now())
		if qp == nil {
			s.mu.Unlock()
			s.metrics.qosShed.Add(ctx, 1, s.metrics.classReason(class, reason))
			s.metrics.busy.Add(ctx, 1, s.metrics.classReason(class, reason))
			ep.stats.shed(class, reason)
			reject(&protocol.Error{Code: protocol.CodeBusy, Text: reason.Text()}, class, string(reason))
			return
		}
		s.metrics.qosAdmitted.Add(ctx, 1, s.metrics.classSet(class))
		s.metrics.qosInFlight.Add(ctx, 1, s.metrics.classSet(class))
	}
	grant, ok := s.gate.Admit(key, ep.write)
	if !ok {
		s.mu.Unlock()
		if qp != nil {
			qp.Release()
			s.metrics.qosInFlight.Add(ctx, -1, s.metrics.classSet(class))
		}
		s.metrics.busy.Add(ctx, 1, s.metrics.classReason(class, admission.ReasonCapacity))
		ep.stats.shed(class, admission.ReasonCapacity)
		reject(&protocol.Error{Code: protocol.CodeBusy, Text: protocol.BusyCapacity}, class, string(admission.Busy))
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()

	outcome := grant.Outcome()
	if outcome == admission.ReadLane {
		s.metrics.readReserved.Add(ctx, 1)
		ep.stats.readLane.Add(1)
	}
	if graph != "" {
		s.metrics.graphOps.Add(ctx, 1, s.metrics.graphSet(graph))
	}
	span.SetAttributes(priority.Attribute(class), attrAdmission.String(string(outcome)))
	s.metrics.inFlight.Add(ctx, 1, s.metrics.classSet(class))
	ep.stats.inFlight[class.Order()].Add(1)

	a := &admitted{
		s: s, ep: ep, reply: req.Reply(), caller: caller, start: start,
		span: span, grant: grant, qos: qp, class: class,
	}
	a.timeoutDone = make(chan struct{})
	a.runCtx, a.cancel = context.WithTimeout(priority.With(ctx, class), s.deadline)
	a.stopTimer = context.AfterFunc(a.runCtx, a.expire)
	go a.run(run)
}

// admitted is one admitted request, owned by its goroutine.
type admitted struct {
	s           *Service
	ep          *endpoint
	reply       string
	caller      protocol.Caller
	class       priority.Class
	start       time.Time
	span        trace.Span
	grant       admission.Grant
	qos         *admission.QoSPermit
	runCtx      context.Context
	cancel      context.CancelFunc
	stopTimer   func() bool
	timeoutDone chan struct{}
	claimed     atomic.Bool
}

func (a *admitted) run(fn job) {
	defer a.s.wg.Done()
	v, err := safeRun(a.runCtx, fn, a.caller)
	if a.stopTimer() {
		// The deadline did not fire: this goroutine answers.
		if a.claimed.CompareAndSwap(false, true) {
			a.finish(v, err, false)
		}
	} else {
		// The deadline (or a shutdown cancel) fired first; wait for its
		// reply so the goroutine owns everything it started.
		<-a.timeoutDone
	}
	a.cancel()
}

// expire runs when the request's context is done before its job returned.
func (a *admitted) expire() {
	defer close(a.timeoutDone)
	if !a.claimed.CompareAndSwap(false, true) {
		return
	}
	if errors.Is(a.runCtx.Err(), context.DeadlineExceeded) {
		a.s.metrics.deadline.Add(a.runCtx, 1)
		a.finish(nil, &protocol.Error{Code: protocol.CodeTimeout, Text: TimeoutText}, true)
		return
	}
	a.finish(nil, shuttingDown, true)
}

// finish ends the span, replies and releases the permits. A normal answer
// is published first and the permits released after it (engine spec §2,
// step 7); at the deadline (releaseFirst) the permits go first, so they are
// free by the time the caller reads its TIMEOUT.
func (a *admitted) finish(v any, err error, releaseFirst bool) {
	s := a.s
	ctx := context.WithoutCancel(a.runCtx)
	// The span and the latency end before the reply is published, so a
	// caller that has its answer also finds them recorded.
	s.metrics.requestTime.Record(ctx, time.Since(a.start).Seconds(), a.ep.opSet)
	var e *protocol.Error
	if err != nil {
		e = protocol.As(err)
		a.span.SetStatus(codes.Error, e.Text)
	}
	a.span.End()
	if releaseFirst {
		a.release(ctx)
	}
	if e != nil {
		s.publishError(a.reply, e)
	} else {
		s.publishValue(a.reply, v)
	}
	if !releaseFirst {
		a.release(ctx)
	}
}

// release returns the baseline permits (read, per-graph, global), then the
// QoS permit.
func (a *admitted) release(ctx context.Context) {
	s := a.s
	a.grant.Release()
	if a.qos != nil {
		a.qos.Release()
		s.metrics.qosInFlight.Add(ctx, -1, s.metrics.classSet(a.class))
		s.metrics.qosDispatch.Record(ctx, time.Since(a.start).Seconds(), s.metrics.classSet(a.class))
	}
	s.metrics.inFlight.Add(ctx, -1, s.metrics.classSet(a.class))
	a.ep.stats.inFlight[a.class.Order()].Add(-1)
}

// safeRun runs fn, turning a panic into a 500 so a bad request never crashes
// the service.
func safeRun(ctx context.Context, fn job, c protocol.Caller) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &protocol.Error{Code: protocol.CodeInternal, Text: fmt.Sprintf("INTERNAL: panic: %v", r)}
		}
	}()
	return fn(ctx, c)
}

// publishValue sends v as the JSON reply; a reply over max_payload becomes
// 413.
func (s *Service) publishValue(reply string, v any) {
	if reply == "" {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		s.publishError(reply, &protocol.Error{Code: protocol.CodeInternal, Text: "INTERNAL: encode reply: " + err.Error()})
		return
	}
	err = s.nc.PublishMsg(&nats.Msg{Subject: reply, Data: data})
	if errors.Is(err, nats.ErrMaxPayload) {
		s.publishError(reply, protocol.TooLarge(TooLargeReplyText))
		return
	}
	if err != nil {
		s.log.Warn("service: reply", "error", err)
	}
}

// publishError sends e with the micro error headers set by hand.
func (s *Service) publishError(reply string, e *protocol.Error) {
	if reply == "" {
		return
	}
	msg := &nats.Msg{Subject: reply, Header: nats.Header{
		protocol.HeaderErrorCode: []string{fmt.Sprint(e.Code)},
		protocol.HeaderError:     []string{e.Text},
	}}
	if err := s.nc.PublishMsg(msg); err != nil {
		s.log.Warn("service: error reply", "error", err)
	}
}

// graphToken returns the <graph> token of edict.eg.<graph>.<op>.
func graphToken(subject string) string {
	rest := strings.TrimPrefix(subject, protocol.GraphPrefix)
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		return rest[:i]
	}
	return rest
}

func truncate(s string) string {
	if len(s) > 140 {
		return s[:140] + "…"
	}
	return s
}
