// Package worktest serves a protocol.Handler (the engine's work-item
// service) on the edict.work.<op> subjects through a real NATS micro
// service, for tests of the workitems client without the full engine
// service: the class comes from X-Resource-Priority (absent means
// Orchestration, an unknown class is a 400) clamped to Config.Ceiling, an
// optional Shed hook answers 503 BUSY on the dispatch path, and admitted
// requests run Handle on their own goroutine and reply by publishing to the
// request's reply subject, as the engine service does.
package worktest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// Config configures a Server. The zero value serves everything with the
// ceiling Interactive.
type Config struct {
	// Ceiling is the principal's ceiling; zero means Interactive.
	Ceiling priority.Class
	// Shed, when non-nil, is asked on the dispatch path for every request;
	// true answers 503 with the baseline BUSY text and Handle is not run.
	Shed func(op string, class priority.Class) bool
}

// Server is a running micro service in front of one Handler.
type Server struct {
	nc      *nats.Conn
	h       protocol.Handler
	cfg     Config
	svc     micro.Service
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	reached map[string]*atomic.Int64
}

// Start registers one endpoint work_<op> on edict.work.<op> for each of
// h.Ops() on nc.
func Start(nc *nats.Conn, h protocol.Handler, cfg Config) (*Server, error) {
	if !cfg.Ceiling.Valid() {
		cfg.Ceiling = priority.Interactive
	}
	s := &Server{nc: nc, h: h, cfg: cfg, reached: make(map[string]*atomic.Int64)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	svc, err := micro.AddService(nc, micro.Config{Name: protocol.ServiceName, Version: "0.0.1"})
	if err != nil {
		return nil, err
	}
	s.svc = svc
	for _, op := range h.Ops() {
		s.reached[op] = new(atomic.Int64)
		if err := svc.AddEndpoint("work_"+op, s.handler(op), micro.WithEndpointSubject(protocol.WorkPrefix+op)); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// Serve is Start for a test: it fails t on error and stops the server when
// the test ends.
func Serve(t testing.TB, nc *nats.Conn, h protocol.Handler, cfg Config) *Server {
	t.Helper()
	s, err := Start(nc, h, cfg)
	if err != nil {
		t.Fatalf("worktest: start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// Reached returns how many requests for op reached the server, shed or not.
func (s *Server) Reached(op string) int64 {
	if c := s.reached[op]; c != nil {
		return c.Load()
	}
	return 0
}

// Stop stops the micro service, cancels running handlers and waits for
// them. It is idempotent.
func (s *Server) Stop() error {
	err := s.svc.Stop()
	s.cancel()
	s.wg.Wait()
	return err
}

func (s *Server) handler(op string) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		s.reached[op].Add(1)
		cls := priority.Orchestration
		if v := priority.Carrier(req.Headers()).Get(priority.Header); v != "" {
			c, err := priority.Parse(v)
			if err != nil {
				_ = req.Error("400", "unknown class "+strconv.Quote(v), nil)
				return
			}
			cls = c
		}
		cls = cls.Clamp(s.cfg.Ceiling)
		if s.cfg.Shed != nil && s.cfg.Shed(op, cls) {
			_ = req.Error("503", protocol.BusyCapacity, nil)
			return
		}
		reply := req.Reply()
		body := append([]byte(nil), req.Data()...)
		caller := protocol.Caller{Principal: protocol.Anonymous, Class: cls, Ceiling: s.cfg.Ceiling}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx := priority.With(s.ctx, cls)
			v, err := s.h.Handle(ctx, protocol.Request{Op: op, Caller: caller, Body: body})
			s.respond(reply, v, err)
		}()
	})
}

func (s *Server) respond(reply string, v any, err error) {
	if reply == "" {
		return
	}
	msg := nats.NewMsg(reply)
	if err == nil {
		b, merr := json.Marshal(v)
		if merr != nil {
			err = merr
		} else {
			msg.Data = b
		}
	}
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			pe = protocol.As(err)
		}
		msg.Header.Set(protocol.HeaderErrorCode, strconv.Itoa(pe.Code))
		msg.Header.Set(protocol.HeaderError, pe.Text)
		msg.Data = nil
	}
	_ = s.nc.PublishMsg(msg)
}
