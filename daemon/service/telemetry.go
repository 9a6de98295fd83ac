package service

// The telemetry control plane (PROTOCOL.md §8, §10): telemetry channels
// created over the control socket, and samples pushed into push channels.
// docs/protocol-decisions.md, "Telemetry channels", records the decisions.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

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
}

// telemetryChannel is what the service needs of a telemetry.Channel.
type telemetryChannel interface {
	Publish([]telemetry.Sample) error
	Config() telemetry.Config
	Stats() telemetry.Stats
}

// CreateTelemetry creates a telemetry channel with the "telemetry"
// Creator. A process source samples the process tree of the terminal
// Terminal names.
func (s *Service) CreateTelemetry(ctx context.Context, r TelemetryRequest) (*registry.Channel, error) {
	if !slices.Contains(telemetry.Kinds, r.Kind) {
		return nil, argErr("kind", "%q: want system, process, command, push or daemon", r.Kind)
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
	default:
		if r.Terminal != "" || len(r.Command) > 0 {
			return nil, argErr("kind", "a %s source takes neither a terminal nor a command", r.Kind)
		}
	}
	params, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return s.createChannel("control", "telemetry", r.ID, params, session.Owner{})
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
