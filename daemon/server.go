package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
)

// Version is the daemon's version, set at link time.
var Version = "dev"

// TerminalSpec describes a terminal to create.
type TerminalSpec struct {
	ID         string
	Title      string
	Command    []string // empty: the login shell
	Env        []string
	Dir        string
	Rows, Cols int
	Scrollback int
}

// TerminalFactory starts a terminal channel; the daemon's default is a
// pty.Terminal (newPTYTerminal).
type TerminalFactory func(spec TerminalSpec, backlog int64, log *slog.Logger) (flow.Channel, error)

// Server is ahpd: the channels and their kinds, the tokens, the limits,
// the viewer session (package session) and the control plane's service
// logic (service*.go).
type Server struct {
	cfg         config.Config
	log         *slog.Logger
	tokens      *auth.Tokens
	registry    *registry.Registry
	limits      atomic.Pointer[config.Limits]
	newTerminal TerminalFactory
	creators    map[string]Creator
	now         func() time.Time
	sess        *session.Server

	mu        sync.Mutex // guards closing and chLimits
	closing   bool       // set at shutdown; no channel is added after it
	events    events.Bus
	chLimits  map[string]channelLimits // per-channel overrides; guarded by mu
	budget    *flow.Budget             // config.Config.MaxTotalBufferedBytes, shared by every connection's Sender
	memory    *memoryReturner          // gives free memory back after terminals and connections end
	bg        sync.WaitGroup           // per-channel watchers (exit events); waited at shutdown
	terminals atomic.Int64             // terminal channels in the registry or being created (maxTerminals)
}

// Options are the daemon's collaborators; zero fields take defaults.
type Options struct {
	Logger *slog.Logger
	// Tokens overrides loading admin.token from the state dir.
	Tokens *auth.Tokens
	// NewTerminal overrides the PTY-backed terminal factory.
	NewTerminal TerminalFactory
	// Flooding, when set, is called by the default terminals' readers
	// while one floods (pty.Config.Flooding).
	Flooding func()
	// Creators are the channel kinds a subscribe may create, by type
	// (PROTOCOL.md §8: subscribe {create:{type, ...}}).
	Creators map[string]Creator
}

// Creator makes a channel of its kind from the create member of a
// subscribe (all of it, type included). It must not block: a channel
// that dials returns at once, and its Subscribers become Ready when the
// dial is done (or fail with -32008). An *flow.Error carries its code
// (-32003 for a target the allow-list refuses).
type Creator func(params json.RawMessage) (flow.Channel, error)

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
		log.Info("admin token", "path", path)
		tokens = t
	}
	nt := opts.NewTerminal
	if nt == nil {
		// The daemon's terminals share its CPU: typing into one takes
		// precedence over a flood in another (pty.Pacer).
		var pacer *pty.Pacer
		if !cfg.NoTypingFirst {
			pacer = &pty.Pacer{}
		}
		nt = func(spec TerminalSpec, backlog int64, log *slog.Logger) (flow.Channel, error) {
			return newPTYTerminal(spec, backlog, log, pacer, opts.Flooding)
		}
	}
	s := &Server{
		cfg:         cfg,
		log:         log,
		tokens:      tokens,
		registry:    registry.New(),
		budget:      flow.NewBudget(cfg.MaxTotalBufferedBytes),
		memory:      newMemoryReturner(),
		newTerminal: nt,
		creators:    opts.Creators,
		now:         time.Now,
	}
	l := cfg.Limits
	s.limits.Store(&l)
	s.sess = session.New(session.Options{
		Config: cfg, Version: Version, Log: log, Tokens: tokens, Registry: s.registry, Events: &s.events,
		Budget: s.budget, Host: s, Metrics: s.MetricsHandler(MetricsOptions{Public: cfg.MetricsPublic}),
		ConnEnded: s.memory.soon,
	})
	return s, nil
}

// Session is the viewer side: the HTTP handler and the connections.
func (s *Server) Session() *session.Server { return s.sess }

// Handler returns the HTTP handler: /v1/ws, /healthz, /metrics and the
// web page.
func (s *Server) Handler() http.Handler { return s.sess.Handler() }

// isClosing reports whether shutdown has begun.
func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Serve serves HTTP on ln until ctx is cancelled, then shuts down: every
// connection closes with 1001, terminals are hung up, and Serve returns
// within the shutdown timeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, s.beginShutdown)
	defer stop()
	err := s.sess.Serve(ctx, ln)
	s.beginShutdown()
	// Hang up every terminal at once: each may take its kill timeout.
	var wg sync.WaitGroup
	for _, ch := range s.registry.List() {
		wg.Go(func() { _ = s.CloseChannel(ch.URI) })
	}
	wg.Wait()
	s.bg.Wait()
	s.memory.stop()
	return err
}

// beginShutdown refuses new channels from now on.
func (s *Server) beginShutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
}

// Watch watches the daemon's events (events.Bus.Watch).
func (s *Server) Watch() (next func(done <-chan struct{}) ([]events.Event, int, bool), stop func()) {
	return s.events.Watch()
}

// Config returns the defaulted configuration.
func (s *Server) Config() config.Config { return s.cfg }

// Tokens returns the token store.
func (s *Server) Tokens() *auth.Tokens { return s.tokens }

// Registry returns the channel registry.
func (s *Server) Registry() *registry.Registry { return s.registry }

// Limits returns the limits in force.
func (s *Server) Limits() config.Limits { return *s.limits.Load() }

// SetLimits validates and installs new limits: they apply to new
// connections and subscriptions at once, and to timers of existing ones
// within a second (see maxCheckInterval).
func (s *Server) SetLimits(l config.Limits) error {
	l = l.WithDefaults()
	if err := l.Validate(); err != nil {
		return err
	}
	s.limits.Store(&l)
	s.log.Info("limits changed")
	s.events.Publish(events.Event{Kind: "limits.changed"})
	return nil
}

// CreateTerminal starts a terminal channel.
func (s *Server) CreateTerminal(spec TerminalSpec) (*registry.Channel, error) {
	if spec.ID != "" {
		if err := registry.ValidID(spec.ID); err != nil {
			return nil, err
		}
		if _, ok := s.registry.Get(registry.SchemeTerminal + spec.ID); ok {
			return nil, fmt.Errorf("%w: %s", registry.ErrChannelExists, registry.SchemeTerminal+spec.ID)
		}
	}
	if s.isClosing() {
		return nil, ErrShuttingDown
	}
	// A slot is taken before the process starts and given back by
	// CloseChannel (or here on failure).
	if max := s.Limits().MaxTerminals; s.terminals.Add(1) > int64(max) {
		s.terminals.Add(-1)
		return nil, fmt.Errorf("%w: %d terminals (maxTerminals, the maximum); close one first", ErrTooMany, max)
	}
	t, err := s.newTerminal(spec, s.Limits().TerminalViewerBacklog, s.log)
	if err != nil {
		s.terminals.Add(-1)
		return nil, fmt.Errorf("start terminal: %w", err)
	}
	ch := registry.NewChannel(spec.Title, t)
	if err := s.registry.Add(registry.SchemeTerminal, spec.ID, ch); err != nil {
		s.terminals.Add(-1)
		_ = t.Close()
		return nil, err
	}
	s.log.Info("channel created", "channel", ch.URI, "type", ch.Type)
	s.events.Publish(events.Event{Kind: "channel.created", Channel: ch.URI, Detail: ch.Type})
	s.mu.Lock()
	closing := s.closing
	n, notify := t.(exitNotifier)
	if !closing && notify {
		s.bg.Add(1) // under s.mu: shutdown's Wait cannot race this Add
	}
	s.mu.Unlock()
	if closing {
		_ = s.CloseChannel(ch.URI)
		return nil, ErrShuttingDown
	}
	if notify {
		// Ends when the process exits; shutdown closes every channel, so
		// shutdown waits for it through s.bg.
		go func() {
			defer s.bg.Done()
			<-n.Exited()
			detail := t.Describe().Detail
			s.log.Info("channel exited", "channel", ch.URI, "status", detail)
			s.events.Publish(events.Event{Kind: "channel.exited", Channel: ch.URI, Detail: detail})
		}()
	}
	return ch, nil
}

// CreateChannel makes a channel of type typ with its Creator and
// registers it under a generated id.
func (s *Server) CreateChannel(typ string, params json.RawMessage) (*registry.Channel, error) {
	create, ok := s.creators[typ]
	scheme := registry.Scheme(typ)
	if !ok || scheme == "" {
		return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create: channels of type " + strconv.Quote(session.Truncate(typ, 64)) + " cannot be created by subscribe"}
	}
	if s.isClosing() {
		return nil, ErrShuttingDown
	}
	impl, err := create(params)
	if err != nil {
		return nil, err
	}
	ch := registry.NewChannel("", impl)
	if err := s.registry.Add(scheme, "", ch); err != nil {
		_ = impl.Close()
		return nil, err
	}
	s.log.Info("channel created", "channel", ch.URI, "type", ch.Type, "by", "subscribe")
	s.events.Publish(events.Event{Kind: "channel.created", Channel: ch.URI, Detail: ch.Type})
	return ch, nil
}

// CloseChannel closes and removes a channel.
func (s *Server) CloseChannel(uri string) error {
	ch, ok := s.registry.Remove(uri)
	if !ok {
		return fmt.Errorf("%w: %s", registry.ErrChannelNotFound, uri)
	}
	ch.MarkClosed()
	s.mu.Lock()
	delete(s.chLimits, uri)
	s.mu.Unlock()
	if ch.Type == "terminal" {
		s.terminals.Add(-1)
	}
	_ = ch.Impl().Close()
	s.log.Info("channel closed", "channel", uri)
	s.events.Publish(events.Event{Kind: "channel.closed", Channel: uri})
	s.memory.soon()
	return nil
}

// Ticket mints a single-use credential for the given channels and role.
func (s *Server) Ticket(channels []string, role auth.Role, ttl time.Duration) string {
	secret, _ := s.tokens.Mint(auth.Grant{Channels: channels, Role: role, SingleUse: true, Expires: s.now().Add(ttl)})
	return secret
}

// BrowserURL returns a URL that opens channel in the web page with a
// single-use ticket in the fragment (never sent to a server, never logged).
func (s *Server) BrowserURL(base string, channel string, role auth.Role) string {
	var ch []string
	if channel != "" {
		ch = []string{channel}
	}
	// Tickets are base64url and channel URIs use only letters, digits,
	// "-_.:/": nothing needs escaping in a fragment.
	frag := "ticket=" + s.Ticket(ch, role, s.cfg.TicketTTL)
	if channel != "" {
		frag += "&channel=" + channel
	}
	return strings.TrimSuffix(base, "/") + "/#" + frag
}

// exitNotifier is implemented by channels that report their process's
// exit (pty.Terminal); Describe().Detail says how it exited.
type exitNotifier interface {
	Exited() <-chan struct{}
}
