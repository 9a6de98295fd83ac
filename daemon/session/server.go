package session

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sort"
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
	"github.com/ahp-dev/ahpd/internal/cork"
	"github.com/ahp-dev/ahpd/internal/rawio"
	"github.com/ahp-dev/ahpd/internal/unsent"
)

// Host is what the session needs of the daemon that owns the channels.
// Its methods are safe for concurrent use; CloseChannel and CreateChannel
// are called from connections' run loops and must not block for long.
type Host interface {
	// Limits are the limits in force.
	Limits() config.Limits
	// LimitsFor are the limits for a channel, with its overrides.
	LimitsFor(channel string) config.Limits
	// CreateChannel makes a channel for subscribe {create} (PROTOCOL.md
	// §8) on behalf of owner and registers it; an *flow.Error carries its
	// code.
	CreateChannel(typ string, params json.RawMessage, owner Owner) (*registry.Channel, error)
	// CheckCreate makes the checks CreateChannel makes before anything is
	// created or dialed, for channels/check; an *flow.Error carries the
	// code the create would get.
	CheckCreate(typ string, params json.RawMessage) error
	// CloseChannel closes and removes a channel; it may block (a
	// terminal's hang-up), so the session calls it off its run loops.
	CloseChannel(uri string) error
	// CreateShell makes a terminal running the login shell for
	// channels/create (id and title may be empty); RestartTerminal reruns
	// an exited terminal under its URI for channels/restart. Errors are
	// *flow.Error with the code to answer.
	CreateShell(id, title string) (*registry.Channel, error)
	RestartTerminal(uri string) (*registry.Channel, error)

	// Terminal recordings (docs/recording.md), for the recordings/*
	// methods: a page of the recordings of a terminal URI ("" all),
	// newest first: at most n of those older than the cursor after (a
	// Key; "" from the newest) whose terminal's URI keep allows (nil:
	// all), and whether more follow (keep runs under the store's lock);
	// one's Info; its .cast opened for reading; its index; keyframe n
	// with its screen. An unknown id is ErrRecordingNotFound.
	RecordingsPage(channel, after string, n int, keep func(uri string) bool) ([]RecordingInfo, bool)
	RecordingsInfo(id string) (RecordingInfo, error)
	RecordingsOpen(id string) (io.ReadSeekCloser, RecordingInfo, error)
	RecordingsIndex(id string) (RecordingIndex, error)
	RecordingsKeyframe(id string, n int) (RecordingKeyframe, error)
	// RecordAudit adds a to the recording of the terminal channel and
	// returns the recording's id; "" when it does not record (a is
	// dropped). It must not block.
	RecordAudit(channel string, a Audit) string
	// RecordingOf returns the id of the recording the terminal channel
	// writes now, "" when it does not record. It must not block.
	RecordingOf(channel string) string
}

// Owner is who a subscribe creates a channel for: the token it
// authenticated with ("" for the admin token) and that token's budget
// (budgets.go), which a channel whose state outlives the connection (a
// TCP channel's journal) counts in.
type Owner struct {
	Token  string
	Budget *flow.Budget
}

// Options are a Server's collaborators.
type Options struct {
	Config   config.Config // defaulted and validated
	Version  string        // the server's version in initialize
	Started  time.Time     // when the daemon started, in initialize (zero: not sent)
	Log      *slog.Logger
	Tokens   *auth.Tokens
	Registry *registry.Registry
	Events   *events.Bus
	Budget   *flow.Budget // Config.MaxTotalBufferedBytes, shared by every connection's Sender
	Host     Host
	// Metrics is served at GET /metrics (nil: none).
	Metrics http.Handler
	// ConnEnded is called after each connection ends (the daemon gives
	// memory back then); it must not block.
	ConnEnded func()
	// TLS, when set, makes the listener serve HTTPS and WSS only, with
	// this configuration (its certificate may change between handshakes:
	// GetCertificate). Nil: plain HTTP.
	TLS *tls.Config
}

// Server is the viewer side of ahpd: the HTTP listener with the WebSocket
// endpoint and the web page, and the connections on it.
type Server struct {
	cfg       config.Config
	version   string
	started   string // Options.Started as initialize sends it
	log       *slog.Logger
	tokens    *auth.Tokens
	registry  *registry.Registry
	events    *events.Bus
	budget    *flow.Budget
	host      Host
	metrics   http.Handler
	connEnded func()
	now       func() time.Time
	tls       *tls.Config // Options.TLS

	connCtx   context.Context // parent of every connection; cancelled at shutdown
	stopConns context.CancelFunc
	connWG    sync.WaitGroup
	closers   sync.WaitGroup // CloseChannel calls of closeSoon; Serve waits for them
	upgraded  sync.WaitGroup // the goroutines serving upgraded connections; Serve waits for them
	mu        sync.Mutex     // guards conns, nextConn, origins, hosts, closing
	closing   bool           // set at shutdown; no connection is added after it
	// upgrading is set before a shutdown that hands over to a new binary
	// (an upgrade in place): connections close with 1012 "host
	// upgrading", which clients take as "reconnect soon", not 1001.
	upgrading atomic.Bool
	conns     map[*conn]struct{}
	nextConn  int
	// tokenBudgets are the tokens' budgets (budgets.go), guarded by mu.
	tokenBudgets map[string]*tokenBudget
	budgetsKept  int
	// origins are the allowed Origins, scheme://host:port (setOrigins).
	origins      []string
	hosts        []string    // Host names allowed besides IP literals and localhost; "*" is any
	pendingSocks *pendingSet // sockets not yet authenticated (maxPendingConnections)
	authLog      rateLog     // "authentication failed" lines, at most one a second
	refuseLog    rateLog     // refused requests and upgrades (host, origin, caps), likewise
}

// New builds a Server from o.
func New(o Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	if o.ConnEnded == nil {
		o.ConnEnded = func() {}
	}
	var started string
	if !o.Started.IsZero() {
		started = o.Started.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	return &Server{
		cfg: o.Config, version: o.Version, started: started, log: o.Log, tokens: o.Tokens, registry: o.Registry, events: o.Events,
		budget: o.Budget, host: o.Host, metrics: o.Metrics, connEnded: o.ConnEnded, now: time.Now, tls: o.TLS,
		connCtx: ctx, stopConns: cancel, conns: map[*conn]struct{}{}, tokenBudgets: map[string]*tokenBudget{},
		pendingSocks: newPendingSet(),
	}
}

// Upgrading makes the coming shutdown an upgrade in place: connections
// close with 1012 "host upgrading" instead of 1001 "host shutting down".
func (s *Server) Upgrading() { s.upgrading.Store(true) }

// IsUpgrading reports whether Upgrading was called.
func (s *Server) IsUpgrading() bool { return s.upgrading.Load() }

// goingAway is the close code and reason of a connection the host ends
// at shutdown.
func (s *Server) goingAway() (websocket.StatusCode, string) {
	if s.upgrading.Load() {
		return websocket.StatusServiceRestart, "host upgrading"
	}
	return websocket.StatusGoingAway, "host shutting down"
}

// Subprotocol is the WebSocket subprotocol of AHP/1.
const Subprotocol = "ahp.v1"

// sharedFloor is what each connection may have in started messages
// beyond maxTotalBufferedBytes (flow.SenderConfig.SharedFloor): while
// bulk viewers hold the daemon's total, another connection's echo and
// small updates still go out at once.
const sharedFloor = 64 << 10

// Handler returns the HTTP handler: /v1/ws, /v1/check, /healthz,
// /metrics and the web page, under the prefix of publicUrl's path
// (config.Config.BasePath; "/" without one).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	p := s.cfg.BasePath()
	mux.HandleFunc("GET "+p+"v1/ws", s.serveWS)
	mux.HandleFunc(p+CheckPath, s.serveCheck)
	mux.HandleFunc("GET "+p+"healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	if s.metrics != nil {
		mux.Handle("GET "+p+"metrics", s.metrics)
	}
	if p == "/" {
		mux.Handle("/", webui.Handler())
	} else {
		// The page's own URLs are relative: served under the prefix, it
		// loads its files and dials its WebSocket under it. ServeMux
		// redirects the prefix without its final slash to it; / too,
		// for whoever opens the listener's address itself.
		mux.Handle(p, http.StripPrefix(strings.TrimSuffix(p, "/"), webui.Handler()))
		mux.Handle("GET /{$}", http.RedirectHandler(p, http.StatusSeeOther))
	}
	return s.served(s.checkHost(mux))
}

// served stops counting a request's socket as pending: its headers are
// in (pendingSet).
func (s *Server) served(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sock := socketOf(r); sock != nil {
			s.pendingSocks.remove(sock)
		}
		next.ServeHTTP(w, r)
	})
}

// logEvicted logs, at most once a second, that pending sockets were
// closed for newer ones.
func (s *Server) logEvicted(remote string) {
	if n, ok := s.refuseLog.allow(s.now()); ok { // a client retrying in a loop must not flood the log
		s.log.Warn("closed the oldest pending connection for a new one (maxPendingConnections)", "max", s.host.Limits().MaxPendingConnections, "remote", remote, "suppressed", n)
	}
}

// checkHost refuses, on every path, a request whose Host header is not
// one of ours: a page on another origin whose name an attacker points at
// 127.0.0.1 (DNS rebinding) sends its own name as Host, and would
// otherwise be same-origin with the daemon. Allowed are IP literals (no
// DNS name to rebind), localhost and *.localhost (browsers resolve them
// to loopback themselves), the listen host, and allowedHosts.
func (s *Server) checkHost(next http.Handler) http.Handler {
	check := s.cfg.BasePath() + CheckPath
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /v1/check answers for any Host: it says whether this one would
		// be refused, and holds nothing a foreign page could use.
		if !s.hostAllowed(r.Host) && r.URL.Path != check {
			if n, ok := s.refuseLog.allow(s.now()); ok { // a client retrying in a loop must not flood the log
				s.log.Warn("request refused: host not allowed", "host", Truncate(r.Host, 128), "path", Truncate(r.URL.Path, 128), "remote", r.RemoteAddr, "suppressed", n)
			}
			http.Error(w, hostRefusal(r.Host), http.StatusMisdirectedRequest)
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

// setOrigins computes the Origin allow-list for the address the listener
// got (the port may have been 0): the daemon's own origins, which are
// always allowed — the listen address and, for a loopback listener,
// localhost, 127.0.0.1 and [::1] on its port, with the listener's scheme;
// publicUrl's origin — and allowedOrigins, with http or https, added to
// them (docs/protocol-decisions.md, "Reverse proxies and TLS").
func (s *Server) setOrigins(addr net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfgHost, _, _ := net.SplitHostPort(s.cfg.Listen)
	s.hosts = append([]string{hostName(cfgHost)}, lowerAll(s.cfg.AllowedHosts)...)
	s.origins = nil
	// A page the daemon served itself has the listener's scheme.
	scheme := s.cfg.Scheme()
	if host, port, err := net.SplitHostPort(addr.String()); err == nil {
		own := []string{net.JoinHostPort(cfgHost, port), net.JoinHostPort(host, port)}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || cfgHost == "localhost" {
			own = append(own, "localhost:"+port, "127.0.0.1:"+port, "[::1]:"+port)
		}
		for _, hp := range own {
			s.origins = append(s.origins, scheme+"://"+strings.ToLower(hp))
		}
	}
	if u, err := config.ParsePublicURL(s.cfg.PublicURL); err == nil && u != nil {
		s.origins = append(s.origins, u.Scheme+"://"+originHostPort(u.Scheme, u.Host))
		s.hosts = append(s.hosts, hostName(u.Host))
	}
	for _, hp := range lowerAll(s.cfg.AllowedOrigins) {
		s.origins = append(s.origins, "http://"+hp, "https://"+hp)
	}
}

// originHostPort returns host with the scheme's default port when it has
// none, lowercased.
func originHostPort(scheme, host string) string {
	host = strings.ToLower(host)
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	switch scheme {
	case "https":
		return host + ":443"
	default:
		return host + ":80"
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
	return s.originValueAllowed(r.Header.Get("Origin"))
}

// originValueAllowed reports whether an Origin header value o is allowed
// ("" is: clients other than browsers send none).
func (s *Server) originValueAllowed(o string) bool {
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	origin := u.Scheme + "://" + originHostPort(u.Scheme, u.Host)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.origins, origin)
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if !s.originAllowed(r) {
		if n, ok := s.refuseLog.allow(s.now()); ok { // a client retrying in a loop must not flood the log
			s.log.Warn("upgrade refused: origin not allowed", "origin", Truncate(r.Header.Get("Origin"), 128), "remote", r.RemoteAddr, "suppressed", n)
		}
		http.Error(w, originRefusal(r.Header.Get("Origin")), http.StatusForbidden)
		return
	}
	if s.connCtx.Err() != nil {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	// Until it initializes, a connection counts as pending (pendingSet):
	// initialize or its end stops counting it. One whose upgrade carries
	// a valid bearer token is not counted, so that a flood of sockets
	// that never authenticate cannot hold it back.
	remote, sock, bearer := r.RemoteAddr, socketOf(r), BearerToken(r)
	if sock != nil && (bearer == "" || !s.tokens.Valid(bearer)) {
		if n := s.pendingSocks.add(sock, s.host.Limits().MaxPendingConnections); n > 0 {
			s.logEvicted(r.RemoteAddr)
		}
	}
	upgraded := false
	defer func() {
		if !upgraded && sock != nil {
			s.pendingSocks.remove(sock)
		}
	}()
	opts := &websocket.AcceptOptions{
		Subprotocols:       []string{Subprotocol},
		InsecureSkipVerify: true, // Origin checked above against our own list
		CompressionMode:    websocket.CompressionDisabled,
	}
	if s.cfg.WebsocketCompression == "deflate" {
		// No context takeover, either way: each message is compressed on
		// its own with a flate writer from the library's pool, so an idle
		// connection holds none. With context takeover each connection
		// kept a flate writer of 1.2 MB (and a 32 KiB window for its
		// inbound messages) from its first compressed message to its end:
		// 200 idle viewers took 240 MB of heap. What takeover saves is
		// the history of earlier messages, which matters little for a
		// terminal's output messages (4–48 KiB each under a flood;
		// docs/benchmarks.md, "What did not work, and why", has the bytes
		// and CPU of both).
		opts.CompressionMode = websocket.CompressionNoContextTakeover
		opts.CompressionThreshold = 1024
	}
	ws, err := websocket.Accept(writeBufferHijacker{w}, r, opts)
	if err != nil {
		return // Accept wrote the HTTP error
	}
	// The connection is served by a goroutine of its own, and this
	// handler returns: net/http's state for the request (its connection
	// struct with a 4 KiB write buffer, the response's 2 KiB buffer, the
	// request and its headers, a goroutine stack grown by the handshake)
	// would otherwise stay live as long as the connection, about 12 KiB
	// per idle viewer.
	// Registered under s.mu, so that shutdown, which sets closing under
	// it before it waits, either waits for this goroutine or is seen by
	// it: no Add races the Wait.
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ws.Close(s.goingAway())
		return // the deferred call gives the pending slot back
	}
	s.upgraded.Add(1)
	s.mu.Unlock()
	upgraded = true // the goroutine below gives the pending slot back
	go func() {
		defer s.upgraded.Done()
		defer func() {
			if sock != nil {
				s.pendingSocks.remove(sock)
			}
		}()
		ws.SetReadLimit(s.host.Limits().MaxInboundMessageBytes)
		if ws.Subprotocol() != Subprotocol {
			_ = ws.Close(websocket.StatusPolicyViolation, "subprotocol "+Subprotocol+" required")
			return
		}
		s.serveConn(ws, remote, sock, bearer)
	}()
}

// serveConn serves one upgraded connection over t until it ends, and
// reports whether it had initialized (the pending count is the caller's).
// sock, the socket's byte counts, may be nil.
func (s *Server) serveConn(t transport, remote string, sock *countingConn, bearer string) (initialized bool) {
	limits := s.host.Limits()
	// The connection's memory is its control lane, what kinds queue for
	// its subscribers (telemetry batches), the messages its subscriptions
	// have started (each a text its viewer holds: a piece of a snapshot
	// or of the output log), inbound messages waiting and incomplete
	// ones, and the transport's frames. maxBufferedBytes is shared out
	// below between the first three; inbound messages waiting are held
	// to maxBufferedBytes of their own (readLoop), incomplete ones to a
	// quarter of it (handleFrame), and the transport's frames are not
	// counted. Terminal output itself is shared by all viewers of a
	// terminal (each holds a cursor), and so are snapshot texts
	// (docs/protocol-decisions.md, "Memory per connection").
	// Connections together are held to maxTotalBufferedBytes (the
	// shared budget), and the connections of one token to
	// maxBufferedBytesPerToken inside it (budgets.go): past either, a new
	// connection is refused once it authenticated (attachToken), except
	// the admin's, and existing ones go on as their messages finish.
	// maxBufferedBytes is shared out: the control lane a quarter (at
	// most 4 MiB), what kinds queue for the subscribers a quarter
	// (conn.queued), and the started data messages the rest.
	control := min(4<<20, limits.MaxBufferedBytes/4)
	queue := limits.MaxBufferedBytes / 4
	sender, err := flow.NewSender(flow.SenderConfig{
		ControlBytes: control,
		ActiveBytes:  limits.MaxBufferedBytes - control - queue,
		Shared:       s.budget, // the token's, from initialize on
		SharedFloor:  sharedFloor,
	})
	if err != nil {
		_ = t.Close(websocket.StatusInternalError, "internal error")
		return false
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = t.Close(s.goingAway())
		return false
	}
	s.nextConn++
	id := "c" + strconv.Itoa(s.nextConn)
	now := time.Now()
	c := &conn{
		srv:         s,
		ws:          t,
		log:         s.log,
		id:          id,
		remote:      remote,
		wire:        sock,
		bearer:      bearer,
		opened:      now,
		limits:      limits,
		sender:      sender,
		queueMax:    queue,
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
		rttSample:   make(chan time.Duration, 1),
		rttWake:     make(chan struct{}, 1),
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	s.log.Info("connection opened", "conn", id, "remote", remote)
	defer func() {
		if c.initialized {
			s.events.Publish(events.Event{Kind: "viewer.left", Viewer: id})
		}
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.connEnded()
		s.connWG.Done()
	}()
	c.serve(s.connCtx)
	return c.initialized
}

// BearerToken returns the token of an `Authorization: Bearer` header, or
// "".
func BearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// Each viewer socket bounds what its kernel holds unsent to unsent.Bytes
// (TCP_NOTSENT_LOWAT): frames queued in the kernel are beyond the
// scheduler's reach, and a keystroke's echo would wait behind all of a
// flooding neighbour's bytes there (§7 bounds what waits ahead of an
// interactive frame). Unlike the 256 KiB SO_SNDBUF it replaced (issue 40),
// it leaves the bytes in flight to the kernel's autotuning, so a long path
// is not capped at the buffer per round trip.

// wsWriteBuffer is each viewer socket's bufio write buffer, through which
// the WebSocket library writes a frame's header and payload. It is small:
// a data frame's writes are corked (countingConn.cork) and leave in one
// write however many pieces the buffer cuts them into, so the buffer
// need not hold a whole frame. It was 64 KiB per connection, for one
// write per frame, before the cork (and net/http hands a hijacked
// connection 4 KiB, which split a frame in two writes and woke the
// viewer twice).
const wsWriteBuffer = 512

// writeBufferHijacker gives the connection it hijacks a wsWriteBuffer
// write buffer and a wsReadBuffer read buffer.
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
	if brw.Reader.Buffered() == 0 { // a client waits for the 101 before it sends
		// Headers and small messages (credit, keystrokes) are read
		// through it; a larger payload is read straight into the
		// message's memory whatever its size. 4 KiB from net/http.
		brw.Reader = bufio.NewReaderSize(c, wsReadBuffer)
	}
	return c, brw, nil
}

// wsReadBuffer is each viewer socket's bufio read buffer.
const wsReadBuffer = 1 << 10

// sndbufListener bounds each accepted socket's unsent bytes and counts its
// bytes (for the compression ratio in stats: the WebSocket library does
// not report compressed sizes).
type sndbufListener struct{ net.Listener }

func (l sndbufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	unsent.Limit(c, unsent.Bytes)
	return &countingConn{Conn: cork.New(rawio.NewConn(c))}, nil
}

// countingConn counts the bytes through a socket, and while corked holds
// what is written to it, so that a frame, or the frames queued behind it,
// leave in one write (internal/cork).
type countingConn struct {
	*cork.Conn // writes: counted (Written), held while corked
	in         atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

// cork holds what is written to the socket until uncork, which writes it
// in one system call. A nil c does nothing.
func (c *countingConn) cork() {
	if c != nil {
		c.Conn.Cork()
	}
}

// uncork writes what cork held, and returns the error of that write or of
// an earlier one.
func (c *countingConn) uncork() error {
	if c == nil {
		return nil
	}
	return c.Conn.Uncork()
}

type connKey struct{}

// underTLS returns the socket under a TLS connection, or c: the pending
// set and the byte counts know the counting socket.
func underTLS(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.NetConn()
	}
	return c
}

// socketOf returns the counting socket under an HTTP request, if any.
func socketOf(r *http.Request) *countingConn {
	c, _ := r.Context().Value(connKey{}).(*countingConn)
	return c
}

// Serve serves HTTP on ln until ctx is cancelled, then shuts down: every
// connection closes with 1001 and Serve returns once they have ended,
// within Config.ShutdownTimeout (then the remaining ones are cut off).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.setOrigins(ln.Addr())
	ln = sndbufListener{ln}
	if s.tls != nil {
		// TLS on top of the counting socket: what is corked and counted
		// are TLS records. An upgrade in place hands over the raw
		// listener, which the new binary wraps again.
		tc := s.tls.Clone()
		tc.NextProtos = []string{"http/1.1"} // WebSockets over HTTP/2 (RFC 8441) are not served
		tc.MinVersion = max(tc.MinVersion, tls.VersionTLS12)
		ln = tls.NewListener(ln, tc)
	}
	hs := &http.Server{
		Handler: s.Handler(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, underTLS(c))
		},
		ReadHeaderTimeout: 10 * time.Second,
		// A socket counts as pending while it sends a request's headers
		// and while it idles between requests; serving a request stops
		// counting it (Handler), and serveWS counts an upgrade again
		// until it initializes.
		ConnState: func(c net.Conn, st http.ConnState) {
			c = underTLS(c)
			switch st {
			case http.StateNew, http.StateIdle:
				if s.pendingSocks.add(c, s.host.Limits().MaxPendingConnections) > 0 {
					s.logEvicted(c.RemoteAddr().String())
				}
			case http.StateClosed:
				s.pendingSocks.remove(c)
			}
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
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
	s.closing = true // no new connection from here on
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
	// A connection upgraded as shutdown began finds closing set and ends
	// at once (serveConn).
	s.upgraded.Wait()
	s.closers.Wait()
}

// closeSoon closes a channel without blocking the caller (a connection's
// run loop): a channel's Close may wait for its process or socket.
func (s *Server) closeSoon(uri string) {
	s.closers.Go(func() { _ = s.host.CloseChannel(uri) })
}

// viewerQueryTimeout bounds how long ListViewers waits for one connection's
// run loop; a connection that is closing does not answer and is left out.
const viewerQueryTimeout = 500 * time.Millisecond

// viewerQueryParallel bounds the connections inspected at once.
const viewerQueryParallel = 16

// PendingConnections returns how many sockets wait unauthenticated
// (maxPendingConnections bounds it).
func (s *Server) PendingConnections() int { return s.pendingSocks.len() }

// ConnectionCount returns the number of open viewer connections.
func (s *Server) ConnectionCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// ListViewers lists the open connections, oldest first. It waits at most
// viewerQueryTimeout for each connection, so a connection that is closing
// is left out instead of holding up the list.
func (s *Server) ListViewers(ctx context.Context) []ViewerInfo {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	infos := make([]ViewerInfo, len(conns))
	ok := make([]bool, len(conns))
	sem := make(chan struct{}, viewerQueryParallel)
	var wg sync.WaitGroup
	for i, c := range conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			qctx, cancel := context.WithTimeout(ctx, viewerQueryTimeout)
			defer cancel()
			infos[i], ok[i] = c.inspect(qctx)
		})
	}
	wg.Wait()
	out := make([]ViewerInfo, 0, len(conns))
	for i := range infos {
		if ok[i] {
			out = append(out, infos[i])
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Opened.Equal(out[j].Opened) {
			return out[i].Opened.Before(out[j].Opened)
		}
		return connNumber(out[i].ID) < connNumber(out[j].ID)
	})
	return out
}

// connNumber orders ids "c2" before "c10".
func connNumber(id string) int {
	n := 0
	for _, r := range strings.TrimPrefix(id, "c") {
		if r < '0' || r > '9' {
			return 0
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// Kick asks connection id to close with 1008 and reason, and returns the
// token it uses (id and parent; "" before initialize or for the admin
// token); ok is false for an unknown id.
func (s *Server) Kick(id, reason string) (tokenID, tokenParent string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.id == id {
			select {
			case c.kick <- reason:
			default:
			}
			if ref := c.token.Load(); ref != nil {
				return ref.ID, ref.Parent, true
			}
			return "", "", true
		}
	}
	return "", "", false
}

// RecheckTokens makes every connection check its token before it handles
// another message; those whose token is gone (revoked) close. Before it
// returns, every connection whose token no longer works is muted: its
// writer writes no further frame, only the close (docs/security.md).
func (s *Server) RecheckTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if ref := c.token.Load(); ref != nil && s.tokens.Check(ref.grant) != nil {
			c.muted.Store(true)
		}
		c.tokenDirty.Store(true)
		select {
		case c.wakeSig <- struct{}{}:
		default:
		}
	}
}
