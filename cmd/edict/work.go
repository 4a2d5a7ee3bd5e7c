package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/priority"
	"github.com/edictrt/edict/workitems"
)

const workDefaultNATSURL = "nats://127.0.0.1:4222"

// runWork runs "edict work submit|claim|stats|dead" against a running daemon.
func runWork(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "usage: edict work <submit|claim|stats|dead> [flags]")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "  submit  queue a durable work item")
		fmt.Fprintln(w, "  claim   claim the next item (highest class first) and print it")
		fmt.Fprintln(w, "  stats   print queued, in-flight and dead items per class and lane")
		fmt.Fprintln(w, "  dead    list dead letters, or replay them with --replay")
		fmt.Fprintln(w)
		fmt.Fprintln(w, `Run "edict work <subcommand> --help" for its flags.`)
	}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "help", "-h", "--help", "-help":
		usage(stdout)
		return 0
	case "submit":
		return workSubmit(ctx, rest, stdout, stderr)
	case "claim":
		return workClaim(ctx, rest, stdout, stderr)
	case "stats":
		return workStats(ctx, rest, stdout, stderr)
	case "dead":
		return workDead(ctx, rest, stdout, stderr)
	}
	fmt.Fprintf(stderr, "edict work: unknown subcommand %q\n\n", sub)
	usage(stderr)
	return 2
}

// workFlags are the connection flags every work subcommand takes.
type workFlags struct {
	natsURL string
	timeout time.Duration
	class   string
}

func newWorkFlagSet(name, summary string, stderr io.Writer, wf *workFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("edict work "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := os.Getenv("EDICT_NATS_URL")
	if url == "" {
		url = workDefaultNATSURL
	}
	fs.StringVar(&wf.natsURL, "nats-url", url, "NATS URL of the daemon (env EDICT_NATS_URL)")
	fs.DurationVar(&wf.timeout, "timeout", 30*time.Second, "deadline of the whole command")
	fs.StringVar(&wf.class, "as", "", "class the request is sent as (X-Resource-Priority): interactive, orchestration, hydration or background_ingestion; empty means orchestration")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: edict work %s [flags]\n\n%s\n\nflags:\n", name, summary)
		fs.PrintDefaults()
	}
	return fs
}

// connect dials the daemon and returns a client and a context carrying the
// request class.
func (wf *workFlags) connect(ctx context.Context, stderr io.Writer) (*nats.Conn, *workitems.Client, context.Context, context.CancelFunc, bool) {
	if wf.class != "" {
		c, err := priority.Parse(wf.class)
		if err != nil {
			fmt.Fprintf(stderr, "edict work: --as: %v\n", err)
			return nil, nil, nil, nil, false
		}
		ctx = priority.With(ctx, c)
	}
	nc, err := nats.Connect(wf.natsURL, nats.Name("edict work"))
	if err != nil {
		fmt.Fprintf(stderr, "edict work: connect %s: %v\n", wf.natsURL, err)
		return nil, nil, nil, nil, false
	}
	cl, err := workitems.New(nc, workitems.Config{})
	if err != nil {
		nc.Close()
		fmt.Fprintf(stderr, "edict work: %v\n", err)
		return nil, nil, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, wf.timeout)
	return nc, cl, ctx, cancel, true
}

func workPrintJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(b))
}

func workSplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func workSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var wf workFlags
	fs := newWorkFlagSet("submit", "Queue one durable work item; prints {id, duplicate}.", stderr, &wf)
	typ := fs.String("type", "", "task type, one subject token such as conversation or codebase (required)")
	id := fs.String("id", "", "item id making the submit idempotent; empty lets the engine choose one")
	class := fs.String("class", "", "item class; empty means the task type's class (clamped to your ceiling)")
	tenant := fs.String("tenant", "", "tenant the item counts against for the per-tenant lease quota")
	payload := fs.String("payload", "null", "payload, any JSON value; @FILE reads it from FILE")
	maxAttempts := fs.Int("max-attempts", 0, "attempts before the item is dead-lettered; 0 means the engine default (3)")
	if err := fs.Parse(args); err != nil {
		return workParseExit(err)
	}
	if !workNoArgs(fs, stderr) {
		return 2
	}
	if *typ == "" {
		fmt.Fprintln(stderr, "edict work submit: --type is required")
		fs.Usage()
		return 2
	}
	body := []byte(*payload)
	if f, ok := strings.CutPrefix(*payload, "@"); ok {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(stderr, "edict work submit: %v\n", err)
			return 1
		}
		body = b
	}
	if !json.Valid(body) {
		fmt.Fprintln(stderr, "edict work submit: --payload is not valid JSON")
		return 2
	}
	it := workitems.Item{ID: *id, Type: *typ, Tenant: *tenant, Payload: body, MaxAttempts: *maxAttempts}
	if *class != "" {
		c, err := priority.Parse(*class)
		if err != nil {
			fmt.Fprintf(stderr, "edict work submit: --class: %v\n", err)
			return 2
		}
		it.Class = c
	}
	nc, cl, ctx, cancel, ok := wf.connect(ctx, stderr)
	if !ok {
		return 1
	}
	defer nc.Close()
	defer cancel()
	r, err := cl.Submit(ctx, it)
	if err != nil {
		fmt.Fprintf(stderr, "edict work submit: %v\n", err)
		return 1
	}
	workPrintJSON(stdout, map[string]any{"id": r.ID, "duplicate": r.Duplicate})
	return 0
}

func workClaim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var wf workFlags
	fs := newWorkFlagSet("claim", "Claim the next item, highest class first, and print it with its token.\nWithout --ack the lease stays held until it expires.", stderr, &wf)
	worker := fs.String("worker", "", "worker identity; empty means worker:<random>")
	classes := fs.String("classes", "", "comma-separated classes to claim from; empty means all")
	lanes := fs.String("lanes", "", "comma-separated lanes to claim from (queries, ingestion, …); empty means all")
	types := fs.String("types", "", "comma-separated task types to claim; empty means all")
	lease := fs.Duration("lease", 60*time.Second, "lease to ask for (the engine caps it at its AckWait, 60 s)")
	wait := fs.Duration("wait", 0, "long-poll up to this long for an item; 0 answers at once")
	ack := fs.Bool("ack", false, "acknowledge the item right after printing it")
	if err := fs.Parse(args); err != nil {
		return workParseExit(err)
	}
	if !workNoArgs(fs, stderr) {
		return 2
	}
	if *lease < 0 || *wait < 0 {
		fmt.Fprintln(stderr, "edict work claim: --lease and --wait must not be negative")
		return 2
	}
	req := workitems.ClaimRequest{Worker: *worker, Lanes: workSplitList(*lanes), Types: workSplitList(*types), Lease: *lease, Wait: *wait}
	for _, s := range workSplitList(*classes) {
		c, err := priority.Parse(s)
		if err != nil {
			fmt.Fprintf(stderr, "edict work claim: --classes: %v\n", err)
			return 2
		}
		req.Classes = append(req.Classes, c)
	}
	if *wait > 0 {
		wf.timeout += *wait
	}
	nc, cl, ctx, cancel, ok := wf.connect(ctx, stderr)
	if !ok {
		return 1
	}
	defer nc.Close()
	defer cancel()
	c, err := cl.Claim(ctx, req)
	if err != nil {
		fmt.Fprintf(stderr, "edict work claim: %v\n", err)
		return 1
	}
	if c == nil {
		workPrintJSON(stdout, map[string]any{"claimed": false})
		return 0
	}
	workPrintJSON(stdout, map[string]any{
		"claimed": true, "id": c.ID, "type": c.Type, "class": c.Class.String(), "tenant": c.Tenant,
		"payload": c.Payload, "attempt": c.Attempt, "max_attempts": c.MaxAttempts,
		"lease_expires_at": c.LeaseExpiresAt.UTC().Format(time.RFC3339Nano), "token": c.Token,
	})
	if *ack {
		if err := c.Ack(ctx); err != nil {
			fmt.Fprintf(stderr, "edict work claim: ack: %v\n", err)
			return 1
		}
	}
	return 0
}

func workStats(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var wf workFlags
	fs := newWorkFlagSet("stats", "Print queued, in-flight and dead items per class, and queued items per lane.", stderr, &wf)
	if err := fs.Parse(args); err != nil {
		return workParseExit(err)
	}
	if !workNoArgs(fs, stderr) {
		return 2
	}
	nc, cl, ctx, cancel, ok := wf.connect(ctx, stderr)
	if !ok {
		return 1
	}
	defer nc.Close()
	defer cancel()
	s, err := cl.Stats(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "edict work stats: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%-22s %8s %10s %8s\n", "class", "queued", "in_flight", "dead")
	for _, c := range priority.All {
		cs := s.Classes[c.String()]
		fmt.Fprintf(stdout, "%-22s %8d %10d %8d\n", c, cs.Queued, cs.InFlight, cs.Dead)
	}
	fmt.Fprintf(stdout, "\n%-22s %8s\n", "lane", "queued")
	for _, l := range priority.LaneNames() {
		fmt.Fprintf(stdout, "%-22s %8d\n", l, s.Lanes[l].Queued)
	}
	return 0
}

func workDead(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var wf workFlags
	fs := newWorkFlagSet("dead", "List dead letters (JSON, one page), or queue them again with --replay.", stderr, &wf)
	class := fs.String("class", "", "list only this class's dead letters")
	after := fs.String("after", "", "list the page after this cursor (the previous page's next)")
	limit := fs.Int("limit", 0, "page size, 1..1000; 0 means the engine default (100)")
	replay := fs.String("replay", "", "comma-separated item ids to queue again with fresh attempts")
	if err := fs.Parse(args); err != nil {
		return workParseExit(err)
	}
	if !workNoArgs(fs, stderr) {
		return 2
	}
	var cls priority.Class
	if *class != "" {
		c, err := priority.Parse(*class)
		if err != nil {
			fmt.Fprintf(stderr, "edict work dead: --class: %v\n", err)
			return 2
		}
		cls = c
	}
	nc, cl, ctx, cancel, ok := wf.connect(ctx, stderr)
	if !ok {
		return 1
	}
	defer nc.Close()
	defer cancel()
	if ids := workSplitList(*replay); len(ids) > 0 {
		n, err := cl.DeadReplay(ctx, ids)
		if err != nil {
			fmt.Fprintf(stderr, "edict work dead: replay: %v\n", err)
			return 1
		}
		workPrintJSON(stdout, map[string]any{"replayed": n})
		return 0
	}
	items, next, err := cl.DeadList(ctx, cls, *after, *limit)
	if err != nil {
		fmt.Fprintf(stderr, "edict work dead: %v\n", err)
		return 1
	}
	if items == nil {
		items = []workitems.DeadItem{}
	}
	workPrintJSON(stdout, map[string]any{"items": items, "next": next})
	return 0
}

// workNoArgs reports, with usage, a positional argument after the flags:
// the work subcommands take none, and a stray one (say a payload given
// without --payload) must not be dropped silently while the request runs.
func workNoArgs(fs *flag.FlagSet, stderr io.Writer) bool {
	if fs.NArg() == 0 {
		return true
	}
	fmt.Fprintf(stderr, "%s: unexpected argument %q (flags only)\n", fs.Name(), fs.Arg(0))
	fs.Usage()
	return false
}

// workParseExit maps a flag parse error to an exit code: 0 for --help, else 2.
func workParseExit(err error) int {
	if err == flag.ErrHelp {
		return 0
	}
	return 2
}
