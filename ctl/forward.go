package ctl

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/units"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

const forwardHelp = `forward listens on LOCAL_ADDR and carries each accepted connection over the
daemon's WebSocket to a TCP socket the daemon holds (PROTOCOL.md §8).

With HOST:PORT, each local connection gets a TCP channel of its own, created
over the WebSocket: the daemon dials HOST:PORT, which its allow-list must admit
('ahpctl tcp allow'). With a channel URI (ahp-tcp:/ID, from 'ahpctl tcp
create'), that one channel is served to the first local connection; later ones
are refused, and forward exits when the channel has ended.

LOCAL_ADDR is HOST:PORT, or PORT alone for 127.0.0.1:PORT (":PORT" listens on
every interface); anything else is bad usage (exit 2). Half-closes pass both
ways; a reset of the target resets the local connection. If the WebSocket
drops, forward reconnects (backoff up to 5 s, for at most a minute) and the
channel resumes where it was: no byte is lost or repeated.

Before it listens, forward connects once and checks what the daemon tells it:
a refused token, URL, Origin or Host, a token that may not create TCP channels
(role view, or scoped to some channels) or does not reach the channel, a
HOST:PORT the daemon's allow-list does not admit (asked without dialing it;
the message names the 'ahpctl tcp allow' to run), and (with --url) a channel
that does not exist end it with exit 1, saying what to do. Later, a kick ends
it too; a refused dial ends only its connection. A status line per connection
goes to stderr (opened, resumed, closed with the bytes each way); --quiet hides
them. Ctrl-C or SIGTERM stops forwarding and exits 0. --compress offers
permessage-deflate (the daemon's websocketCompression decides): by default
(auto) when the daemon is 5 ms or more away, where the link and not the CPU
caps a tunnel (TCP bytes travel as base64 in JSON, 1.35 bytes on the wire per
byte); --compress (always) and --compress=never choose for themselves.

Credentials: through the control socket, forward mints single-use tickets
(role control; over every channel for HOST:PORT, which a create needs) and
keeps the reconnect token the daemon returns. Without the control socket,
--url http://HOST:PORT (or $AHP_URL) names the daemon and the token comes from
--token-file FILE or $AHP_TOKEN, never from the command line; it needs role
control (over every channel for HOST:PORT). A token file that others may read
draws a warning, as ssh does for keys.

forward runs on one CPU (GOMAXPROCS=1): each byte passes from the goroutine
reading the WebSocket to the one writing the local socket, and on one CPU
that hand-off wakes no thread (a fifth more throughput and a quarter less CPU
on a two-core machine, docs/benchmarks.md). Set GOMAXPROCS in the
environment to give it more, for many busy connections at once.`

// forwardProcs returns the GOMAXPROCS forward sets: 1, or 0 (leave it)
// when the environment sets GOMAXPROCS (forwardHelp says why).
func forwardProcs(getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return 0
	}
	return 1
}

func setupForward(fs *flag.FlagSet) action {
	quiet := fs.Bool("quiet", false, "print no status lines")
	compress := &compressFlag{mode: "auto"}
	fs.Var(compress, "compress", "offer permessage-deflate on the WebSocket: auto (when the daemon is 5 ms or more away), always (--compress), never")
	remote := remoteFlags(fs)
	return func(ctx context.Context, a *app, args []string) error {
		if n := forwardProcs(a.getenv); n > 0 {
			runtime.GOMAXPROCS(n)
		}
		f := &forwarder{a: a, quiet: *quiet, compressMode: compress.mode, compress: compress.mode == "always"}
		laddr, err := localAddr(args[0])
		if err != nil {
			return err
		}
		wsURL, token, remoteOK, err := remote.resolve(a.getenv, a.stderr)
		if err != nil {
			return err
		}
		target := args[1]
		if isShortName(target) {
			// A channel's bare ID (ahp-tcp:/ID); with --url it cannot be
			// looked up and means ahp-tcp:/ID.
			if remoteOK {
				target = "ahp-tcp:/" + target
			} else if uri, err := a.channelURI(ctx, target); err == nil {
				target = uri
			} else if _, ambiguous := err.(*usageError); ambiguous {
				return err
			} // else: not a channel; parseTarget says what is wanted
		}
		if err := f.parseTarget(target); err != nil {
			return err
		}
		if remoteOK {
			f.wsURL, f.token = wsURL, token
			if f.tls, err = remote.tlsConfig(wsURL, a.getenv); err != nil {
				return err
			}
		} else {
			c, err := a.clients()
			if err != nil {
				return err
			}
			rctx, cancel := a.rpc(ctx)
			info, err := c.daemon.GetInfo(rctx, &ahpv1.GetInfoRequest{})
			if err == nil && f.uri != "" {
				_, err = c.channels.GetChannel(rctx, &ahpv1.GetChannelRequest{Channel: f.uri})
			}
			cancel()
			if err != nil {
				return err
			}
			f.c, f.wsURL = c, info.WebsocketUrl
			f.tls = localTLS(info.WebsocketUrl)
		}
		f.conns = client.NewRedialer(f.dial)
		defer f.conns.Close()
		// What can be known before a local connection comes is checked
		// now: a wrong URL or token, a credential that may not create
		// channels, a channel that does not exist.
		dctx, cancel := context.WithTimeout(ctx, a.timeout)
		err = f.check(dctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		ln, err := net.Listen("tcp", laddr)
		if err != nil {
			return fmt.Errorf("forward: %w", err)
		}
		defer ln.Close()
		f.statusf("listening on %s, forwarding to %s", ln.Addr(), args[1])
		return f.serve(ctx, ln)
	}
}

// compressAutoRTT is the round trip from which --compress=auto offers
// permessage-deflate: tcp/data carries base64 in JSON, 1.35 bytes on the
// wire per byte of data, so a link, not the CPU, caps a tunnel this far
// away (100 Mbit/s carries 9.3 MB/s of data without compression and 12.2
// with it, docs/benchmarks.md "Real links"), while on loopback and a LAN
// deflate costs more than it saves (80 against 330 MB/s on loopback).
const compressAutoRTT = 5 * time.Millisecond

// decideCompression applies --compress=auto once the first connection's
// round trip is known: from compressAutoRTT on, that connection is closed
// and the Redialer's next one offers permessage-deflate.
func (f *forwarder) decideCompression(conn *client.Conn) {
	if f.compressMode != "auto" || conn.RTT() < compressAutoRTT {
		return
	}
	f.mu.Lock()
	f.compress = true
	f.mu.Unlock()
	f.statusf("the daemon is %v away: compressing (--compress=never turns it off)", conn.RTT().Round(time.Millisecond))
	conn.Close() // the next Get dials with deflate
}

// compressFlag is --compress: auto, always or never; a bare --compress is
// always.
type compressFlag struct{ mode string }

func (c *compressFlag) String() string   { return c.mode }
func (c *compressFlag) IsBoolFlag() bool { return true }
func (c *compressFlag) Set(v string) error {
	switch v {
	case "true", "always":
		c.mode = "always"
	case "false", "never":
		c.mode = "never"
	case "auto":
		c.mode = "auto"
	default:
		return fmt.Errorf("want auto, always or never, got %q", v)
	}
	return nil
}

// localAddr returns LOCAL_ADDR as net.Listen takes it: PORT means
// 127.0.0.1:PORT; HOST:PORT and :PORT are kept. Anything else is bad
// usage.
func localAddr(s string) (string, error) {
	if _, err := strconv.ParseUint(s, 10, 16); err == nil {
		return "127.0.0.1:" + s, nil
	}
	if _, port, err := net.SplitHostPort(s); err == nil {
		if _, err := strconv.ParseUint(port, 10, 16); err == nil {
			return s, nil
		}
	}
	return "", usagef("forward: LOCAL_ADDR %q: want PORT, HOST:PORT or :PORT with a port of 0–65535 (e.g. 8080 or 127.0.0.1:8080)", s)
}

// check connects to the daemon once, as every local connection will, and
// checks what initialize says of the credential (PROTOCOL.md §2, access)
// against what forward will ask of it (§8): creating a TCP channel needs
// role control over every channel, consuming one role control over it.
// For HOST:PORT it asks channels/check whether a create would pass the
// allow-list, without dialing (docs/protocol-decisions.md, "forward's
// checks at start"); with a channel URI and --url it looks the channel up
// (channels/list), which the control plane did otherwise.
func (f *forwarder) check(ctx context.Context) error {
	conn, err := f.conns.Get(ctx)
	if err != nil {
		return fmt.Errorf("forward: %s", explainConn(err, f.c == nil).msg)
	}
	defer f.decideCompression(conn)
	f.mu.Lock()
	access := f.access
	f.mu.Unlock()
	const mint = "mint one with 'ahpctl token create --role control'"
	switch {
	case f.uri == "" && access.Role != "control":
		return fmt.Errorf("forward: the token may not create TCP channels: its role is %s, and creating one needs role control over every channel; %s", access.Role, mint)
	case f.uri == "" && len(access.Channels) > 0:
		return fmt.Errorf("forward: the token may not create TCP channels: it reaches only %s, and creating one needs role control over every channel; %s (without --channel)", strings.Join(access.Channels, ", "), mint)
	case f.uri != "" && access.Role != "control":
		return fmt.Errorf("forward: the token may not carry %s: its role is %s, and a TCP channel's consumer needs role control; %s", f.uri, access.Role, mint+" --channel "+f.uri)
	case f.uri != "" && len(access.Channels) > 0 && !slices.Contains(access.Channels, f.uri):
		return fmt.Errorf("forward: the token does not reach %s (it reaches %s); %s", f.uri, strings.Join(access.Channels, ", "), mint+" --channel "+f.uri)
	}
	if f.uri == "" {
		// The checks of a create, without the dial: the allow-list.
		err := conn.Call(ctx, "channels/check", map[string]any{"create": map[string]any{"type": "tcp", "host": f.host, "port": f.port}}, nil)
		var ce *client.Error
		switch {
		case errors.As(err, &ce) && ce.Code == flow.ErrCodeMethodNotFound:
			// An ahpd older than channels/check: the first local
			// connection finds out.
		case err != nil:
			return fmt.Errorf("forward: %s", explainConn(err, f.c == nil).msg)
		}
	}
	if f.uri != "" && f.c == nil {
		var res struct {
			Channels []struct {
				Channel string `json:"channel"`
			} `json:"channels"`
		}
		if err := conn.Call(ctx, "channels/list", struct{}{}, &res); err != nil {
			return fmt.Errorf("forward: %s", explainConn(err, true).msg)
		}
		found := false
		for _, c := range res.Channels {
			found = found || c.Channel == f.uri
		}
		if !found {
			return fmt.Errorf("forward: no channel %s (closed, or never created: 'ahpctl tcp create HOST:PORT' makes one)", f.uri)
		}
	}
	return nil
}

// forwarder is one `ahpctl forward`.
type forwarder struct {
	a            *app
	quiet        bool
	compress     bool   // offer permessage-deflate (guarded by mu once serving)
	compressMode string // auto, always or never (--compress)
	// the target: a channel URI, or host and port to create channels to
	uri  string
	host string
	port int

	wsURL string
	tls   *tls.Config // for a wss:// wsURL; nil: the system's roots
	token string      // the credential given with --url, else "": mint tickets
	c     *clients    // nil without the control socket
	conns *client.Redialer

	mu             sync.Mutex // guards reconnectToken, access and status lines
	reconnectToken string
	access         access // what the last initialize said of the credential
}

// access is initialize's access: the credential's role and the channels
// it reaches (none: all).
type access struct {
	Role     string
	Channels []string
}

func (f *forwarder) parseTarget(t string) error {
	if rest, ok := strings.CutPrefix(t, "ahp-tcp:"); ok {
		if strings.TrimPrefix(rest, "/") == "" {
			return usagef("forward: %q names no channel", t)
		}
		f.uri = t
		return nil
	}
	if i := strings.Index(t, ":/"); i > 0 && !strings.Contains(t[:i], ".") {
		return usagef("forward: %q is not a TCP channel (ahp-tcp:/ID) nor HOST:PORT", t)
	}
	host, port, err := net.SplitHostPort(t)
	if err != nil || host == "" {
		return usagef("forward: target %q: want HOST:PORT or ahp-tcp:/ID", t)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return usagef("forward: target %q: the port must be 1–65535", t)
	}
	f.host, f.port = host, int(p)
	return nil
}

func (f *forwarder) statusf(format string, args ...any) {
	if f.quiet {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.a.stderr, "forward: "+format+"\n", args...)
}

// dial opens a connection to the daemon: with the --url token, else with
// the reconnect token of an earlier connection or a fresh ticket.
func (f *forwarder) dial(ctx context.Context) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, f.a.timeout)
	defer cancel()
	f.mu.Lock()
	deflate := f.compress
	f.mu.Unlock()
	opts := client.Options{ClientName: "ahpctl forward", ClientVersion: Version, Deflate: deflate, TLS: f.tls}
	if f.c == nil {
		opts.Token = f.token
		c, ini, err := client.Dial(ctx, f.wsURL, opts)
		if err == nil {
			f.mu.Lock()
			f.access = access{ini.Access.Role, ini.Access.Channels}
			f.mu.Unlock()
		}
		return c, err
	}
	f.mu.Lock()
	opts.Token = f.reconnectToken
	f.mu.Unlock()
	if opts.Token != "" {
		c, _, err := client.Dial(ctx, f.wsURL, opts)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != flow.ErrCodeUnauthorized {
			return c, err
		}
		// Expired, revoked, or the daemon restarted: a fresh ticket.
	}
	req := &ahpv1.CreateTokenRequest{Role: ahpv1.Role_ROLE_CONTROL, SingleUse: true, Ttl: durationpb.New(time.Minute)}
	if f.uri != "" {
		req.Channels = []string{f.uri}
	}
	res, err := f.c.tokens.CreateToken(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("mint a ticket: %s", f.a.describe(err))
	}
	opts.Token = res.Secret
	c, ini, err := client.Dial(ctx, f.wsURL, opts)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if ini.ReconnectToken != "" {
		f.reconnectToken = ini.ReconnectToken
	}
	f.access = access{ini.Access.Role, ini.Access.Channels}
	f.mu.Unlock()
	return c, nil
}

// serve accepts local connections until ctx ends, a connection fails in
// a way every other would too (not allowed, unauthorized), or, for a
// channel URI, its one connection has ended.
func (f *forwarder) serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	var fatalMu sync.Mutex // guards fatal
	var fatal error
	served := false
	for n := 1; ; n++ {
		lc, err := ln.Accept()
		if err != nil {
			break
		}
		tc, ok := lc.(*net.TCPConn)
		if !ok {
			lc.Close()
			continue
		}
		if f.uri != "" && served {
			f.statusf("refused %s: %s is served to one local connection only", lc.RemoteAddr(), f.uri)
			lc.Close()
			continue
		}
		served = true
		wg.Go(func() {
			err := f.handle(ctx, n, tc)
			switch {
			case ctx.Err() != nil: // interrupted, or another connection's fatal error
				return
			case f.uri == "" && !fatalForward(err):
				return // this connection's trouble only (a refused dial, a reset)
			}
			// The one channel has been served, or every connection would
			// fail the same way: forward ends.
			fatalMu.Lock()
			fatal = err
			fatalMu.Unlock()
			cancel()
		})
	}
	cancel()
	wg.Wait()
	fatalMu.Lock()
	defer fatalMu.Unlock()
	if fatal != nil {
		return fmt.Errorf("forward: %s", f.explain(fatal))
	}
	return nil
}

// explain says err, of a local connection's stream, in words
// (explainConn); a failure of the local connection itself is said as
// it is.
func (f *forwarder) explain(err error) string {
	var le *localError
	if errors.As(err, &le) {
		return le.Error()
	}
	return explainConn(err, f.c == nil).msg
}

// localError is a failure of the local connection (pump).
type localError struct{ err error }

func (e *localError) Error() string { return "local side: " + e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// fatalForward reports errors every later connection would meet too, and
// an operator's decision (a kick) that forward must not undo.
func fatalForward(err error) bool {
	var ce *client.Error
	var he *client.HandshakeError
	return errors.As(err, &ce) && (ce.Code == flow.ErrCodeForbidden || ce.Code == flow.ErrCodeUnauthorized) ||
		errors.Is(err, client.ErrSessionEnded) ||
		errors.As(err, &he) && explainConn(err, true).final // a refused Origin or Host
}

// handle serves one local connection over its own TCP stream.
func (f *forwarder) handle(ctx context.Context, n int, lc *net.TCPConn) error {
	defer lc.Close()
	from := lc.RemoteAddr().String()
	label := fmt.Sprintf("#%d from %s", n, from)
	st, err := client.OpenTCP(ctx, client.TCPOptions{
		Dial: f.conns.Get, Channel: f.uri, Host: f.host, Port: f.port,
		OnEvent: func(e client.TCPEvent) {
			switch e.Kind {
			case client.TCPLost:
				f.statusf("%s: %s: %s; resuming", label, e.Channel, lostHow(e.Err, f.c == nil))
			case client.TCPResumed:
				f.statusf("%s: %s: resumed (attempt %d)", label, e.Channel, e.Attempts)
			}
		},
	})
	if err != nil {
		if ctx.Err() == nil {
			f.statusf("%s: failed: %s", label, f.explain(err))
		}
		return err
	}
	f.statusf("%s: opened %s (window %s)", label, st.Channel(), units.FormatSize(st.ReceiveLimits().WindowBytes))
	err = pump(ctx, lc, st)
	st.Close()
	s := st.Stats()
	how := ""
	if err != nil {
		how = " (" + f.explain(err) + ")"
	}
	f.statusf("%s: %s closed: sent %d bytes, received %d bytes%s", label, st.Channel(), s.BytesWritten, s.BytesRead, how)
	return err
}

// copyBuffer is the size of forward's reads from a local connection.
const copyBuffer = 128 << 10

// pump copies both ways until both halves are closed or one side fails.
// A half-close passes on (local EOF → tcp/eof, tcp/eof → CloseWrite); a
// failure of the stream resets the local connection, and a failure of
// the local connection abandons the stream.
func pump(ctx context.Context, lc *net.TCPConn, st *client.TCPStream) error {
	var once sync.Once
	var first error
	abort := func(err error, reset bool) {
		once.Do(func() {
			first = err
			if reset {
				_ = lc.SetLinger(0) // Close sends RST
			}
			lc.Close()
			st.Abort()
		})
	}
	stop := context.AfterFunc(ctx, func() { abort(nil, false) })
	defer stop()
	// A failure of the stream (a reset of the target) resets the local
	// connection too; one of the local connection abandons the stream.
	failed := func(err error) {
		if serr := st.Err(); serr != nil {
			abort(serr, true)
			return
		}
		abort(&localError{err}, false)
	}
	var wg sync.WaitGroup
	wg.Go(func() { // local → channel
		// Not lc's WriteTo, whose 32 KiB reads would make small messages.
		_, err := io.CopyBuffer(st, struct{ io.Reader }{lc}, make([]byte, copyBuffer))
		if err == nil {
			err = st.CloseWrite()
		}
		if err != nil {
			failed(err)
		}
	})
	wg.Go(func() { // channel → local
		_, err := io.Copy(lc, st)
		if err == nil {
			err = lc.CloseWrite()
		}
		if err != nil {
			failed(err)
		}
	})
	wg.Wait()
	once.Do(func() {}) // an abort under way (ctx) has finished: first is set
	return first
}
