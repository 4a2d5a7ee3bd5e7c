package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/edictrt/edict/engine/protocol"
	"github.com/edictrt/edict/engine/service"
	"github.com/edictrt/edict/priority"
)

// runStatus prints the service stats of a running daemon: per-endpoint
// request counts and, per class, the requests in flight and shed.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("edict status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cl := addEngineClientFlags(fs, false)
	asJSON := fs.Bool("json", false, "print the raw $SRV.STATS reply")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: edict status [flags]

Prints the edict-engine service stats of a running daemon ($SRV.STATS over
NATS): requests and errors per op, requests in flight per class, requests
shed per class and reason, and reads admitted on the reserved read lane.

flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parseCommand(fs, args, stdout, stderr); !ok {
		return code
	}
	nc, err := cl.connect()
	if err != nil {
		fmt.Fprintf(stderr, "edict status: %v\n", err)
		return 1
	}
	defer nc.Close()
	rctx, cancel := context.WithTimeout(ctx, cl.timeout)
	defer cancel()
	m, err := nc.RequestWithContext(rctx, "$SRV.STATS."+protocol.ServiceName, nil)
	if err != nil {
		fmt.Fprintf(stderr, "edict status: no edict-engine answered: %v\n", err)
		return 1
	}
	if *asJSON {
		printJSON(stdout, m.Data)
		return 0
	}
	var st struct {
		micro.ServiceIdentity
		Started   time.Time `json:"started"`
		Endpoints []struct {
			Name        string               `json:"name"`
			NumRequests int                  `json:"num_requests"`
			NumErrors   int                  `json:"num_errors"`
			Data        service.EndpointData `json:"data"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(m.Data, &st); err != nil {
		fmt.Fprintf(stderr, "edict status: decode stats: %v\n", err)
		return 1
	}
	inFlight := map[string]int64{}
	shed := map[string]map[string]int64{}
	var lane int64
	maxInFlight := 0
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "service %s %s (id %s), up %s\n\n", st.Name, st.Version, st.ID, time.Since(st.Started).Round(time.Second))
	fmt.Fprintln(w, "endpoint\trequests\terrors")
	sort.Slice(st.Endpoints, func(i, j int) bool { return st.Endpoints[i].Name < st.Endpoints[j].Name })
	for _, ep := range st.Endpoints {
		if ep.NumRequests > 0 {
			fmt.Fprintf(w, "%s\t%d\t%d\n", ep.Name, ep.NumRequests, ep.NumErrors)
		}
		for c, n := range ep.Data.InFlight {
			inFlight[c] += n
		}
		for c, rs := range ep.Data.Shed {
			if shed[c] == nil {
				shed[c] = map[string]int64{}
			}
			for r, n := range rs {
				shed[c][r] += n
			}
		}
		lane += ep.Data.ReadLane
		maxInFlight = max(maxInFlight, ep.Data.MaxInFlight)
	}
	fmt.Fprintf(w, "\nclass\tin flight\tshed\n")
	for _, c := range priority.All {
		var total int64
		detail := ""
		for r, n := range shed[c.String()] {
			total += n
			detail += fmt.Sprintf(" %s=%d", r, n)
		}
		fmt.Fprintf(w, "%s\t%d\t%d%s\n", c, inFlight[c.String()], total, detail)
	}
	fmt.Fprintf(w, "\nreads admitted on the reserved lane: %d; max_in_flight %d\n", lane, maxInFlight)
	_ = w.Flush()
	return 0
}
