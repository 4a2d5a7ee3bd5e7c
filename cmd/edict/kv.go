package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/edictrt/edict/engine/protocol"
)

const kvUsage = `usage: edict kv get [flags] NS KEY
       edict kv put [flags] NS KEY VALUE

Key-value operations on a running daemon (edict.eg.<graph>.kv_* over NATS).
Namespaces are private to the caller's principal.
  get NS KEY          print the value: its raw bytes when standard output is
                      a pipe or file, followed by a newline on a terminal
  put NS KEY VALUE    store VALUE; "-" reads it from standard input

An absent key is reported on standard error with exit status 1.

examples:
  edict kv put prefs theme dark
  edict kv get prefs theme
  edict kv put blobs logo - < logo.png

flags:
`

// runKV runs "edict kv <sub>".
func runKV(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("edict kv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cl := addEngineClientFlags(fs, true)
	graph := fs.String("graph", envOr("EDICT_GRAPH", protocol.DefaultGraph), "graph name (env EDICT_GRAPH)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), kvUsage); fs.PrintDefaults() }
	if code, handled := showSubcommandHelp(fs, args, kvUsage, stdout); handled {
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
	name := "edict kv " + sub
	if sub != "get" && sub != "put" {
		fmt.Fprintf(stderr, "edict kv: unknown subcommand %q\n\n%s", sub, kvUsage)
		return 2
	}
	if !checkGraph(stderr, name, *graph) {
		return 2
	}
	subject := protocol.GraphPrefix + *graph + "."
	switch sub {
	case "get":
		if len(pos) != 2 {
			fmt.Fprintln(stderr, "edict kv get: want NS KEY (edict kv --help)")
			return 2
		}
		return clientDo(ctx, cl, stdout, stderr, name, subject+"kv_get", map[string]string{"ns": pos[0], "key": pos[1]}, func(data []byte) error {
			var r struct {
				Value []byte `json:"value"`
			}
			if err := json.Unmarshal(data, &r); err != nil {
				return err
			}
			if _, err := stdout.Write(r.Value); err != nil {
				return err
			}
			// A person at a terminal gets their prompt back on its own
			// line; a pipe or file gets the value's bytes unchanged.
			if isTerminal(stdout) && !bytes.HasSuffix(r.Value, []byte("\n")) {
				_, err := io.WriteString(stdout, "\n")
				return err
			}
			return nil
		})
	case "put":
		if len(pos) != 3 {
			fmt.Fprintln(stderr, "edict kv put: want NS KEY VALUE (edict kv --help)")
			return 2
		}
		value := []byte(pos[2])
		if pos[2] == "-" {
			var err error
			if value, err = io.ReadAll(stdinReader()); err != nil {
				fmt.Fprintf(stderr, "edict kv put: %v\n", err)
				return 1
			}
		}
		return clientDo(ctx, cl, stdout, stderr, name, subject+"kv_put", map[string]any{"ns": pos[0], "key": pos[1], "value": value}, func([]byte) error { return nil })
	}
	fmt.Fprintf(stderr, "edict kv: unknown subcommand %q\n\n%s", sub, kvUsage)
	return 2
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// stdinReader returns the process's standard input.
func stdinReader() io.Reader { return os.Stdin }
