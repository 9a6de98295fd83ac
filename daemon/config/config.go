package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/limits"
	"github.com/ahp-dev/ahpd/tcp"
)

// Limits are the per-connection bounds of PROTOCOL.md §9 and the
// flow-control defaults and maximums of §3. Zero fields take the defaults
// (DefaultLimits). Each field's tag names its row in internal/limits, the
// one table of limits: defaults, smallest values and the control API
// follow from it. They may change at run time; a change applies to new
// connections and subscriptions, and to timers of existing ones within a
// second.
type Limits struct {
	// MaxBufferedBytes bounds what one connection holds for its client:
	// queued control messages, frames in the transport and inbound
	// messages waiting (each counted at length + 1 KiB). Default 64 MiB.
	MaxBufferedBytes int64 `limit:"maxBufferedBytes"`
	// MaxOutputStall closes a connection (1008) whose socket took none of
	// the bytes it had to write for this long. Default 60 s.
	MaxOutputStall time.Duration `limit:"maxOutputStall"`
	// MaxSubscriptions per connection; more get -32004. Default 1024.
	MaxSubscriptions int `limit:"maxSubscriptions"`
	// MaxIDLength bounds JSON-RPC ids, channel ids and subscription ids
	// (characters). Default 1024.
	MaxIDLength int `limit:"maxIdLength"`
	// MaxInboundMessageBytes bounds one inbound WebSocket message; larger
	// closes with 1009. Default 1 MiB.
	MaxInboundMessageBytes int64 `limit:"maxInboundMessageBytes"`
	// HeartbeatInterval is the ping period; a connection with no pong and
	// no inbound traffic for 3 intervals is closed. Default 15 s.
	HeartbeatInterval time.Duration `limit:"heartbeatInterval"`
	// InitializeTimeout is how long a connection may take to initialize
	// (§2). Default 10 s.
	InitializeTimeout time.Duration `limit:"initializeTimeout"`
	// ClientReceiveDefaults apply when a subscribe omits flowControl.
	// Default window 1 MiB, frame 64 KiB, message 1 MiB.
	ClientReceiveDefaults flow.ReceiveLimits `limit:"clientReceiveDefaults"`
	// ClientReceiveMaximums cap what a client may request. Default window
	// 64 MiB, frame 1 MiB, message 16 MiB.
	ClientReceiveMaximums flow.ReceiveLimits `limit:"clientReceiveMaximums"`
	// HostReceive are the host's receive limits for client→host data.
	// Default window 256 KiB, frame 64 KiB, message 256 KiB. The frame
	// limit must not exceed MaxInboundMessageBytes.
	HostReceive flow.ReceiveLimits `limit:"hostReceive"`
	// TerminalViewerBacklog is how much live output a terminal viewer may
	// fall behind beyond its window before it is dropped and resnapshotted.
	// Default 1 MiB.
	TerminalViewerBacklog int64 `limit:"terminalViewerBacklog"`
	// MaxPendingConnections bounds the WebSocket connections that have not
	// initialized yet, daemon-wide; an upgrade beyond it gets HTTP 503.
	// Default 256.
	MaxPendingConnections int `limit:"maxPendingConnections"`
	// MaxTerminals bounds the terminal channels (running or exited, until
	// closed), daemon-wide; creating one beyond it fails with ErrTooMany.
	// Default 256.
	MaxTerminals int `limit:"maxTerminals"`
	// TCPRetain is how long a TCP channel whose consumer left keeps its
	// socket for a resume (PROTOCOL.md §8); a channel reads it when its
	// consumer leaves. Default 60 s, at least 1 s.
	TCPRetain time.Duration `limit:"tcpRetain"`
	// MaxViewersPerTerminal bounds the subscriptions of one terminal,
	// over every connection; one more gets -32004. Default 1024.
	MaxViewersPerTerminal int `limit:"maxViewersPerTerminal"`
	// MaxTCPChannels bounds the TCP channels, daemon-wide, and
	// MaxTCPChannelsPerToken those one token created (retained ones
	// included, until they end); one more fails with -32004 /
	// RESOURCE_EXHAUSTED naming the limit. Defaults 256 and 64.
	MaxTCPChannels         int `limit:"maxTcpChannels"`
	MaxTCPChannelsPerToken int `limit:"maxTcpChannelsPerToken"`
	// TCPMaxRetainedBytes caps what a TCP channel's journal retains for a
	// resume (sent and not yet credited), whatever window its client
	// asked: it stops reading its target at the cap. Default 16 MiB (of
	// window: base64 in JSON, 6 MB of data, so 100 Mbit/s to a 480 ms
	// round trip; 4 MiB capped a 200 ms path at 7.5 MB/s, issue 40). The
	// journals count in their token's budget.
	TCPMaxRetainedBytes int64 `limit:"tcpMaxRetainedBytes"`
	// TelemetryMaxSeries bounds the distinct series of one telemetry
	// channel; samples of further series are dropped and counted.
	// Applies to channels created after the change. Default 10,000.
	TelemetryMaxSeries int `limit:"telemetryMaxSeries"`
	// RecordingMaxBytes caps one recording's files (.cast and index
	// together): at the cap the file ends with a marker and recording
	// goes on in a new file of the same terminal (docs/recording.md).
	// Default 64 MiB, at least 64 KiB.
	RecordingMaxBytes int64 `limit:"recordingMaxBytes"`
	// RecordingsMaxTotalBytes caps the recordings directory: the oldest
	// recordings (.cast and index together) are deleted first; one being
	// written only if it alone exceeds the cap. Default 1 GiB, at least
	// 1 MiB.
	RecordingsMaxTotalBytes int64 `limit:"recordingsMaxTotalBytes"`
	// RecordingKeyframeBytes and RecordingKeyframeInterval space a
	// recording's keyframes (screen snapshots in its index, for seeking):
	// one after this much output, or this long after the last one when
	// output came since. Defaults 1 MiB (at least 64 KiB) and 60 s (at
	// least 1 s).
	RecordingKeyframeBytes    int64         `limit:"recordingKeyframeBytes"`
	RecordingKeyframeInterval time.Duration `limit:"recordingKeyframeInterval"`
}

// DefaultLimits returns the documented defaults (internal/limits).
func DefaultLimits() Limits {
	var l Limits
	for _, f := range limits.All() {
		l.SetLimitValue(f.Name, f.Default)
	}
	return l
}

// WithDefaults returns a copy with zero fields set to their defaults; a
// flow-control group that is all zero takes the default group.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	for _, f := range limits.All() {
		if _, _, grouped := f.Group(); grouped {
			continue
		}
		if v, _ := l.LimitValue(f.Name); v == 0 {
			dv, _ := d.LimitValue(f.Name)
			l.SetLimitValue(f.Name, dv)
		}
	}
	for _, g := range limits.Groups {
		if *l.group(g) == (flow.ReceiveLimits{}) {
			*l.group(g) = *d.group(g)
		}
	}
	return l
}

// Validate rejects contradictions, naming the field.
func (l Limits) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("limits: %s: %s", field, why) }
	for _, f := range limits.All() {
		if v, _ := l.LimitValue(f.Name); f.Min > 0 && v < f.Min {
			return bad(f.Name, "must be at least "+f.MinText)
		}
	}
	for _, f := range []struct {
		name string
		v    flow.ReceiveLimits
	}{{"clientReceiveDefaults", l.ClientReceiveDefaults}, {"clientReceiveMaximums", l.ClientReceiveMaximums}, {"hostReceive", l.HostReceive}} {
		if err := f.v.Validate(); err != nil {
			return bad(f.name+"."+err.(*flow.LimitError).Field, err.(*flow.LimitError).Reason)
		}
	}
	if _, err := flow.Negotiate(l.ClientReceiveDefaults, l.ClientReceiveMaximums); err != nil {
		return bad("clientReceiveDefaults", err.Error())
	}
	// A frame of F UTF-16 bytes is at most 1.5·F bytes of UTF-8 (a
	// 3-byte character is one 2-byte UTF-16 unit), and it must fit in one
	// inbound WebSocket message.
	if l.HostReceive.MaximumFrameBytes*3/2 > l.MaxInboundMessageBytes {
		return bad("hostReceive.maximumFrameBytes", "must fit in maxInboundMessageBytes (UTF-8 can be 1.5× the UTF-16 size)")
	}
	if l.RecordingsMaxTotalBytes < l.RecordingMaxBytes {
		return bad("recordingsMaxTotalBytes", "must be at least recordingMaxBytes")
	}
	if l.MaxBufferedBytes < l.MaxInboundMessageBytes+1024 {
		return bad("maxBufferedBytes", "must hold at least one inbound message (maxInboundMessageBytes + 1 KiB)")
	}
	return nil
}

// Config is the daemon's configuration. Zero fields take defaults.
type Config struct {
	// Listen is the HTTP + WebSocket address. Default 127.0.0.1:7681.
	Listen string
	// StateDir holds admin.token (0600). Default $STATE_DIRECTORY, else
	// $XDG_STATE_HOME/ahpd, else ~/.local/state/ahpd.
	StateDir string
	// AllowedOrigins lists host:port values a browser's Origin may have
	// (http or https) besides the daemon's own, which are always allowed:
	// the listen address, for a loopback listener also localhost,
	// 127.0.0.1 and [::1] on the same port (with the listener's scheme),
	// and PublicURL's origin.
	AllowedOrigins []string
	// AllowedHosts lists host names a request's Host header may have
	// besides those always allowed: IP literals, localhost, *.localhost
	// and the listen host. "*" allows any. Set it when a proxy or tunnel
	// serves ahpd under another name; other requests get 421.
	AllowedHosts []string
	// PublicURL is the URL browsers and remote clients reach the daemon
	// at, through a reverse proxy (https://example.com/ahpd/): the links
	// the daemon prints use it, its path is the prefix the daemon serves
	// everything under (the page, /v1/ws, /healthz, /metrics), and its
	// host and origin are allowed (AllowedHosts, AllowedOrigins). Default
	// "": links name the listen address, served at /. Config file key
	// publicUrl, flag --public-url.
	PublicURL string
	// TLSCert and TLSKey are PEM files of the certificate (chain) and its
	// key: when set, the listener serves HTTPS and WSS only. Both or
	// neither. SIGHUP reads them again. Config file keys tlsCert and
	// tlsKey, flags --tls-cert and --tls-key.
	TLSCert, TLSKey string
	// InsecureListen lets the daemon listen on an address other than
	// loopback without TLS (a proxy in front terminates TLS, or a trusted
	// network). Default false: such a listener is refused at start.
	// Config file key insecureListen, flag --insecure-listen.
	InsecureListen bool
	// WebsocketCompression is "deflate" (default) or "none".
	WebsocketCompression string
	// DefaultTerminal starts one terminal running the login shell when no
	// other channel is configured. Default true (see NoDefaultTerminal).
	NoDefaultTerminal bool
	// NoTypingFirst reads a terminal that floods at full speed even while
	// another terminal is typed into; by default it is paced then
	// (pty.Pacer). Config file key typingFirst, flag --no-typing-first.
	NoTypingFirst bool
	// DaemonTelemetry creates the telemetry channel ahp-telemetry:/ahpd
	// at start: the daemon's own figures (connections, subscriptions,
	// bytes, drops, snapshots, resets) every second. Default false. Config
	// file key daemonTelemetry, flag --daemon-telemetry.
	DaemonTelemetry bool
	// ShutdownTimeout bounds a graceful shutdown. Default 10 s.
	ShutdownTimeout time.Duration
	// MetricsPublic serves /metrics without a token. Default false: a
	// request needs Authorization: Bearer with the admin token or a token
	// that reaches every channel.
	MetricsPublic bool
	// TicketTTL is the lifetime of the single-use ticket in the URL that
	// the daemon prints at start. Default 10 min.
	TicketTTL time.Duration
	// MaxTotalBufferedBytes bounds what all connections together hold
	// for their clients (the started messages of maxBufferedBytes, summed
	// over connections): at the bound no connection starts another
	// message until one finishes, and a new connection is refused with
	// 1008. Default 512 MiB; at least Limits.MaxBufferedBytes. Config
	// file key maxTotalBufferedBytes; a restart applies a change.
	MaxTotalBufferedBytes int64
	// MaxBufferedBytesPerToken bounds, inside MaxTotalBufferedBytes, what
	// the connections of one token hold together: their started
	// messages, their subscribers' queues and subscriptions, and the
	// journals of the TCP channels the token created. The admin token
	// counts in the total alone. Default (0) a quarter of
	// MaxTotalBufferedBytes (PerTokenBufferedBytes); at least
	// Limits.MaxBufferedBytes. Config file key maxBufferedBytesPerToken;
	// a restart applies a change.
	MaxBufferedBytesPerToken int64
	// MaxConnectionsPerToken bounds the open connections that use one
	// token (a ticket's connections count on its reconnect token); the
	// admin token has no bound. Past it, initialize succeeds and the
	// connection closes with 1008. Default 64. Config file key
	// maxConnectionsPerToken; a restart applies a change.
	MaxConnectionsPerToken int
	// TCPAllow are the rules admitting the targets TCP channels may dial
	// (tcp.AllowList; PROTOCOL.md §8). Default none: nothing may be
	// dialed. Config file key tcpAllow; the daemon adds the rules kept in
	// its state directory (`ahpctl tcp allow`), at start and at SIGHUP,
	// and `ahpctl tcp deny` of one of the file's rules rewrites the key.
	TCPAllow []tcp.Rule
	// Record is how new terminals are recorded unless their creation says
	// otherwise: "off" (default), "output" or "output+input"
	// (docs/recording.md). Input recording captures what is typed,
	// passwords included. Config file key record; a restart applies a
	// change.
	Record string
	Limits Limits
}

// RecordModes are the values of Config.Record, ahpctl terminal create
// --record and the control API's record and mode fields.
var RecordModes = []string{"off", "output", "output+input"}

func defaultStateDir() string {
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		return filepath.SplitList(d)[0]
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "ahpd")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "ahpd")
	}
	return filepath.Join(os.TempDir(), "ahpd-state")
}

// WithDefaults returns a copy with defaults applied.
func (c Config) WithDefaults() Config {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7681"
	}
	if c.StateDir == "" {
		c.StateDir = defaultStateDir()
	}
	if c.WebsocketCompression == "" {
		c.WebsocketCompression = "deflate"
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.TicketTTL == 0 {
		c.TicketTTL = 10 * time.Minute
	}
	if c.MaxTotalBufferedBytes == 0 {
		c.MaxTotalBufferedBytes = 512 << 20
	}
	if c.MaxConnectionsPerToken == 0 {
		c.MaxConnectionsPerToken = 64
	}
	if c.Record == "" {
		c.Record = "off"
	}
	c.Limits = c.Limits.WithDefaults()
	return c
}

// Validate checks a defaulted Config.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %v", err)
	}
	if _, err := ParsePublicURL(c.PublicURL); err != nil {
		return fmt.Errorf("publicUrl: %v", err)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		if c.TLSCert == "" {
			return fmt.Errorf("tlsKey: needs tlsCert (--tls-cert) too: give both or neither")
		}
		return fmt.Errorf("tlsCert: needs tlsKey (--tls-key) too: give both or neither")
	}
	if c.WebsocketCompression != "deflate" && c.WebsocketCompression != "none" {
		return fmt.Errorf("websocketCompression: must be deflate or none, got %q", c.WebsocketCompression)
	}
	if c.ShutdownTimeout <= 0 {
		return fmt.Errorf("shutdownTimeout: must be positive")
	}
	if !slices.Contains(RecordModes, c.Record) {
		return fmt.Errorf("record: must be off, output or output+input, got %q", c.Record)
	}
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	if c.MaxConnectionsPerToken < 0 {
		return fmt.Errorf("maxConnectionsPerToken: must be positive")
	}
	if c.MaxTotalBufferedBytes < c.Limits.MaxBufferedBytes {
		return fmt.Errorf("maxTotalBufferedBytes: must be at least maxBufferedBytes (%d)", c.Limits.MaxBufferedBytes)
	}
	if c.MaxBufferedBytesPerToken != 0 && (c.MaxBufferedBytesPerToken < c.Limits.MaxBufferedBytes || c.MaxBufferedBytesPerToken > c.MaxTotalBufferedBytes) {
		return fmt.Errorf("maxBufferedBytesPerToken: must be between maxBufferedBytes (%d) and maxTotalBufferedBytes (%d)", c.Limits.MaxBufferedBytes, c.MaxTotalBufferedBytes)
	}
	return nil
}

// PerTokenBufferedBytes returns MaxBufferedBytesPerToken, or its default:
// a quarter of MaxTotalBufferedBytes, and at least MaxBufferedBytes.
func (c Config) PerTokenBufferedBytes() int64 {
	if c.MaxBufferedBytesPerToken > 0 {
		return c.MaxBufferedBytesPerToken
	}
	return max(c.MaxTotalBufferedBytes/4, c.Limits.MaxBufferedBytes)
}

// ReconnectTokenTTL returns the lifetime of the token given to a viewer
// that authenticated with a single-use ticket.
func (c Config) ReconnectTokenTTL() time.Duration { return 24 * time.Hour }

// TLS reports whether the listener serves TLS (TLSCert and TLSKey set).
func (c Config) TLS() bool { return c.TLSCert != "" && c.TLSKey != "" }

// ParsePublicURL checks a publicUrl value and returns it with its path
// ending in "/" (nil for ""): an absolute http or https URL with a host,
// without user, query or fragment.
func ParsePublicURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("want a URL such as https://example.com/ahpd/, got %q", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("want an http or https URL with a host (https://example.com/ahpd/), got %q", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return nil, fmt.Errorf("want no user, query or fragment, got %q", raw)
	}
	if u.Port() == "" && strings.HasSuffix(u.Host, ":") {
		return nil, fmt.Errorf("empty port in %q", raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawPath = ""
	if path.Clean(u.Path) != strings.TrimSuffix(u.Path, "/") && u.Path != "/" {
		return nil, fmt.Errorf("path %q: want a clean path (no //, . or ..)", u.Path)
	}
	return u, nil
}

// BasePath returns the path prefix everything is served under: PublicURL's
// path ("/ahpd/"), or "/".
func (c Config) BasePath() string {
	if u, err := ParsePublicURL(c.PublicURL); err == nil && u != nil {
		return u.Path
	}
	return "/"
}

// Scheme returns the listener's scheme: "https" with TLS, else "http".
func (c Config) Scheme() string {
	if c.TLS() {
		return "https"
	}
	return "http"
}

// LocalBaseURL returns the page's URL on the listener bound to addr
// (host:port), with an unspecified host (0.0.0.0, ::) replaced by
// loopback, which reaches it from this machine: http(s)://HOST:PORT/PREFIX/.
func (c Config) LocalBaseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return c.Scheme() + "://" + addr + c.BasePath()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return c.Scheme() + "://" + net.JoinHostPort(host, port) + c.BasePath()
}

// BaseURL returns the page's URL for links: PublicURL when set, else
// LocalBaseURL(addr).
func (c Config) BaseURL(addr string) string {
	if u, err := ParsePublicURL(c.PublicURL); err == nil && u != nil {
		return u.String()
	}
	return c.LocalBaseURL(addr)
}
