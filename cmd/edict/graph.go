package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/priority"
)

// engineClient holds the connection flags shared by the client
// subcommands (graph, kv, status).
type engineClient struct {
	url     string
	creds   string
	class   string
	timeout time.Duration
}

// addEngineClientFlags registers the shared client flags on fs; withClass
// adds --class (requests that pass through admission).
func addEngineClientFlags(fs *flag.FlagSet, withClass bool) *engineClient {
	c := &engineClient{}
	fs.StringVar(&c.url, "nats-url", envOr("EDICT_NATS_URL", nats.DefaultURL), "NATS URL of the running daemon (env EDICT_NATS_URL)")
	fs.StringVar(&c.creds, "nats-creds", os.Getenv("EDICT_NATS_CREDS"), "NATS credentials file; none for the embedded default (env EDICT_NATS_CREDS)")
	if withClass {
		fs.StringVar(&c.class, "class", envOr("EDICT_CLASS", "interactive"),
			"priority class sent in X-Resource-Priority: interactive, orchestration, hydration or background_ingestion; "+
				"the daemon may clamp it lower for your principal (env EDICT_CLASS)")
	}
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "request timeout (env EDICT_TIMEOUT)")
	if d, err := time.ParseDuration(os.Getenv("EDICT_TIMEOUT")); err == nil {
		c.timeout = d
	}
	return c
}

// connect opens the NATS connection.
func (c *engineClient) connect() (*nats.Conn, error) {
	if c.class != "" {
		if _, err := priority.Parse(c.class); err != nil {
			return nil, fmt.Errorf("bad --class: %w", err)
		}
	}
	opts := []nats.Option{nats.Name("edict-cli")}
	if c.creds != "" {
		opts = append(opts, nats.UserCredentials(c.creds))
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w (is edict serve running? set --nats-url or EDICT_NATS_URL)", c.url, err)
	}
	return nc, nil
}

// helpRequested reports whether args ask for help: "help" as the first
// argument, or -h, -help or --help before a "--".
// parseCommand parses the flags of a command that takes no positional
// arguments. Asked-for help goes to stdout. It returns ok false with the exit
// code when the command must stop: 0 after help, 2 on bad usage.
func parseCommand(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if helpRequested(args) {
		fs.SetOutput(stdout)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

// showSubcommandHelp prints usage and the flags to stdout when args is empty
// or asks for help; handled reports that, with the exit code (2 when no
// subcommand was given, 0 for asked-for help).
func showSubcommandHelp(fs *flag.FlagSet, args []string, usage string, stdout io.Writer) (code int, handled bool) {
	if len(args) != 0 && !helpRequested(args) {
		return 0, false
	}
	fs.SetOutput(stdout)
	fmt.Fprint(stdout, usage)
	fs.PrintDefaults()
	if len(args) == 0 {
		return 2, true
	}
	return 0, true
}

func helpRequested(args []string) bool {
	if len(args) > 0 && args[0] == "help" {
		return true
	}
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// checkGraph reports a --graph value that is not a graph name.
func checkGraph(stderr io.Writer, name, graph string) bool {
	if protocol.ValidName(graph) {
		return true
	}
	fmt.Fprintf(stderr, "%s: bad --graph %q: want 1 to 128 of A-Z a-z 0-9 _ -\n", name, graph)
	return false
}

// engineError is an error reply of the engine.
type engineError struct {
	code string
	text string
}

func (e *engineError) Error() string {
	if e.text == "" {
		return "engine error " + e.code
	}
	return "engine error " + e.code + ": " + e.text
}

// call sends body (marshalled as JSON) to subject and returns the reply
// body, or an *engineError.
func (c *engineClient) call(ctx context.Context, nc *nats.Conn, subject string, body any) ([]byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(priority.Header, c.class)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	m, err := nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("no engine answers on %s (is edict serve running, and is the op spelled right?)", subject)
	}
	if err != nil {
		return nil, err
	}
	if code := m.Header.Get(protocol.HeaderErrorCode); code != "" {
		return nil, &engineError{code: code, text: m.Header.Get(protocol.HeaderError)}
	}
	return m.Data, nil
}

// printJSON writes data indented.
func printJSON(w io.Writer, data []byte) {
	var buf bytes.Buffer
	if json.Indent(&buf, data, "", "  ") != nil {
		buf.Reset()
		buf.Write(data)
	}
	buf.WriteByte('\n')
	_, _ = w.Write(buf.Bytes())
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

const graphUsage = `usage: edict graph <put|get|delete|neighbors|traverse> [flags] ID

Graph operations on a running daemon (edict.eg.<graph>.<op> over NATS):
  put ID        upsert node ID (--label, repeatable; --props JSON object)
  get ID        print node ID
  delete ID     delete node ID and its edges
  neighbors ID  print ID's edges (--dir out|in|both, --type, --limit)
  traverse ID   breadth-first walk from ID (--depth, --type repeatable, --limit)

flags:
`

// runGraph runs "edict graph <sub>".
func runGraph(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("edict graph", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cl := addEngineClientFlags(fs, true)
	graph := fs.String("graph", envOr("EDICT_GRAPH", protocol.DefaultGraph), "graph name (env EDICT_GRAPH)")
	var labels, types stringList
	fs.Var(&labels, "label", "put: a label of the node; repeatable")
	props := fs.String("props", "{}", "put: the node's properties, a JSON object")
	dir := fs.String("dir", "out", "neighbors: out, in or both")
	fs.Var(&types, "type", "neighbors: the edge type to follow; traverse: an edge type to follow, repeatable (default all)")
	depth := fs.Int("depth", 1, "traverse: hops from ID")
	limit := fs.Int("limit", 0, "neighbors, traverse: most results (0: the engine's default)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), graphUsage); fs.PrintDefaults() }
	if code, handled := showSubcommandHelp(fs, args, graphUsage, stdout); handled {
		return code
	}
	sub := args[0]
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "edict graph %s: want exactly one node ID (edict graph --help)\n", sub)
		return 2
	}
	if !checkGraph(stderr, "edict graph "+sub, *graph) {
		return 2
	}
	id := pos[0]
	var op string
	var body any
	switch sub {
	case "put":
		if !json.Valid([]byte(*props)) {
			fmt.Fprintln(stderr, "edict graph put: --props is not JSON")
			return 2
		}
		if labels == nil {
			labels = stringList{}
		}
		op, body = "node_put", map[string]any{"id": id, "labels": labels, "props": json.RawMessage(*props)}
	case "get":
		op, body = "node_get", map[string]any{"id": id}
	case "delete":
		op, body = "node_delete", map[string]any{"id": id}
	case "neighbors":
		b := map[string]any{"id": id, "dir": *dir, "limit": *limit}
		if len(types) > 0 {
			b["type"] = types[0]
		}
		op, body = "neighbors", b
	case "traverse":
		b := map[string]any{"from": id, "depth": *depth, "limit": *limit}
		if len(types) > 0 {
			b["types"] = types
		}
		op, body = "traverse", b
	default:
		fmt.Fprintf(stderr, "edict graph: unknown subcommand %q\n\n%s", sub, graphUsage)
		return 2
	}
	return clientDo(ctx, cl, stdout, stderr, "edict graph "+sub, protocol.GraphPrefix+*graph+"."+op, body, nil)
}

// clientDo connects, sends one request and prints its reply (through out
// when set, else as indented JSON).
func clientDo(ctx context.Context, cl *engineClient, stdout, stderr io.Writer, name, subject string, body any, out func([]byte) error) int {
	nc, err := cl.connect()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	defer nc.Close()
	data, err := cl.call(ctx, nc, subject, body)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if out != nil {
		if err := out(data); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		return 0
	}
	printJSON(stdout, data)
	return 0
}

// parseInterspersed parses args with fs, allowing flags after positional
// arguments ("put bob --label L"), and returns the positional arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
