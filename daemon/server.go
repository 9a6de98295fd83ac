package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/webui"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/rawio"
	"github.com/ahp-dev/ahpd/pty"
)

// Version is the daemon's version, set at link time.
var Version = "dev"

// Subprotocol is the WebSocket subprotocol of AHP/1.
const Subprotocol = "ahp.v1"

// sharedFloor is what each connection may have in started messages
// beyond maxTotalBufferedBytes (flow.SenderConfig.SharedFloor): while
// bulk viewers hold the daemon's total, another connection's echo and
// small updates still go out at once.
const sharedFloor = 64 << 10

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

// Server is the viewer side of ahpd: the HTTP listener with the WebSocket
// endpoint and the web page, the channel registry and the tokens.
type Server struct {
	cfg         config.Config
	log         *slog.Logger
	tokens      *auth.Tokens
	registry    *registry.Registry
	limits      atomic.Pointer[config.Limits]
	newTerminal TerminalFactory
	creators    map[string]Creator
	now         func() time.Time

	connCtx   context.Context // parent of every connection; cancelled at shutdown
	stopConns context.CancelFunc
	connWG    sync.WaitGroup
	mu        sync.Mutex // guards conns, nextConn, origins, originSchemes, hosts, closing
	closing   bool       // set at shutdown; no connection is added after it
	conns     map[*conn]struct{}
	nextConn  int
	origins   []string
	// originSchemes are the schemes an allowed Origin may have: http for
	// the default list, http or https for allowedOrigins.
	originSchemes []string
	hosts         []string // Host names allowed besides IP literals and localhost; "*" is any
	events        events.Bus
	chLimits      map[string]channelLimits // per-channel overrides; guarded by mu
	budget        *flow.Budget             // config.Config.MaxTotalBufferedBytes, shared by every connection\'s Sender
	memory        *memoryReturner          // gives free memory back after terminals and connections end
	bg            sync.WaitGroup           // per-channel watchers (exit events); waited at shutdown
	pending       atomic.Int64             // upgraded connections not yet initialized (maxPendingConnections)
	terminals     atomic.Int64             // terminal channels in the registry or being created (maxTerminals)
	authLog       rateLog                  // "authentication failed" lines, at most one a second
	refuseLog     rateLog                  // refused requests and upgrades (host, origin, caps), likewise
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
	ctx, cancel := context.WithCancel(context.Background())
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
		connCtx:     ctx,
		stopConns:   cancel,
		conns:       map[*conn]struct{}{},
	}
	l := cfg.Limits
	s.limits.Store(&l)
	return s, nil
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

// createChannel makes a channel of type typ with its Creator and
// registers it under a generated id.
func (s *Server) createChannel(typ string, params json.RawMessage) (*registry.Channel, error) {
	create, ok := s.creators[typ]
	scheme := registry.Scheme(typ)
	if !ok || scheme == "" {
		return nil, &flow.Error{Code: CodeInvalidParams, Message: "create: channels of type " + quoteClient(typ) + " cannot be created by subscribe"}
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

// Handler returns the HTTP handler: /v1/ws, /healthz and the web page.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ws", s.serveWS)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", s.MetricsHandler(MetricsOptions{Public: s.cfg.MetricsPublic}))
	mux.Handle("/", webui.Handler())
	return s.checkHost(mux)
}

// checkHost refuses, on every path, a request whose Host header is not
// one of ours: a page on another origin whose name an attacker points at
// 127.0.0.1 (DNS rebinding) sends its own name as Host, and would
// otherwise be same-origin with the daemon. Allowed are IP literals (no
// DNS name to rebind), localhost and *.localhost (browsers resolve them
// to loopback themselves), the listen host, and allowedHosts.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			if n, ok := s.refuseLog.allow(s.now()); ok { // a client retrying in a loop must not flood the log
				s.log.Warn("request refused: host not allowed", "host", truncate(r.Host, 128), "path", truncate(r.URL.Path, 128), "remote", r.RemoteAddr, "suppressed", n)
			}
			http.Error(w, "host not allowed (see allowedHosts)", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostName returns the host of a Host header value, lowercased, without
// port, brackets or a final dot.
func hostName(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// hostAllowed reports whether a request's Host header names this daemon.
func (s *Server) hostAllowed(h string) bool {
	name := hostName(h)
	if name == "" {
		return false // HTTP/1.1 requires Host; net/http refuses it missing
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.hosts, name) || slices.Contains(s.hosts, "*")
}

// setOrigins computes the default Origin allow-list for the address the
// listener got (the port may have been 0).
func (s *Server) setOrigins(addr net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfgHost, _, _ := net.SplitHostPort(s.cfg.Listen)
	s.hosts = append([]string{hostName(cfgHost)}, lowerAll(s.cfg.AllowedHosts)...)
	if len(s.cfg.AllowedOrigins) > 0 {
		s.origins = lowerAll(s.cfg.AllowedOrigins)
		s.originSchemes = []string{"http", "https"}
		return
	}
	// The daemon serves plain HTTP: a page it served has an http Origin.
	s.originSchemes = []string{"http"}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	s.origins = []string{strings.ToLower(net.JoinHostPort(cfgHost, port)), strings.ToLower(net.JoinHostPort(host, port))}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || cfgHost == "localhost" {
		s.origins = append(s.origins, "localhost:"+port, "127.0.0.1:"+port, "[::1]:"+port)
	}
}

func lowerAll(in []string) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = strings.ToLower(v)
	}
	return out
}

// originAllowed implements §2: an Origin, when present, must be allowed.
func (s *Server) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	host := strings.ToLower(u.Host)
	if u.Port() == "" {
		switch u.Scheme {
		case "http":
			host += ":80"
		case "https":
			host += ":443"
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.originSchemes, u.Scheme) && slices.Contains(s.origins, host)
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !s.originAllowed(r) {
		if n, ok := s.refuseLog.allow(s.now()); ok { // a client retrying in a loop must not flood the log
			s.log.Warn("upgrade refused: origin not allowed", "origin", truncate(r.Header.Get("Origin"), 128), "remote", r.RemoteAddr, "suppressed", n)
		}
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return
	}
	if s.connCtx.Err() != nil {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	// Until it initializes, a connection counts as pending: initialize
	// gives its count back, or the end of the connection does.
	if max := s.Limits().MaxPendingConnections; s.pending.Add(1) > int64(max) {
		s.pending.Add(-1)
		if n, ok := s.refuseLog.allow(s.now()); ok { // a client retrying in a loop must not flood the log
			s.log.Warn("upgrade refused: too many pending connections", "max", max, "remote", r.RemoteAddr, "suppressed", n)
		}
		http.Error(w, fmt.Sprintf("too many pending connections (maxPendingConnections %d): try again later", max), http.StatusServiceUnavailable)
		return
	}
	var c *conn
	defer func() {
		if c == nil || !c.initialized {
			s.pending.Add(-1)
		}
	}()
	opts := &websocket.AcceptOptions{
		Subprotocols:       []string{Subprotocol},
		InsecureSkipVerify: true, // Origin checked above against our own list
		CompressionMode:    websocket.CompressionDisabled,
	}
	if s.cfg.WebsocketCompression == "deflate" {
		opts.CompressionMode = websocket.CompressionContextTakeover
		opts.CompressionThreshold = 1024
	}
	ws, err := websocket.Accept(writeBufferHijacker{w}, r, opts)
	if err != nil {
		return // Accept wrote the HTTP error
	}
	limits := s.Limits()
	ws.SetReadLimit(limits.MaxInboundMessageBytes)
	if ws.Subprotocol() != Subprotocol {
		_ = ws.Close(websocket.StatusPolicyViolation, "subprotocol "+Subprotocol+" required")
		return
	}
	// The connection's memory is its control lane, the messages its
	// subscriptions have started (each a text its viewer holds: a piece
	// of a snapshot or of the output log), the transport's two frames and
	// inbound messages waiting. maxBufferedBytes bounds the lane (a
	// quarter, at most 4 MiB) and the started messages (the rest)
	// together; terminal output itself is shared by all viewers of a
	// terminal (each holds a cursor), and so are snapshot texts
	// (docs/protocol-decisions.md, "Memory per connection").
	// Connections together are held to maxTotalBufferedBytes (the
	// shared budget): past it a new connection is refused, and existing
	// ones go on as their messages finish.
	if s.budget.Left() < flow.MinPullSize {
		if n, ok := s.refuseLog.allow(s.now()); ok { // a client retrying in a loop must not flood the log
			s.log.Warn("connection refused: the daemon's memory budget is spent", "maxTotalBufferedBytes", s.budget.Max(), "suppressed", n)
		}
		_ = ws.Close(websocket.StatusPolicyViolation, "daemon memory budget spent (maxTotalBufferedBytes); try again later")
		return
	}
	control := min(4<<20, limits.MaxBufferedBytes/4)
	sender, err := flow.NewSender(flow.SenderConfig{
		ControlBytes: control,
		ActiveBytes:  limits.MaxBufferedBytes - control,
		Shared:       s.budget,
		SharedFloor:  sharedFloor,
	})
	if err != nil {
		_ = ws.Close(websocket.StatusInternalError, "internal error")
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ws.Close(websocket.StatusGoingAway, "host shutting down")
		return
	}
	s.nextConn++
	id := "c" + strconv.Itoa(s.nextConn)
	now := time.Now()
	c = &conn{
		srv:         s,
		ws:          ws,
		log:         s.log,
		id:          id,
		remote:      r.RemoteAddr,
		wire:        socketOf(r),
		bearer:      bearerToken(r),
		opened:      now,
		limits:      limits,
		sender:      sender,
		subs:        map[string]*subscription{},
		pending:     map[string]*subscription{},
		lastWrite:   now,
		lastAlive:   now,
		inbox:       make(chan inbound, 16),
		out:         make(chan []byte, 4),
		written:     make(chan []byte, 4),
		alive:       make(chan struct{}, 1),
		pingFailed:  make(chan error, 1),
		kick:        make(chan string, 1),
		queries:     make(chan chan ViewerInfo),
		writeFailed: make(chan struct{}),
		wakeSig:     make(chan struct{}, 1),
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	s.log.Info("connection opened", "conn", id, "remote", r.RemoteAddr)
	defer func() {
		if c.initialized {
			s.events.Publish(events.Event{Kind: "viewer.left", Viewer: id})
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.memory.soon()
		s.connWG.Done()
	}()
	c.serve(s.connCtx)
}

func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Serve serves HTTP on ln until ctx is cancelled, then shuts down: every
// connection closes with 1001, terminals are hung up, and Serve returns
// within the shutdown timeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.setOrigins(ln.Addr())
	ln = sndbufListener{ln}
	hs := &http.Server{
		Handler: s.Handler(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.shutdown(hs)
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
			return e
		}
		return nil
	}
	return err
}

func (s *Server) shutdown(hs *http.Server) {
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	s.mu.Lock()
	s.closing = true // no new connection or channel from here on
	s.mu.Unlock()
	s.stopConns() // each connection closes with 1001
	// Stop accepting and let plain HTTP requests finish, alongside the
	// WebSocket closes: a slow page download must not eat their budget.
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		_ = hs.Shutdown(sctx) // hijacked WebSockets are ours, not its
	}()
	defer func() { <-httpDone }()
	done := make(chan struct{})
	go func() { s.connWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
		s.log.Warn("shutdown timeout: closing remaining connections")
		s.mu.Lock()
		for c := range s.conns {
			_ = c.ws.CloseNow()
		}
		s.mu.Unlock()
		<-done
	}
	// Hang up every terminal at once: each may take its kill timeout.
	var wg sync.WaitGroup
	for _, ch := range s.registry.List() {
		wg.Go(func() { _ = s.CloseChannel(ch.URI) })
	}
	wg.Wait()
	s.bg.Wait()
	s.memory.stop()
}

// exitNotifier is implemented by channels that report their process's
// exit (pty.Terminal); Describe().Detail says how it exited.
type exitNotifier interface {
	Exited() <-chan struct{}
}

// socketSendBuffer caps the kernel's send buffer of each viewer socket.
// Frames queued in the kernel are beyond the scheduler's reach: with
// Linux's autotuning a loopback socket buffers megabytes, and a keystroke's
// echo would wait behind all of a flooding neighbour's bytes in it (§6 bounds
// what waits ahead of an interactive frame). 256 KiB keeps that wait to a
// few milliseconds at loopback speeds while a single viewer still reaches
// full throughput.
const socketSendBuffer = 256 << 10

// wsWriteBuffer is each viewer socket's write buffer. net/http hands a
// hijacked connection a 4 KiB one, through which the WebSocket library
// writes a larger frame in two syscalls, the first 4 KiB and then the rest,
// and the viewer wakes up for each. With 64 KiB, a frame under the default
// maximumFrameBytes (64 KiB of UTF-16, at most 48 KiB of UTF-8) goes out
// in one write.
const wsWriteBuffer = 64 << 10

// writeBufferHijacker gives the connection it hijacks a wsWriteBuffer
// write buffer.
type writeBufferHijacker struct{ http.ResponseWriter }

func (h writeBufferHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack() // through Unwrap wrappers too
	if err != nil {
		return c, brw, err
	}
	if err := brw.Writer.Flush(); err != nil { // empty: the response went out at Hijack
		c.Close()
		return nil, nil, err
	}
	brw.Writer = bufio.NewWriterSize(c, wsWriteBuffer)
	return c, brw, nil
}

// sndbufListener caps each accepted socket's send buffer and counts its
// bytes (for the compression ratio in stats: the WebSocket library does
// not report compressed sizes).
type sndbufListener struct{ net.Listener }

func (l sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(socketSendBuffer)
	}
	return &countingConn{Conn: rawio.NewConn(c)}, nil
}

// countingConn counts the bytes through a socket.
type countingConn struct {
	net.Conn
	in, out atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}

type connKey struct{}

// socketOf returns the counting socket under an HTTP request, if any.
func socketOf(r *http.Request) *countingConn {
	c, _ := r.Context().Value(connKey{}).(*countingConn)
	return c
}
