package daemon

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/metrics"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
	"github.com/ahp-dev/ahpd/pty/record"
	"github.com/ahp-dev/ahpd/tcp"
)

// RecordingsDir is the state directory's subdirectory of recordings.
const RecordingsDir = "recordings"

// Version is the daemon's version, set at link time.
var Version = "dev"

// Options are the daemon's collaborators; zero fields take defaults.
type Options struct {
	Logger *slog.Logger
	// Tokens overrides loading admin.token from the state dir.
	Tokens *auth.Tokens
	// NewTerminal overrides the PTY-backed terminal factory.
	NewTerminal service.TerminalFactory
	// Busy, when set, is called while a push producer streams fast
	// (service.Options.Busy); ahpd gives itself a second P then
	// (internal/procs).
	Busy func()
	// Creators are the channel kinds a subscribe may create, by type
	// (PROTOCOL.md §8: subscribe {create:{type, ...}}), added to the
	// table New builds, whose entries they replace (New's table has "tcp";
	// terminals come from the control plane).
	Creators map[string]service.Creator
	// ConfigFile is the config file the daemon loaded, whose tcpAllow key
	// `ahpctl tcp deny` rewrites when it removes one of its rules: "" when
	// none was found, "none" for --config none. `ahpctl tcp allow` keeps
	// its rules in the state directory (service.TCPStateFileName), never
	// in a config file.
	ConfigFile string
	// TLS, when set, makes the HTTP listener serve HTTPS and WSS only
	// (session.Options.TLS).
	TLS *tls.Config
	// Started is when the daemon started, sent in initialize
	// (server.started) so that a page reconnecting after a restart knows
	// its channels are new ones; zero: the time New runs.
	Started time.Time
}

// Server is ahpd wired together: the Service (channels, limits, tokens,
// events and the control plane's logic; its methods are the Server's) and
// the viewer session on the HTTP listener, which it serves as its Host.
type Server struct {
	*service.Service
	sess   *session.Server
	memory *memoryReturner // gives free memory back after channels and connections end
	tokens *auth.Tokens
	log    *slog.Logger
	// recordings is the store terminals record into (nil when its
	// directory could not be opened and recording is off by default);
	// Serve closes it after the channels.
	recordings *record.Store
	// recorded holds the recording modes of the terminals at an upgrade
	// in place (Serve, for HandOverChannels), by URI.
	recorded map[string]string
	// adopt carries on a terminal handed over at an upgrade in place with
	// the settings newPTYTerminal gives a new one (AdoptChannels).
	adopt func(ht handedTerminal, master *os.File, state []byte) (*pty.Terminal, error)
}

// Compile-time checks of the wiring.
var (
	_ session.Host    = (*service.Service)(nil)
	_ service.Viewers = (*session.Server)(nil)
)

// New validates cfg and builds a Server. It creates the state directory
// and admin token if needed.
func New(cfg config.Config, opts Options) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	tokens := opts.Tokens
	if tokens == nil {
		t, path, err := auth.LoadTokens(cfg.StateDir)
		if err != nil {
			return nil, err
		}
		log.Debug("admin token", "path", path)
		t.SetLogger(log)
		tokens = t
	}
	started := opts.Started
	if started.IsZero() {
		started = time.Now()
	}
	s := &Server{memory: newMemoryReturner(), tokens: tokens, log: log}
	// Recordings live in the state directory (docs/recording.md); opening
	// the store evicts the oldest beyond recordingsMaxTotalBytes.
	// A daemon whose state directory does not exist (its tokens given by
	// the program that embeds it) creates none for recordings unless
	// record is on.
	recDir := filepath.Join(cfg.StateDir, RecordingsDir)
	if _, serr := os.Stat(cfg.StateDir); serr == nil || cfg.Record != "off" {
		store, err := record.OpenStore(recDir, service.RecordLimits(cfg.Limits), log.With("recordings", recDir))
		switch {
		case err != nil && cfg.Record != "off":
			return nil, fmt.Errorf("recordings (record = %q): %w", cfg.Record, err)
		case err != nil:
			log.Warn("recordings directory unusable: terminals cannot be recorded", "dir", recDir, "err", err)
		default:
			s.recordings = store
		}
	}
	// The daemon's terminals share its CPU: typing into one takes
	// precedence over a flood in another (pty.Pacer).
	var pacer *pty.Pacer
	if !cfg.NoTypingFirst {
		pacer = &pty.Pacer{}
	}
	maxViewers := func() int { return s.Service.Limits().MaxViewersPerTerminal }
	nt := opts.NewTerminal
	if nt == nil {
		nt = func(spec service.TerminalSpec, backlog int64, log *slog.Logger) (flow.Channel, error) {
			return newPTYTerminal(spec, backlog, log, pacer, maxViewers, s.recordings)
		}
	}
	s.adopt = func(ht handedTerminal, master *os.File, state []byte) (*pty.Terminal, error) {
		spec := service.TerminalSpec{ID: ht.ID, Command: ht.Command, Env: ht.Env, Dir: ht.Dir, Scrollback: ht.Scrollback}
		cfg := ptyConfig(spec, s.Service.Limits().TerminalViewerBacklog, log, pacer, maxViewers)
		// Recorded before the upgrade: a new file from the adoption on.
		if m, err := record.ParseMode(ht.Record); err == nil && m != record.Off && s.recordings != nil {
			cfg.Record, cfg.Recordings = m, s.recordings
		}
		return pty.Adopt(cfg, master, ht.Pid, state)
	}
	// Every connection's memory counts in the daemon's total; a TCP
	// channel the control plane created counts its journal there too.
	total := flow.NewBudget(cfg.MaxTotalBufferedBytes)
	creators := map[string]service.Creator{
		"tcp": func(params json.RawMessage, owner session.Owner) (flow.Channel, error) {
			if owner.Budget == nil {
				owner.Budget = total
			}
			return newTCPChannel(s.Service, params, owner.Budget, log)
		},
		"telemetry": func(params json.RawMessage, _ session.Owner) (flow.Channel, error) {
			return newTelemetryChannel(params, s.daemonFigures, s.Service.Limits().TelemetryMaxSeries, s.Service.TCPAllowList(), log)
		},
	}
	for typ, c := range opts.Creators {
		creators[typ] = c
	}
	checkers := map[string]service.Checker{
		"tcp": func(params json.RawMessage) error {
			host, port, err := tcp.ParseCreate(params)
			if err == nil {
				_, err = tcp.Admit(s.Service.TCPAllowList(), host, port)
			}
			return err
		},
	}
	s.Service = service.New(service.Options{
		Config: cfg, Version: Version, Log: log, Tokens: tokens, NewTerminal: nt, Creators: creators, Checkers: checkers,
		ChannelClosed: s.memory.soon, Busy: opts.Busy, TCPAllow: tcp.NewAllowList(cfg.TCPAllow), ConfigFile: opts.ConfigFile,
		TCPStateFile: filepath.Join(cfg.StateDir, service.TCPStateFileName),
		Recordings:   s.recordings,
	})
	s.sess = session.New(session.Options{
		Config: cfg, Version: Version, Started: started, Log: log, Tokens: tokens, Registry: s.Registry(), Events: s.Events(),
		Budget: total, Host: s.Service,
		Metrics:   metrics.Handler(s.Service, metrics.Options{Version: Version, Public: cfg.MetricsPublic, MemoryReturns: s.memory.Returns}),
		ConnEnded: s.memory.soon,
		TLS:       opts.TLS,
	})
	s.SetViewers(s.sess)
	return s, nil
}

// PrepareUpgrade makes the coming end of Serve (its ctx cancelled) an
// upgrade in place: connections close with 1012 "host upgrading", and
// Serve closes the TCP channels; HandOverChannels then hands over the
// terminals and telemetry channels.
func (s *Server) PrepareUpgrade() { s.sess.Upgrading() }

// Session is the viewer side: the HTTP handler and the connections.
func (s *Server) Session() *session.Server { return s.sess }

// Handler returns the HTTP handler: /v1/ws, /healthz, /metrics and the
// web page.
func (s *Server) Handler() http.Handler { return s.sess.Handler() }

// Serve serves HTTP on ln until ctx is cancelled, then shuts down: every
// connection closes with 1001, terminals are hung up, and Serve returns
// within the shutdown timeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, s.BeginShutdown)
	defer stop()
	var drops sync.WaitGroup
	if s.recordings != nil {
		dctx, cancel := context.WithCancel(ctx)
		defer func() { cancel(); drops.Wait() }()
		drops.Go(func() {
			watchRecordings(dctx, recordingCheck, func() int64 { return s.recordings.Stats().DroppedBytes }, s.SyncRecordings, s.Events())
		})
	}
	err := s.sess.Serve(ctx, ln)
	if s.sess.IsUpgrading() {
		s.Service.CloseForUpgrade()
		// The terminals' recordings end here ("store closed"); the next
		// binary starts new files for those that were recorded.
		s.recorded = map[string]string{}
		for _, ch := range s.Registry().List() {
			if d, err := s.GetChannel(context.Background(), ch.URI); err == nil && d.Recording != nil {
				s.recorded[ch.URI] = d.Recording.Mode.String()
			}
		}
	} else {
		s.Service.Close()
	}
	// After the channels: a terminal's recording ends with its hang-up.
	if s.recordings != nil {
		_ = s.recordings.Close()
	}
	s.memory.stop()
	// A reconnect token's last connection end may be held back (written
	// at most once a second): the next daemon must see it.
	if ferr := s.tokens.Flush(); ferr != nil {
		s.log.Error("minted tokens not saved at shutdown", "err", ferr)
	}
	return err
}
