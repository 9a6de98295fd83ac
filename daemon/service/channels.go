package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/limits"
	"github.com/ahp-dev/ahpd/pty/record"
	"github.com/ahp-dev/ahpd/tcp"
)

// TerminalSpec describes a terminal to create.
type TerminalSpec struct {
	ID         string
	Title      string
	Command    []string // empty: the login shell
	Env        []string
	Dir        string
	Rows, Cols int
	Scrollback int
	// Record is how the terminal is recorded from its start
	// (docs/recording.md): off, output or output+input; "" the config's
	// record key. A restart records as the terminal did.
	Record string
}

// TerminalFactory starts a terminal channel; the daemon's default is a
// pty.Terminal (newPTYTerminal).
type TerminalFactory func(spec TerminalSpec, backlog int64, log *slog.Logger) (flow.Channel, error)

// Creator makes a channel of its kind from the create member of a
// subscribe (all of it, type included). It must not block: a channel
// that dials returns at once, and its Subscribers become Ready when the
// dial is done (or fail with -32008). An *flow.Error carries its code
// (-32003 for a target the allow-list refuses).
// owner is whom the channel is for: its Budget (the creating token's, or
// nil for the control plane) is where a channel whose state outlives
// connections counts it.
type Creator func(params json.RawMessage, owner session.Owner) (flow.Channel, error)

// Checker makes the checks of its kind's Creator that come before
// anything is created or dialed (a TCP target against the allow-list),
// for channels/check; an *flow.Error carries the code the create would
// get.
type Checker func(params json.RawMessage) error

// Viewers is what the service needs of the viewer session.
type Viewers interface {
	ConnectionCount() int
	ListViewers(ctx context.Context) []session.ViewerInfo
	Kick(id, reason string) (tokenID, tokenParent string, ok bool)
	RecheckTokens()
}

// Options are a Service's collaborators.
type Options struct {
	Config      config.Config // defaulted and validated
	Version     string
	Log         *slog.Logger
	Tokens      *auth.Tokens
	NewTerminal TerminalFactory
	// Creators are the channel kinds a subscribe may create, by type.
	Creators map[string]Creator
	// Checkers are the checks of Creators' kinds for channels/check, by
	// type; a kind without one passes once its type is creatable.
	Checkers map[string]Checker
	// ChannelClosed is called after a channel is closed (the daemon gives
	// memory back then); it must not block.
	ChannelClosed func()
	// Busy is called while a push producer streams samples fast (a
	// PublishTelemetry message of at least busySamples): the daemon runs
	// on two Ps then (internal/procs), so that the producer's stream and
	// the viewers' connections do not take turns on one. Default: nothing.
	Busy func()
	// TCPAllow is the TCP allow-list in force, which AllowTCP and DenyTCP
	// change and the "tcp" Creator checks. Nil: an empty list.
	TCPAllow *tcp.AllowList
	// ConfigFile is the config file the daemon loaded, whose tcpAllow key
	// (Config.TCPAllow) DenyTCP rewrites when it removes one of its rules:
	// "" when none was found, "none" for --config none. No config file is
	// ever created or given a rule.
	ConfigFile string
	// TCPStateFile is where the rules added at run time (AllowTCP) are
	// kept: normally TCPStateFileName in the state directory. New reads it
	// and puts its rules in force after Config.TCPAllow's. "": they are
	// kept in memory only.
	TCPStateFile string
	// Recordings is the store terminals record into (the state
	// directory's recordings/); nil: recording is refused. The service
	// sets its limits when the limits change; the daemon opens and
	// closes it.
	Recordings *record.Store
}

// Service is the daemon's state and the logic of its control plane:
// channels (terminals and the kinds of Creators), limits and their
// per-channel overrides, tokens, viewers (through Viewers) and events.
// Its methods are safe for concurrent use.
type Service struct {
	cfg           config.Config
	version       string
	log           *slog.Logger
	tokens        *auth.Tokens
	registry      *registry.Registry
	limits        atomic.Pointer[config.Limits]
	newTerminal   TerminalFactory
	creators      map[string]Creator
	checkers      map[string]Checker
	now           func() time.Time
	channelClosed func()
	busy          func()
	viewers       Viewers // set once by SetViewers, before serving
	recordings    *record.Store

	mu       sync.Mutex // guards closing and chLimits
	closing  bool       // set at shutdown; no channel is added after it
	events   events.Bus
	chLimits map[string]channelLimits // per-channel overrides; guarded by mu
	bg       sync.WaitGroup           // per-channel watchers (exit events); waited by Close
	// recSeen is the recording each terminal was last announced with
	// (recording.started), by URI; recMu guards it and orders the
	// announcements (recordings.go).
	recMu     sync.Mutex
	recSeen   map[string]string
	terminals atomic.Int64 // terminal channels in the registry or being created (maxTerminals)
	// TCP channels in the registry or being created: in all
	// (maxTcpChannels) and by the token that created them
	// (maxTcpChannelsPerToken; "" the admin and control plane); slots
	// holds what gives a registered channel's count back, by URI (see
	// takeSlot). Guarded by mu.
	tcpCount   int
	tcpByToken map[string]int
	slots      map[string]func()

	tcpAllow *tcp.AllowList
	// tcpMu serializes the changes of the allow-list (AllowTCP, DenyTCP,
	// ReloadTCPRules, RestoreTCPRules) and guards the four fields below.
	tcpMu          sync.Mutex
	tcpFile        string     // the config file loaded (Options.ConfigFile)
	tcpConfigRules []tcp.Rule // its tcpAllow as loaded, less the rules DenyTCP removed from it
	tcpStateFile   string     // Options.TCPStateFile
	tcpStateRules  []tcp.Rule // the rules the state file holds
	// tcpEnded sums the counters of TCP channels that left the registry,
	// so that the daemon's totals never decrease (TCPStats); guarded by
	// tcpStatsMu, which also makes a channel's move from the registry to
	// tcpEnded one step for TCPStats.
	tcpStatsMu sync.Mutex
	tcpEnded   TCPStats
}

// New returns a Service with no channels.
func New(o Options) *Service {
	if o.ChannelClosed == nil {
		o.ChannelClosed = func() {}
	}
	if o.Busy == nil {
		o.Busy = func() {}
	}
	if o.TCPAllow == nil {
		o.TCPAllow = tcp.NewAllowList(nil)
	}
	s := &Service{
		cfg: o.Config, version: o.Version, log: o.Log, tokens: o.Tokens, registry: registry.New(),
		newTerminal: o.NewTerminal, creators: o.Creators, checkers: o.Checkers, now: time.Now, channelClosed: o.ChannelClosed, busy: o.Busy,
		tcpAllow: o.TCPAllow, tcpFile: o.ConfigFile, tcpConfigRules: slices.Clone(o.Config.TCPAllow), tcpStateFile: o.TCPStateFile,
		tcpByToken: map[string]int{}, slots: map[string]func(){}, recordings: o.Recordings,
	}
	s.loadTCPStateAtStart()
	l := o.Config.Limits
	s.limits.Store(&l)
	return s
}

// SetViewers connects the viewer session; call it once, before serving.
func (s *Service) SetViewers(v Viewers) { s.viewers = v }

// Events is the daemon's event bus.
func (s *Service) Events() *events.Bus { return &s.events }

// isClosing reports whether shutdown has begun.
func (s *Service) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// BeginShutdown refuses new channels from now on.
func (s *Service) BeginShutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
}

// Watch watches the daemon's events (events.Bus.Watch).
func (s *Service) Watch() (next func(done <-chan struct{}) ([]events.Event, int, bool), stop func()) {
	return s.events.Watch()
}

// Config returns the defaulted configuration.
func (s *Service) Config() config.Config { return s.cfg }

// Tokens returns the token store.
func (s *Service) Tokens() *auth.Tokens { return s.tokens }

// Registry returns the channel registry.
func (s *Service) Registry() *registry.Registry { return s.registry }

// Limits returns the limits in force.
func (s *Service) Limits() config.Limits { return *s.limits.Load() }

// SetLimits validates and installs new limits: they apply to new
// connections and subscriptions at once, and to timers of existing ones
// within a second (see maxCheckInterval).
func (s *Service) SetLimits(l config.Limits) error {
	l = l.WithDefaults()
	if err := l.Validate(); err != nil {
		return err
	}
	if s.recordings != nil {
		if err := s.recordings.SetLimits(RecordLimits(l)); err != nil {
			return err
		}
	}
	old := s.limits.Swap(&l)
	names := config.ChangedLimits(*old, l)
	if len(names) == 0 {
		// Setting what is in force (ahpctl says "no change"): nothing to
		// log, no limits.changed for watchers.
		return nil
	}
	var changed []any
	for _, name := range names {
		f, _ := limits.Find(name)
		v, _ := l.LimitValue(name)
		changed = append(changed, name, formatLimit(f, v))
	}
	s.log.Info("limits changed", changed...)
	s.events.Publish(events.Event{Kind: "limits.changed"})
	return nil
}

// CreateTerminal starts a terminal channel.
func (s *Service) CreateTerminal(spec TerminalSpec) (*registry.Channel, error) {
	if spec.ID != "" {
		if err := registry.ValidID(spec.ID); err != nil {
			return nil, err
		}
		if _, ok := s.registry.Get(registry.SchemeTerminal + spec.ID); ok {
			return nil, fmt.Errorf("%w: %s", registry.ErrChannelExists, registry.SchemeTerminal+spec.ID)
		}
	} else {
		// The terminal knows its id from the start: its recordings are
		// named after it.
		spec.ID = s.registry.NextID(registry.SchemeTerminal)
	}
	if s.isClosing() {
		return nil, ErrShuttingDown
	}
	mode, err := parseRecordMode("record", spec.Record, s.defaultRecordMode())
	if err != nil {
		return nil, err
	}
	if mode != record.Off && s.recordings == nil {
		return nil, fmt.Errorf("%w: this daemon has no recordings directory", ErrUnsupported)
	}
	spec.Record = mode.String()
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
	return s.addTerminal(spec, t, time.Time{}, "channel created")
}

// AdoptTerminal registers a terminal that a previous binary handed over
// at an upgrade in place (pty.Adopt), under its spec's id, with the time
// it was created. It counts in maxTerminals but is never refused for it:
// the terminal exists already.
func (s *Service) AdoptTerminal(spec TerminalSpec, t flow.Channel, created time.Time) (*registry.Channel, error) {
	if s.isClosing() {
		_ = t.Close()
		return nil, ErrShuttingDown
	}
	s.terminals.Add(1)
	return s.addTerminal(spec, t, created, "channel adopted")
}

// lastRecording is t's latest recording, live or ended (pty.Terminal's
// LastRecording), or none for a terminal that cannot say.
func lastRecording(t flow.Channel) (id string, m record.Mode, live bool) {
	if l, ok := t.(interface {
		LastRecording() (string, record.Mode, bool)
	}); ok {
		return l.LastRecording()
	}
	return "", record.Off, false
}

// addTerminal registers a started terminal t (a slot of maxTerminals
// taken; given back on failure), logs msg and watches for its exit.
func (s *Service) addTerminal(spec TerminalSpec, t flow.Channel, created time.Time, msg string) (*registry.Channel, error) {
	ch := registry.NewChannel(spec.Title, t)
	ch.Spec = spec
	if !created.IsZero() {
		ch.Created = created
	}
	if err := s.registry.Add(registry.SchemeTerminal, spec.ID, ch); err != nil {
		s.terminals.Add(-1)
		_ = t.Close()
		return nil, err
	}
	attrs := []any{"channel", ch.URI, "type", ch.Type}
	if p, ok := t.(terminalPider); ok {
		attrs = append(attrs, "pid", p.Pid())
	}
	s.log.Info(msg, attrs...)
	s.events.Publish(events.Event{Kind: "channel.created", Channel: ch.URI, Detail: ch.Type})
	if mode, _ := record.ParseMode(spec.Record); mode != record.Off {
		r, ok := t.(terminalRecorder)
		if !ok {
			s.log.Warn("recording not started", "channel", ch.URI, "err", "this terminal cannot record")
		} else if id, m, live := lastRecording(t); id != "" && !live {
			// It started recorded and its process exited already, which
			// ended the recording: announce it, and SyncRecordings
			// announces its end with the reason its last marker gives.
			s.announceStart(ch.URI, id, m)
		} else if _, cur := r.Recording(); cur == record.Off {
			// A terminal that could not start recorded (pty.Config.Record)
			// starts now; a failure is logged, the terminal serves on.
			if _, err := s.startRecording(ch.URI, r, mode); err != nil {
				s.log.Warn("recording not started", "channel", ch.URI, "err", err)
			}
		} else {
			id, m := r.Recording()
			s.announceStart(ch.URI, id, m)
		}
	}
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
			attrs := []any{"channel", ch.URI, "status", detail}
			if p, ok := t.(terminalPider); ok {
				attrs = append(attrs, "pid", p.Pid())
			}
			if ch.Closed() {
				// Closed by the operator or at shutdown: "channel closed"
				// already said so; the exit is a detail (one line per
				// end, issue 16 §13).
				s.log.Debug("channel exited", attrs...)
			} else {
				s.log.Info("channel exited", attrs...)
			}
			s.events.Publish(events.Event{Kind: "channel.exited", Channel: ch.URI, Detail: detail})
			if r, ok := t.(terminalRecorder); ok {
				if _, m := r.Recording(); m == record.Off {
					s.announceStop(ch.URI, "") // ended with the process (else SyncRecordings sees it end)
				}
			}
		}()
	}
	return ch, nil
}

// CreateChannel makes a channel of type typ with its Creator and
// registers it under a generated id.
func (s *Service) CreateChannel(typ string, params json.RawMessage, owner session.Owner) (*registry.Channel, error) {
	return s.createChannel("subscribe", typ, "", params, owner)
}

// CheckCreate answers channels/check: whether CreateChannel(typ, params)
// would pass the checks that come before the channel exists — the type,
// the kind's own (a TCP target against the allow-list) — without creating
// or dialing anything. Limits are not checked: they say whether a channel
// may be created now, not whether it ever may.
func (s *Service) CheckCreate(typ string, params json.RawMessage) error {
	if err := s.creatable(typ, "subscribe"); err != nil {
		return err
	}
	if check := s.checkers[typ]; check != nil {
		return check(params)
	}
	return nil
}

// creatable refuses a type no Creator makes, or one made elsewhere.
func (s *Service) creatable(typ, by string) error {
	_, ok := s.creators[typ]
	scheme := registry.Scheme(typ)
	// Terminals are created over the control plane, where they take a
	// maxTerminals slot (CreateTerminal); telemetry channels too, since a
	// command source runs a program (CreateTelemetry).
	if !ok || scheme == "" || typ == "terminal" || typ == "telemetry" && by == "subscribe" {
		return &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create: channels of type " + strconv.Quote(session.Truncate(typ, 64)) + " cannot be created by subscribe"}
	}
	if s.isClosing() {
		return ErrShuttingDown
	}
	return nil
}

// createChannel makes a channel of type typ with its Creator and registers
// it under id, or a generated id if it is empty; by says who asked, for
// the log.
func (s *Service) createChannel(by, typ, id string, params json.RawMessage, owner session.Owner) (*registry.Channel, error) {
	if err := s.creatable(typ, by); err != nil {
		return nil, err
	}
	create, scheme := s.creators[typ], registry.Scheme(typ)
	if id != "" {
		// Checked before the channel exists (a TCP channel dials at
		// once); Add checks again.
		if err := registry.ValidID(id); err != nil {
			return nil, err
		}
		if _, ok := s.registry.Get(scheme + id); ok {
			return nil, fmt.Errorf("%w: %s", registry.ErrChannelExists, scheme+id)
		}
	}
	release, err := s.takeSlot(typ, owner.Token)
	if err != nil {
		return nil, err
	}
	impl, err := create(params, owner)
	if err != nil {
		release()
		return nil, err
	}
	return s.addChannel(by, scheme, id, owner.Token, params, impl, release, time.Time{})
}

// AdoptChannel registers a channel of type typ that a previous binary
// handed over at an upgrade in place, under its id, with the params it
// was created from and the time it was created. A kind's slots count it
// but never refuse it: the channel exists already.
func (s *Service) AdoptChannel(typ, id string, params json.RawMessage, impl flow.Channel, created time.Time) (*registry.Channel, error) {
	scheme := registry.Scheme(typ)
	if scheme == "" || id == "" {
		_ = impl.Close()
		return nil, fmt.Errorf("adopt: a channel of type %q, id %q", typ, id)
	}
	return s.addChannel("upgrade", scheme, id, "", params, impl, func() {}, created)
}

// AdoptTCP registers a TCP channel that a previous binary handed over at
// an upgrade in place (tcp.Adopt), under its id, with the params it was
// created from, the token that created it (owner) and the time it was
// created. It counts in maxTcpChannels and owner's
// maxTcpChannelsPerToken as it did before, without a check: the channel
// exists already.
func (s *Service) AdoptTCP(id, owner string, params json.RawMessage, impl flow.Channel, created time.Time) (*registry.Channel, error) {
	if id == "" || impl.Kind() != "tcp" {
		_ = impl.Close()
		return nil, fmt.Errorf("adopt: a channel of type %q, id %q", impl.Kind(), id)
	}
	return s.addChannel("upgrade", registry.Scheme("tcp"), id, owner, params, impl, s.countTCP(owner), created)
}

// addChannel registers impl (made from params) under scheme and id (or a
// generated id), with release to give its slot back when it closes,
// watches for its end, and logs who made it (by).
func (s *Service) addChannel(by, scheme, id, owner string, params json.RawMessage, impl flow.Channel, release func(), created time.Time) (*registry.Channel, error) {
	ch := registry.NewChannel("", impl)
	ch.Spec = append(json.RawMessage(nil), params...) // for an upgrade in place
	ch.Owner = owner
	if !created.IsZero() {
		ch.Created = created
	}
	if err := s.registry.Add(scheme, id, ch); err != nil {
		release()
		_ = impl.Close()
		return nil, err
	}
	s.mu.Lock()
	s.slots[ch.URI] = release
	s.mu.Unlock()
	s.log.Info("channel created", "channel", ch.URI, "type", ch.Type, "by", by)
	s.events.Publish(events.Event{Kind: "channel.created", Channel: ch.URI, Detail: ch.Type})
	// A kind may end its channel itself (a TCP channel after tcp/closed,
	// a reset or its retention): it then leaves the registry (§8).
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.bg.Go(func() {
			<-impl.Done()
			if cur, ok := s.registry.Get(ch.URI); ok && cur == ch {
				_ = s.CloseChannel(ch.URI)
			}
		})
	}
	s.mu.Unlock()
	if closing {
		// Shutdown may have listed the channels already: this one is ours
		// to close.
		_ = s.CloseChannel(ch.URI)
		return nil, ErrShuttingDown
	}
	return ch, nil
}

// CloseChannel closes and removes a channel.
func (s *Service) CloseChannel(uri string) error {
	s.tcpStatsMu.Lock()
	ch, ok := s.registry.Remove(uri)
	if !ok {
		s.tcpStatsMu.Unlock()
		return fmt.Errorf("%w: %s", registry.ErrChannelNotFound, uri)
	}
	ti, isTCP := ch.Impl().(tcpInfoer)
	var before tcp.Info
	if isTCP {
		before = ti.Info()
		s.tcpEnded.add(before)
	}
	s.tcpStatsMu.Unlock()
	ch.MarkClosed()
	s.mu.Lock()
	delete(s.chLimits, uri)
	s.mu.Unlock()
	if ch.Type == "terminal" {
		s.terminals.Add(-1)
	}
	s.mu.Lock()
	release := s.slots[uri]
	delete(s.slots, uri)
	s.mu.Unlock()
	if release != nil {
		release()
	}
	_ = ch.Impl().Close()
	if ch.Type == "terminal" {
		s.announceStop(uri, "") // the file says why: terminal closed, process exited
	}
	if isTCP {
		// What the close itself moved (a flush to the target).
		after := ti.Info()
		s.tcpStatsMu.Lock()
		s.tcpEnded.BytesIn += after.BytesIn - before.BytesIn
		s.tcpEnded.BytesOut += after.BytesOut - before.BytesOut
		s.tcpEnded.Resumes += after.Resumes - before.Resumes
		s.tcpStatsMu.Unlock()
	}
	s.log.Info("channel closed", "channel", uri)
	s.events.Publish(events.Event{Kind: "channel.closed", Channel: uri})
	s.channelClosed()
	return nil
}

// Ticket mints a single-use credential for the given channels and role.
func (s *Service) Ticket(channels []string, role auth.Role, ttl time.Duration) string {
	secret, _ := s.tokens.Mint(auth.Grant{Channels: channels, Role: role, SingleUse: true, Expires: s.now().Add(ttl)})
	return secret
}

// exitNotifier is implemented by channels that report their process's
// exit (pty.Terminal); Describe().Detail says how it exited.
type exitNotifier interface {
	Exited() <-chan struct{}
}

// Close refuses new channels, closes every channel (terminals are hung up
// at once: each may take its kill timeout) and waits for the per-channel
// watchers.
func (s *Service) Close() {
	s.BeginShutdown()
	var wg sync.WaitGroup
	for _, ch := range s.registry.List() {
		wg.Go(func() { _ = s.CloseChannel(ch.URI) })
	}
	wg.Wait()
	s.bg.Wait()
}

// CloseForUpgrade is Close for an upgrade in place: it refuses new
// channels and closes none; the daemon hands them over
// (HandOverChannels), which closes those it cannot, and their watchers
// end with the execve.
func (s *Service) CloseForUpgrade() { s.BeginShutdown() }

// formatLimit writes a limit's value as `ahpctl limits set` takes it.
func formatLimit(f limits.Spec, v int64) string {
	switch f.Kind {
	case limits.Duration:
		return time.Duration(v).String()
	case limits.Bytes:
		for _, u := range []struct {
			n    int64
			name string
		}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
			if v != 0 && v%u.n == 0 {
				return strconv.FormatInt(v/u.n, 10) + u.name
			}
		}
	}
	return strconv.FormatInt(v, 10)
}

// CreateShell creates a terminal running the login shell (the daemon's
// default command) for a viewer's channels/create: id and title may be
// empty. Errors are *flow.Error with the code to answer.
func (s *Service) CreateShell(id, title string) (*registry.Channel, error) {
	ch, err := s.CreateTerminal(TerminalSpec{ID: id, Title: title})
	return ch, viewerErr(err)
}

// RestartTerminal reruns an exited terminal's command under the same URI,
// with the spec it was created from (title, size, directory,
// environment): the old channel is closed (its viewers' subscriptions end
// with channel-closed) and a new one takes its place. A terminal still
// running is refused. Errors are *flow.Error with the code to answer.
func (s *Service) RestartTerminal(uri string) (*registry.Channel, error) {
	ch, ok := s.registry.Get(uri)
	if !ok {
		return nil, &flow.Error{Code: flow.ErrCodeChannelNotFound, Message: "channel not found: " + uri}
	}
	spec, ok := ch.Spec.(TerminalSpec)
	switch {
	case !ok || ch.Type != "terminal":
		return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: uri + " is not a terminal: only a terminal restarts"}
	case running(ch.Impl()):
		return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: uri + " is still running: a terminal restarts once its program has exited"}
	}
	if err := s.CloseChannel(uri); err != nil {
		return nil, viewerErr(err)
	}
	spec.ID = ch.ID
	nc, err := s.CreateTerminal(spec)
	if err == nil {
		s.log.Info("channel restarted", "channel", nc.URI)
	}
	return nc, viewerErr(err)
}

// viewerErr gives a service error the JSON-RPC code a viewer gets.
func viewerErr(err error) error {
	var fe *flow.Error
	switch {
	case err == nil || errors.As(err, &fe):
		return err
	case errors.Is(err, ErrTooMany):
		return &flow.Error{Code: flow.ErrCodeLimitExceeded, Message: err.Error()}
	case errors.Is(err, registry.ErrChannelNotFound):
		return &flow.Error{Code: flow.ErrCodeChannelNotFound, Message: err.Error()}
	case errors.Is(err, ErrShuttingDown):
		return &flow.Error{Code: flow.ErrCodeInternal, Message: err.Error()}
	}
	return &flow.Error{Code: flow.ErrCodeInvalidParams, Message: err.Error()}
}
