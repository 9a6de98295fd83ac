package daemon

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
	"github.com/ahp-dev/ahpd/pty/record"
	"github.com/ahp-dev/ahpd/tcp"
	"github.com/ahp-dev/ahpd/telemetry"
)

// The channel kinds the daemon serves. Each implements flow.Channel and
// its subscribers flow.Subscriber; the connection code knows none of them.
var (
	_ flow.Channel = (*pty.Terminal)(nil)
	_ flow.Channel = (*tcp.Channel)(nil)
	_ flow.Channel = (*telemetry.Channel)(nil)
)

// tcpDialTimeout bounds a TCP channel's dial (PROTOCOL.md §8: 10 s).
const tcpDialTimeout = 10 * time.Second

// newTCPChannel is the "tcp" Creator (subscribe {create:{type:"tcp", host,
// port}} and the control plane's CreateTCP): it checks the target against
// the service's allow-list and starts dialing, without waiting. The
// channel reads tcpRetain from the limits in force when its consumer
// leaves, and tcpMaxRetainedBytes when it starts a message; its journal
// counts in budget (its creator's token's, or the daemon's total).
func newTCPChannel(svc *service.Service, params json.RawMessage, budget *flow.Budget, log *slog.Logger) (flow.Channel, error) {
	host, port, err := tcp.ParseCreate(params)
	if err != nil {
		return nil, err
	}
	c, err := tcp.Create(tcpConfig(svc, host, port, budget, log))
	if err != nil {
		return nil, err // not a nil *tcp.Channel in a flow.Channel
	}
	return c, nil
}

// tcpConfig is the tcp.Config of a channel to host:port whose journal
// counts in budget (newTCPChannel, and tcp.Adopt at an upgrade in place).
func tcpConfig(svc *service.Service, host string, port uint16, budget *flow.Budget, log *slog.Logger) tcp.Config {
	return tcp.Config{
		Host: host, Port: port, Allow: svc.TCPAllowList(), DialTimeout: tcpDialTimeout,
		Retain:      func() time.Duration { return svc.Limits().TCPRetain },
		Budget:      budget,
		MaxRetained: func() int64 { return svc.Limits().TCPMaxRetainedBytes },
		Logger:      log,
	}
}

// newPTYTerminal is the default TerminalFactory (with the server's pacer):
// a real PTY with the host's VT emulator (package pty), whose viewers
// maxViewers (maxViewersPerTerminal, read at each attach) bounds, and
// which records into recordings when its spec says so.
func newPTYTerminal(spec service.TerminalSpec, backlog int64, log *slog.Logger, pacer *pty.Pacer, maxViewers func() int, recordings *record.Store) (flow.Channel, error) {
	cfg := ptyConfig(spec, backlog, log, pacer, maxViewers)
	// Recorded from its first byte (docs/recording.md): the service has
	// checked the mode and that there is a store.
	if m, err := record.ParseMode(spec.Record); err == nil && m != record.Off && recordings != nil {
		cfg.Record, cfg.Recordings = m, recordings
	}
	t, err := pty.Start(cfg)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ptyConfig is the pty.Config of a terminal of spec (newPTYTerminal, and
// Adopt at an upgrade in place).
func ptyConfig(spec service.TerminalSpec, backlog int64, log *slog.Logger, pacer *pty.Pacer, maxViewers func() int) pty.Config {
	return pty.Config{
		Command:       spec.Command,
		Env:           spec.Env,
		Dir:           spec.Dir,
		Rows:          spec.Rows,
		Cols:          spec.Cols,
		Scrollback:    spec.Scrollback,
		ViewerBacklog: int(backlog),
		// Input the host has credited must not be refused: this covers
		// several viewers each sending a full host window (256 KiB UTF-16,
		// up to 384 KiB of UTF-8, plus one message) at once.
		InputQueue: 4 << 20,
		Logger:     log,
		Pacer:      pacer,
		MaxViewers: maxViewers,
		Channel:    spec.ID,
	}
}

// newTelemetryChannel is the "telemetry" Creator (the control plane's
// CreateTelemetry; a subscribe may not create one, since a command source
// runs a program): a telemetry.Channel with the source its spec names.
// figures gives a "daemon" source its callback, the daemon's own figures; maxSeries
// is telemetryMaxSeries when the channel is created; a "scrape" source's
// target must pass allow, the TCP channels' allow-list.
func newTelemetryChannel(params json.RawMessage, figures func() func(now time.Time) []telemetry.Sample, maxSeries int, allow telemetry.Allower, log *slog.Logger) (flow.Channel, error) {
	return telemetryChannel(params, figures, maxSeries, allow, log, nil)
}

// telemetryChannel is newTelemetryChannel carrying on a frozen channel
// (telemetry.Channel.Freeze) when restore is not nil: an upgrade in
// place. Its history and seq go on; a command source adopts the child
// that runs on and reads on from its pipe; other sources start anew. If
// it fails, what restore hands over is discarded (the child killed).
func telemetryChannel(params json.RawMessage, figures func() func(now time.Time) []telemetry.Sample, maxSeries int, allow telemetry.Allower, log *slog.Logger, restore *telemetry.Frozen) (_ flow.Channel, err error) {
	defer func() {
		if err != nil && restore != nil {
			restore.Discard()
		}
	}()
	spec, err := telemetry.ParseSpec(params)
	if err != nil {
		return nil, err
	}
	log = log.With("telemetry", spec.Kind)
	var src telemetry.Source
	switch spec.Kind {
	case "system":
		if src, err = telemetry.NewSystem(telemetry.SystemConfig{Interval: spec.Interval}); err != nil {
			return nil, err
		}
	case "process":
		if src, err = telemetry.NewProcess(spec.Pid, spec.Interval, ""); err != nil {
			return nil, err
		}
	case "command":
		if src, err = telemetry.NewCommand(telemetry.CommandConfig{Command: spec.Command, Logger: log}); err != nil {
			return nil, err
		}
	case "daemon":
		src = telemetry.Func{Interval: spec.Interval, Collect: figures()}
	case "scrape":
		if src, err = telemetry.NewScrape(spec.ScrapeConfig(allow, maxSeries, log)); err != nil {
			return nil, err
		}
	}
	cfg := telemetry.Config{Source: spec.Kind, Title: spec.Title, History: spec.History, Policy: spec.Policy, MaxSeries: maxSeries, Logger: log}
	var c *telemetry.Channel
	if restore != nil {
		f := *restore
		restore = nil // NewRestored ends the child itself if it fails
		c, err = telemetry.NewRestored(cfg, src, f)
	} else {
		c, err = telemetry.New(cfg, src)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}
