package service

// The telemetry control plane (PROTOCOL.md §8, §10): telemetry channels
// created over the control socket, and samples pushed into push channels.
// docs/protocol-decisions.md, "Telemetry channels", records the decisions.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/telemetry"
)

// TelemetryRequest describes a telemetry channel for CreateTelemetry.
type TelemetryRequest struct {
	Kind     string
	ID       string
	Interval time.Duration // 0: the default
	Terminal string        // process: the terminal's URI
	Command  []string      // command
	Policy   string
	History  *time.Duration // nil: the default; ≤ 0: none
	// scrape (telemetry.ScrapeConfig's fields of the same names).
	URL        string
	Timeout    time.Duration
	MaxBytes   int64
	TokenFile  string // bearer token file
	Match      []string
	Labels     []string
	Histograms string
	Quantiles  []float64
}

// maxNameTries bounds the names tried for a channel created without an
// id (telemetryName): base, base-2, … base-N.
const maxNameTries = 100

// telemetryChannel is what the service needs of a telemetry.Channel.
type telemetryChannel interface {
	Publish([]telemetry.Sample) error
	Config() telemetry.Config
	Stats() telemetry.Stats
	SourceStatus() string
}

// CreateTelemetry creates a telemetry channel with the "telemetry"
// Creator. A process source samples the process tree of the terminal
// Terminal names; a scrape source's URL must pass the TCP allow-list,
// and its first scrape must succeed (it is waited for, within ctx and
// the scrape's timeout), or the channel is closed and the error returned.
// Without an ID the channel is named from its kind and source
// (telemetryName), and its title says what it samples.
func (s *Service) CreateTelemetry(ctx context.Context, r TelemetryRequest) (*registry.Channel, error) {
	if !slices.Contains(telemetry.Kinds, r.Kind) {
		return nil, argErr("kind", "%q: want system, process, command, push, daemon or scrape", r.Kind)
	}
	if r.Interval != 0 && (r.Kind == "push" || r.Kind == "command") {
		// Not ignored silently: the samples of these come when a producer
		// pushes them or the command prints them.
		return nil, argErr("interval", "a %s source has no interval: its samples come when they are %s", r.Kind, map[string]string{"push": "pushed", "command": "printed"}[r.Kind])
	}
	if r.Interval != 0 {
		if _, err := telemetry.CheckInterval(r.Interval); err != nil {
			return nil, argErr("interval", "%v", err)
		}
	}
	if _, err := telemetry.ParsePolicy(r.Policy); err != nil {
		return nil, argErr("policy", "%v", err)
	}
	spec := telemetry.Spec{Type: "telemetry", Kind: r.Kind, Interval: r.Interval, Policy: telemetry.Policy(r.Policy)}
	if r.History != nil {
		spec.History = *r.History
		if spec.History <= 0 {
			spec.History = -1
		}
	}
	switch r.Kind {
	case "process":
		if r.Terminal == "" {
			return nil, argErr("terminal", "a process source needs a terminal's URI")
		}
		ch, ok := s.registry.Get(r.Terminal)
		if !ok {
			return nil, fmt.Errorf("%w: %s", registry.ErrChannelNotFound, r.Terminal)
		}
		p, ok := ch.Impl().(terminalPider)
		if !ok || ch.Type != "terminal" {
			return nil, argErr("terminal", "%s is not a terminal", r.Terminal)
		}
		if !running(ch.Impl()) || p.Pid() <= 0 {
			return nil, fmt.Errorf("%w: %s", ErrNotRunning, r.Terminal)
		}
		spec.Pid = p.Pid()
		spec.Title = "processes of " + r.Terminal
	case "command":
		if len(r.Command) == 0 || r.Command[0] == "" {
			return nil, argErr("command", "a command source needs a command")
		}
		spec.Command = r.Command
		spec.Title = "command: " + truncate(strings.Join(r.Command, " "), 120)
	default:
		if r.Terminal != "" || len(r.Command) > 0 {
			return nil, argErr("kind", "a %s source takes neither a terminal nor a command", r.Kind)
		}
	}
	if r.Kind == "scrape" {
		spec.URL, spec.Timeout, spec.MaxBytes, spec.TokenFile, spec.Match, spec.Labels = r.URL, r.Timeout, r.MaxBytes, r.TokenFile, r.Match, r.Labels
		spec.Histograms, spec.Quantiles = telemetry.HistogramMode(r.Histograms), r.Quantiles
		if err := spec.ScrapeConfig(nil, 0, nil).Validate(); err != nil {
			if fe, ok := errors.AsType[*telemetry.FieldError](err); ok {
				return nil, argErr(fe.Field, "%s", fe.Msg)
			}
			return nil, err
		}
		u, _ := url.Parse(r.URL) // Validate parsed it
		spec.Title = "scrape of " + u.Redacted()
	} else if r.URL != "" || r.Timeout != 0 || r.MaxBytes != 0 || r.TokenFile != "" || len(r.Match) > 0 || len(r.Labels) > 0 || r.Histograms != "" || len(r.Quantiles) > 0 {
		return nil, argErr("kind", "only a scrape source takes a URL, timeout, max bytes, bearer token file, matchers, histograms or quantiles")
	}
	switch r.Kind {
	case "system":
		spec.Title = "system"
		if h, err := os.Hostname(); err == nil && h != "" {
			spec.Title = "system of " + h
		}
	case "push":
		spec.Title = "pushed samples"
	case "daemon":
		spec.Title = "ahpd's own figures"
	}
	params, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	create := func(id string) (*registry.Channel, error) {
		return s.createChannel("control", "telemetry", id, params, session.Owner{})
	}
	var ch *registry.Channel
	if r.ID != "" {
		ch, err = create(r.ID)
	} else {
		ch, err = s.createNamed(telemetryName(r), create)
	}
	if err != nil {
		return nil, err
	}
	if err := s.waitFirstScrape(ctx, ch); err != nil {
		_ = s.CloseChannel(ch.URI)
		return nil, err
	}
	return ch, nil
}

// createNamed creates a channel named base, or base-2, base-3, … when
// that is taken; a name another create takes meanwhile is tried again
// with the next one.
func (s *Service) createNamed(base string, create func(id string) (*registry.Channel, error)) (*registry.Channel, error) {
	for i := 1; i <= maxNameTries; i++ {
		id := base
		if i > 1 {
			id = fmt.Sprintf("%s-%d", base, i)
		}
		if _, taken := s.registry.Get(registry.Scheme("telemetry") + id); taken {
			continue
		}
		ch, err := create(id)
		if errors.Is(err, registry.ErrChannelExists) {
			continue
		}
		return ch, err
	}
	return nil, fmt.Errorf("%w: %s to %s-%d are all taken (give an id)", registry.ErrChannelExists, base, base, maxNameTries)
}

// waitFirstScrape waits for a scrape channel's first scrape and returns
// its error; nil for other sources.
func (s *Service) waitFirstScrape(ctx context.Context, ch *registry.Channel) error {
	src, ok := ch.Impl().(interface{ Source() telemetry.Source })
	if !ok {
		return nil
	}
	sc, ok := src.Source().(*telemetry.Scrape)
	if !ok {
		return nil
	}
	return sc.WaitFirst(ctx)
}

// telemetryName is the id of a channel created without one: its kind
// and source, e.g. system, process-of-shell, command-vmstat,
// scrape-127.0.0.1-9100 (an id has letters, digits, '-', '_' and '.'
// only: the port follows a '-').
func telemetryName(r TelemetryRequest) string {
	var src string
	switch r.Kind {
	case "process":
		src = "of-" + r.Terminal[strings.LastIndexByte(r.Terminal, '/')+1:]
	case "command":
		src = filepath.Base(r.Command[0])
	case "scrape":
		if u, err := url.Parse(r.URL); err == nil {
			src = u.Hostname()
			if p := u.Port(); p != "" {
				src += "-" + p
			}
		}
	}
	name := r.Kind
	if src = idSafe(src); src != "" {
		name += "-" + src
	}
	return name[:min(len(name), 100)] // ASCII
}

// idSafe replaces what a channel id may not hold with '-', runs of it
// with one, and trims it from the ends.
func idSafe(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// maxPublishSamples bounds the samples of one PublishTelemetry message.
const maxPublishSamples = 10_000

// PublishTelemetry publishes samples into the push channel uri; a sample
// without a time is stamped now. An invalid sample refuses the call
// (ArgError naming samples[i]); nothing of it is published.
func (s *Service) PublishTelemetry(uri string, samples []telemetry.Sample) error {
	if len(samples) > maxPublishSamples {
		return argErr("samples", "%d samples in one message, more than %d", len(samples), maxPublishSamples)
	}
	ch, ok := s.registry.Get(uri)
	if !ok {
		return fmt.Errorf("%w: %s", registry.ErrChannelNotFound, uri)
	}
	tc, ok := ch.Impl().(telemetryChannel)
	if !ok || tc.Config().Source != "push" {
		return fmt.Errorf("%w: %s is not a push telemetry channel", ErrUnsupported, uri)
	}
	now := time.Now()
	nowMs := telemetry.UnixMilli(now.Unix(), int64(now.Nanosecond()))
	for i := range samples {
		if samples[i].T == 0 {
			samples[i].T = nowMs
		}
	}
	// Publish checks every sample before it publishes any.
	if err := tc.Publish(samples); err != nil {
		if se, ok := errors.AsType[*telemetry.SampleError](err); ok {
			return argErr(fmt.Sprintf("samples[%d]", se.Index), "%v", se.Err)
		}
		return fmt.Errorf("%w: %s: %v", ErrNotRunning, uri, err)
	}
	return nil
}
