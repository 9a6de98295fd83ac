package ctl

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ahp-dev/ahpd/internal/units"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// The telemetry verbs (PROTOCOL.md §8, §10): telemetry channels created
// over the control socket, and samples pushed into push channels
// (telemetry_push.go; the line parser is internal/samples, shared with
// the daemon's command sources, since ahpctl may not import package
// telemetry: internal/deptest).

func telemetryCommand() *command {
	return &command{name: "telemetry", summary: "Create telemetry channels and push samples into them", sub: []*command{
		{name: "create", args: "--kind KIND [-- CMD [ARG...]]", summary: "Create a telemetry channel and print its URI", maxArgs: -1, rawTail: true, setup: setupTelemetryCreate,
			help: `KIND is the source: system (this host's CPU per core and total, memory, load,
network and disk rates), process (the process tree of --terminal URI: CPU, RSS,
threads, the foreground command), command (CMD's stdout lines are samples,
"name value [k=v...]" or one JSON object per line; restarted when it exits),
push (fed over the control socket), daemon (ahpd's own figures) or scrape (a
Prometheus/OpenMetrics endpoint, --url, read every --interval: gauges as they
are, counters as per-second rates NAME_per_second, histograms and summaries as
--quantiles or as rates of their _sum and _count, --histograms; plus
scrape_up and scrape_duration_seconds). A scrape's host and port must pass the
TCP allow-list (ahpctl tcp allow HOST:PORT); create waits for the first scrape
and fails if it does (refused, --scrape-timeout, a body over --max-bytes).
Without --id a channel is named from its kind and source: system,
process-of-shell, command-vmstat, scrape-127.0.0.1-9100 (-2, -3, ... if taken).
A viewer that falls behind gets telemetry/dropped in place of the batches its
queue could not hold; --policy chooses which: drop-oldest (default),
drop-newest or coalesce-latest-per-series. A new viewer first gets the last
--history of samples (default 60s; 0 for none).`,
			examples: []string{"ahpctl telemetry create --kind system --interval 250ms", "ahpctl telemetry create --kind process --terminal ahp-terminal:/1", "ahpctl telemetry create --kind command --id temp -- sh -c 'while sleep 1; do echo temp $(cat /sys/class/thermal/thermal_zone0/temp); done'", "ahpctl telemetry create --kind push --id build --policy coalesce-latest-per-series",
				"ahpctl tcp allow 127.0.0.1:9100 && ahpctl telemetry create --kind scrape --url http://127.0.0.1:9100/metrics --match 'node_cpu_.*' --label mode!=idle"}},
		{name: "push", args: "URI", summary: "Send samples from stdin lines to a push telemetry channel", minArgs: 1, maxArgs: 1, complete: "channel", setup: setupTelemetryPush,
			help: pushHelp,
			examples: []string{"echo 'build_seconds 12.5 target=linux' | ahpctl telemetry push ahp-telemetry:/build",
				"vmstat -n 1 | awk 'NR>2 {print \"vm_free_kib\", $4; fflush()}' | ahpctl telemetry push ahp-telemetry:/vm",
				"seq 1000000 | awk '{print \"n\", $1, \"host=a\"}' | ahpctl telemetry push --quiet ahp-telemetry:/load",
				"ahpctl telemetry push $(ahpctl telemetry create --kind push --id build) < samples.txt"}},
	}}
}

func setupTelemetryCreate(fs *flag.FlagSet) action {
	kind := fs.String("kind", "", "the source `KIND`: system, process, command, push, daemon or scrape (required)")
	id := fs.String("id", "", "channel `ID` (letters, digits, - _ .); default: from the kind and source, e.g. system, scrape-127.0.0.1-9100")
	interval := fs.Duration("interval", 0, "sampling `INTERVAL` of system, process, daemon and scrape sources (default 1s, at least 10ms)")
	scrapeURL := fs.String("url", "", "scrape: the metrics endpoint `URL`, e.g. http://127.0.0.1:9100/metrics (its HOST:PORT must be allowed: ahpctl tcp allow)")
	scrapeTimeout := fs.Duration("scrape-timeout", 0, "scrape: the `TIMEOUT` of one scrape (default the interval, at most 10s; never longer than the interval)")
	tokenFile := fs.String("bearer-token-file", "", "scrape: a `FILE` whose one line is sent as Authorization: Bearer, read by the daemon at each scrape (over http:// only to a loopback host)")
	maxBytes := fs.String("max-bytes", "", "scrape: the cap on a response body, e.g. 8MiB (default 4MiB, at most 64MiB)")
	var match, labels stringList
	fs.Var(&match, "match", "scrape: keep the metric families whose name this anchored `REGEX` matches (repeatable: any)")
	fs.Var(&labels, "label", "scrape: keep the series whose labels match `NAME=V`, NAME!=V, NAME=~RE or NAME!~RE (repeatable: all)")
	histograms := fs.String("histograms", "", "scrape: histograms and summaries as quantiles (default), rates (of _sum and _count) or both")
	quantiles := fs.String("quantiles", "", "scrape: the quantiles kept, e.g. 0.5,0.99 (default 0.5,0.9,0.99)")
	terminal := fs.String("terminal", "", "the terminal `URI` whose processes a process source samples")
	policy := fs.String("policy", "", "what a viewer's full queue drops: drop-oldest (default), drop-newest, coalesce-latest-per-series")
	history := fs.String("history", "", "how far back a new viewer's replay goes, e.g. 30s (default 60s; 0: none)")
	return func(ctx context.Context, a *app, args []string) error {
		if *kind == "" {
			return usagef("telemetry create: --kind is required (system, process, command, push, daemon or scrape)")
		}
		if *kind == "scrape" && *scrapeURL == "" {
			return usagef("telemetry create: --kind scrape needs --url, e.g. --url http://127.0.0.1:9100/metrics")
		}
		if *kind == "command" && len(args) == 0 {
			return usagef("telemetry create: --kind command needs a command after --")
		}
		if *kind != "command" && len(args) > 0 {
			return usagef("telemetry create: only --kind command takes a command, got %q", args[0])
		}
		term := *terminal
		if term != "" {
			var err error
			if term, err = a.channelURIOf(ctx, term, "terminal"); err != nil {
				return err
			}
		}
		req := &ahpv1.CreateTelemetryRequest{Kind: *kind, Id: *id, Terminal: term, Command: args, Policy: *policy,
			Url: *scrapeURL, Match: match, Labels: labels, Histograms: *histograms}
		if *interval != 0 {
			req.Interval = durationpb.New(*interval)
		}
		if *scrapeTimeout != 0 {
			req.Timeout = durationpb.New(*scrapeTimeout)
		}
		if *tokenFile != "" {
			// The daemon reads it: a path relative to here means nothing there.
			abs, err := filepath.Abs(*tokenFile)
			if err != nil {
				return usagef("telemetry create: --bearer-token-file %q: %v", *tokenFile, err)
			}
			req.BearerTokenFile = abs
		}
		if *maxBytes != "" {
			n, err := units.ParseSize(*maxBytes)
			if err != nil || n <= 0 {
				return usagef("telemetry create: --max-bytes %q: want a size such as 8MiB", *maxBytes)
			}
			req.MaxBytes = n
		}
		if *quantiles != "" {
			for f := range strings.SplitSeq(*quantiles, ",") {
				q, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
				if err != nil {
					return usagef("telemetry create: --quantiles %q: %q is not a number", *quantiles, f)
				}
				req.Quantiles = append(req.Quantiles, q)
			}
		}
		if *history != "" {
			d, err := time.ParseDuration(*history)
			if *history == "0" {
				d, err = 0, nil
			}
			if err != nil {
				return usagef("telemetry create: --history %q: %v", *history, err)
			}
			req.History = durationpb.New(d)
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		if *kind == "scrape" {
			// The daemon answers once the first scrape is done: allow for it.
			var cancel2 context.CancelFunc
			rctx, cancel2 = context.WithTimeout(ctx, a.timeout+max(*scrapeTimeout, scrapeTimeoutMax))
			defer cancel2()
		}
		res, err := c.telemetry.CreateTelemetry(rctx, req)
		if msg, ok := connectFailed(err); ok {
			return fmt.Errorf("telemetry create: %s", msg) // the message names the URL
		}
		if err != nil {
			return telemetryUsage(err)
		}
		fmt.Fprintln(a.stdout, res.Channel.Uri)
		return nil
	}
}

// scrapeTimeoutMax is the daemon's longest default scrape timeout,
// telemetry.DefaultScrapeTimeout (ctl does not import telemetry: deptest).
const scrapeTimeoutMax = 10 * time.Second

// telemetryUsage turns the daemon's INVALID_ARGUMENT into bad usage (exit
// 2), naming the field.
func telemetryUsage(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return err
	}
	msg := st.Message()
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
			msg = br.FieldViolations[0].Field + ": " + br.FieldViolations[0].Description
		}
	}
	return usagef("telemetry create: %s", msg)
}
