package ctl

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/units"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

const attachHelp = `attach is a native AHP/1 viewer in this terminal: the terminal is put in raw
mode, every key goes to the channel's program, the program's output is written
here, and the daemon is told this terminal's size (again on every window size
change). With several viewers, the size of the one used last applies: attaching
does not resize the channel for the others, typing here or resizing this
window does; when the channel is larger than this terminal, a line says it is
clipped. Output is credited to the daemon only once written, so a slow
terminal slows only this viewer.

Detach: Ctrl-] then d. Ctrl-] twice sends one Ctrl-] to the program.
--detach-keys ctrl-a makes Ctrl-A the prefix key instead (ctrl- and a letter or
one of @ [ \ ] ^ _). Once the screen is drawn, attach says on stderr, on a line
of its own, where it is attached and how to detach (--quiet hides that line).

attach exits with the program's exit status when it ends (128 + the signal's
number when a signal killed it), as ssh and docker do; 0 when you detach.
URI may be a channel's bare ID (shell for ahp-terminal:/shell) when one
channel has it; with --url a bare ID means ahp-terminal:/ID.

If the connection drops, attach reconnects (for up to a minute; one status
line, rewritten at each attempt, says why and for how long) and the daemon
sends a fresh snapshot of the screen; keys typed while disconnected are dropped,
never replayed. After a minute it gives up and exits 1. It does not come back
after the daemon ended the session on purpose (viewers kick, token revoke) or
when the token is refused: it exits 1 at once, saying why and what to do. The
first connection is not retried: a wrong URL, token or channel, a daemon that
is not running, or an Origin or Host the daemon refuses (HTTP 403, 421) ends
attach at once with exit 1. attach ends when the program
exits, and when the channel is closed (it says so once and exits 1).
Credentials: attach mints a single-use ticket over the control socket and keeps
the reconnect token the daemon returns; nothing is written to disk.

Without the control socket (from another machine, through a tunnel or a
proxy): --url http://HOST:PORT (or $AHP_URL) names the daemon, and the token
comes from --token-file FILE or $AHP_TOKEN, never from the command line
(where other users could read it); mint one with 'ahpctl token create'. A
token file that others may read draws a warning, as ssh does for keys.

--window SIZE is the receive window attach asks for (default 8MiB, or the
daemon's default if that is larger; the daemon's
clientReceiveMaximums.windowBytes caps it): how far this terminal may fall
behind the program's output before the daemon skips ahead with a fresh
screen, when the flood is over or once a second while it lasts. A flood
faster than this terminal draws is shown in full up to that lag; a larger
window (--window 32MiB) shows more of it, and after a Ctrl-C more output
already sent is still drawn. On a path whose bandwidth-delay product is
larger (a fast link far away), the window grows to fit it, up to four times
SIZE (announced to the daemon with channel/window); it never shrinks below
SIZE.

--predict auto|always|never: predictive local echo, as mosh does it. While
predicting, a printable key, backspace and the left and right arrows show at
once at the cursor (in the middle of a line a character is inserted and a
backspace deletes, as line editors do), underlined until the program's output
confirms them; a prediction the output contradicts, or that is not confirmed
within two round trips, is repaired to what the screen really holds, and
prediction stays hidden (tentative) until a later one is confirmed. Nothing is
predicted on the alternate screen (vim, less, htop), after Enter or a control
key until the output settles, when echo is off (a password prompt: predictions
expire), or while the channel's size is not this terminal's (another viewer's
applies). auto (the default) predicts while the round trip measured with ping
is above 30 ms (and stops below 20 ms); always whatever it is; never turns it
off.`

// detachKey is the default prefix key, Ctrl-]; the key after it decides
// (d detaches).
const detachKey = 0x1d

// parseDetachKey parses --detach-keys: "ctrl-" and a letter or one of
// @ [ \ ] ^ _. It returns the key's byte and its name for messages.
func parseDetachKey(s string) (byte, string, error) {
	rest, ok := strings.CutPrefix(strings.ToLower(s), "ctrl-")
	if ok && len(rest) == 1 {
		c := rest[0]
		switch {
		case c >= 'a' && c <= 'z':
			return c - 'a' + 1, "Ctrl-" + strings.ToUpper(rest), nil
		case strings.IndexByte("@[\\]^_", c) >= 0:
			return c & 0x1f, "Ctrl-" + rest, nil
		}
	}
	return 0, "", usagef("attach: --detach-keys %q: want ctrl- and a letter or one of @ [ \\ ] ^ _ (e.g. ctrl-a)", s)
}

// exitStatusError ends ahpctl with code, the status of the program attach
// showed; what happened was said already.
type exitStatusError struct{ code int }

func (e *exitStatusError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitCode is the status a shell would report for the program: its exit
// code, or 128 + the number of the signal that killed it.
func (e *exitedError) exitCode() int {
	if e.Signal != "" {
		if n, err := strconv.Atoi(strings.TrimPrefix(e.Signal, "SIG")); err == nil && n > 0 {
			return 128 + n
		}
		if n := unix.SignalNum(e.Signal); n != 0 {
			return 128 + int(n)
		}
		return 128
	}
	if e.Code != nil {
		return *e.Code
	}
	return 0
}

// closedError reports that the channel was closed (or is gone) under an
// attach: nothing to come back to.
type closedError struct{ uri string }

func (e *closedError) Error() string {
	return fmt.Sprintf("attach: %s was closed; not reconnecting", e.uri)
}

// Errors that end an attach.
var (
	errDetached = errors.New("detached")
	errStdinEOF = errors.New("stdin closed")
)

// exitedError reports that the program exited.
type exitedError struct {
	Code   *int   `json:"code"`
	Signal string `json:"signal"`
}

func (e *exitedError) Error() string {
	switch {
	case e.Signal != "":
		return "the program was killed by " + e.Signal
	case e.Code != nil:
		return fmt.Sprintf("the program exited with status %d", *e.Code)
	}
	return "the program exited"
}

func setupAttach(fs *flag.FlagSet) action {
	readOnly := fs.Bool("read-only", false, "view only: no keys are sent and the channel is not resized")
	keys := fs.String("detach-keys", "ctrl-]", "the prefix `key` of the detach sequence (then d), e.g. ctrl-a")
	quiet := fs.Bool("quiet", false, "do not print the \"attached to\" line with the detach keys")
	windowFlag := fs.String("window", "", "the receive window `size` to ask for (default 8MiB, or the daemon's default if larger)")
	predictFlag := fs.String("predict", "auto", "predictive local echo: `mode` auto (while the round trip is above 30ms), always or never")
	remote := remoteFlags(fs)
	return func(ctx context.Context, a *app, args []string) error {
		key, keyName, err := parseDetachKey(*keys)
		if err != nil {
			return err
		}
		mode, err := parsePredict(*predictFlag)
		if err != nil {
			return err
		}
		var window int64
		if *windowFlag != "" {
			if window, err = units.ParseSize(*windowFlag); err != nil || window < flow.MinFrameBytes {
				return usagef("attach: --window %q: want a size of at least %d bytes, e.g. 4MiB", *windowFlag, flow.MinFrameBytes)
			}
		}
		wsURL, token, ok, err := remote.resolve(a.getenv, a.stderr)
		if err != nil {
			return err
		}
		in, okIn := a.stdin.(*os.File)
		out, okOut := a.stdout.(*os.File)
		if !okIn || !okOut || !isTerminal(in) {
			return fmt.Errorf("attach needs a terminal on stdin (for a browser use 'ahpctl open %s')", args[0])
		}
		if ok {
			// Without the control socket: the daemon's URL and a token
			// given for it (from another machine, through a tunnel).
			uri := args[0]
			if isShortName(uri) {
				uri = "ahp-terminal:/" + uri // no ListChannels without the control socket
			}
			trust, err := remote.tlsConfig(wsURL, a.getenv)
			if err != nil {
				return err
			}
			at := &attacher{a: a, uri: uri, wsURL: wsURL, tls: trust, token: token, readOnly: *readOnly, in: in, out: out, key: key, keyName: keyName, quiet: *quiet, window: window, predict: mode}
			return at.run(ctx)
		}
		c, err := a.clients()
		if err != nil {
			return err
		}
		uri, err := a.channelURIOf(ctx, args[0], "terminal")
		if err != nil {
			return err
		}
		rctx, cancel := a.rpc(ctx)
		info, err := c.daemon.GetInfo(rctx, &ahpv1.GetInfoRequest{})
		if err == nil {
			_, err = c.channels.GetChannel(rctx, &ahpv1.GetChannelRequest{Channel: uri})
		}
		cancel()
		if err != nil {
			return err
		}
		at := &attacher{a: a, c: c, uri: uri, wsURL: info.WebsocketUrl, tls: localTLS(info.WebsocketUrl), readOnly: *readOnly, in: in, out: out, key: key, keyName: keyName, quiet: *quiet, window: window, predict: mode}
		return at.run(ctx)
	}
}

// attacher is one `ahpctl attach`. Its run loop owns every field; the
// stdin reader and the per-session output goroutine only send to it.
type attacher struct {
	a        *app
	c        *clients // nil without the control socket (token is set then)
	uri      string
	wsURL    string
	tls      *tls.Config // for a wss:// wsURL; nil: the system's roots
	token    string      // the credential given with --url, else "": mint tickets
	readOnly bool
	key      byte   // the detach prefix key (0: Ctrl-])
	keyName  string // its name in messages, e.g. "Ctrl-]"
	quiet    bool   // no "attached to" line
	window   int64  // --window, 0: AttachWindow
	predict  predictMode
	// pmu guards pred, predSeen and every write to out while a session
	// runs (the output goroutine and the run loop both write: see
	// predict.go). The run loop only tries it, never waits for it: a
	// key's prediction is skipped (predMissed) rather than hold up the
	// next key behind a chunk the output goroutine is writing.
	pmu      sync.Mutex
	pred     *predictor // nil: no prediction (--predict never, --read-only)
	predSeen struct {   // what pred was last told of srtt and localSize
		srtt int64
		size uint64
	}
	pingable   bool          // the host takes ping (capabilities.windowUpdates)
	srtt       atomic.Int64  // the smoothed round trip in ns (the probe's), 0: none yet
	predBusy   atomic.Bool   // predictions wait for the host (set with pmu held)
	predMissed atomic.Bool   // a key was sent without being predicted
	localSize  atomic.Uint64 // this terminal's rows<<32 | cols, 0: unknown
	hinted     bool          // the "attached to" line was printed (owned by the output loop)
	// The channel's size from terminal/reset and terminal/resize, and
	// whether it exceeds this terminal (owned by the output loop).
	hostRows, hostCols int
	clipped            bool
	in, out            *os.File
	buf                []byte // decoded output, reused (owned by the output loop)

	reconnectToken string
	prefix         bool          // Ctrl-] seen, waiting for the next key
	carry          []byte        // an incomplete UTF-8 sequence from the last read
	attached       bool          // a session was established once
	budget         time.Duration // how long to reconnect after a drop; 0: reconnectBudget
	line           statusLine
}

func (at *attacher) prefixKey() byte {
	if at.key == 0 {
		return detachKey
	}
	return at.key
}

func (at *attacher) detachHint() string {
	name := at.keyName
	if name == "" {
		name = "Ctrl-]"
	}
	return name + " d"
}

func (at *attacher) run(ctx context.Context) error {
	restore, err := makeRaw(at.in)
	if err != nil {
		return fmt.Errorf("attach: raw mode: %w", err)
	}
	// The stdin reader cannot be interrupted (a blocking read of the
	// terminal); it ends with the process. With 64 reads pending it waits,
	// and the terminal holds further keys.
	keys := make(chan []byte, 64)
	go readKeys(at.in, keys)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)

	at.line = statusLine{w: at.out, tty: isTerminal(at.out)}
	if at.predict != predictNever && !at.readOnly {
		at.pred = newPredictor(at.predict)
	}
	err = at.loop(ctx, keys, winch)
	if at.attached {
		// Leave the terminal usable: normal screen, visible cursor, no
		// mouse or paste modes, default attributes; then cooked mode.
		_, _ = io.WriteString(at.out, "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1004l\x1b[?2004l\x1b[?1l\x1b>\x1b[0m\r\n")
	}
	restore()
	var ee *exitedError
	switch {
	case errors.Is(err, errDetached), errors.Is(err, errStdinEOF):
		if at.attached {
			fmt.Fprintf(at.a.stderr, "[detached from %s]\n", at.uri)
		}
		return nil
	case errors.As(err, &ee):
		fmt.Fprintf(at.a.stderr, "[%s: %v]\n", at.uri, ee)
		if code := ee.exitCode(); code != 0 {
			return &exitStatusError{code}
		}
		return nil
	case ctx.Err() != nil:
		return nil
	}
	return err
}

// reconnectBudget is how long attach tries to reconnect after a drop
// before it gives up (attachHelp and the README say "a minute"): the
// daemon's tcpRetain, and about what an upgrade in place or a restart by
// systemd takes, many times over.
const reconnectBudget = time.Minute

// loop connects, runs sessions and reconnects until detach, exit or a
// final error. The first connection is not retried: a wrong URL, token or
// channel fails at once, as ssh does. After a drop, attach reconnects
// within reconnectBudget, on one status line, unless the daemon ended the
// session on purpose or the credential is refused (explainConn's final
// errors).
func (at *attacher) loop(ctx context.Context, keys <-chan []byte, winch <-chan os.Signal) error {
	budget := cmp.Or(at.budget, reconnectBudget)
	backoff := 100 * time.Millisecond
	var lostAt time.Time // when the last session ended
	var lost string      // how it ended, in words
	for {
		timeout := at.a.timeout
		if !lostAt.IsZero() {
			timeout = min(timeout, max(time.Until(lostAt.Add(budget)), time.Second))
		}
		conn, sub, err := at.connect(ctx, timeout)
		if err == nil {
			at.attached = true
			at.line.reset()
			backoff = 100 * time.Millisecond
			err = at.session(ctx, conn, sub, keys, winch)
			conn.Close()
			var ee *exitedError
			if errors.Is(err, errDetached) || errors.Is(err, errStdinEOF) || errors.As(err, &ee) || ctx.Err() != nil {
				return err
			}
			var re *client.ResetError
			if errors.As(err, &re) && re.Code == flow.CodeChannelClosed {
				return &closedError{at.uri}
			}
			if cerr := conn.Err(); websocket.CloseStatus(cerr) != -1 {
				err = cerr // the daemon's close frame says why, whichever read saw it
			}
			lostAt = time.Now()
			p := explainConn(err, at.c == nil)
			if p.final {
				return fmt.Errorf("attach: %s; not reconnecting", p.msg)
			}
			lost = p.msg
			at.status(fmt.Sprintf("%s; reconnecting… (%s detaches)", lost, at.detachHint()), "")
		} else {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p := explainConn(err, at.c == nil)
			var ce *client.Error
			switch {
			case !at.attached:
				return fmt.Errorf("attach: %s", p.msg)
			case errors.As(err, &ce) && ce.Code == flow.ErrCodeChannelNotFound:
				// Gone while we were away (closed, or the daemon
				// restarted without it).
				return &closedError{at.uri}
			case p.final:
				return fmt.Errorf("attach: %s; not reconnecting", p.msg)
			}
			waited := time.Since(lostAt)
			if waited >= budget {
				return fmt.Errorf("attach: %s, and could not reconnect within %v: %s", lost, budget, p.msg)
			}
			at.status(fmt.Sprintf("%s; reconnecting… %ds of %v (%s detaches): %s", lost, int(waited.Seconds()), budget, at.detachHint(), p.msg), p.msg)
		}
		d := min(backoff, max(time.Until(lostAt.Add(budget)), 0))
		if err := at.wait(ctx, d, keys); err != nil {
			return err
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// status shows msg on the status line, cut to the terminal's width as it
// is now.
func (at *attacher) status(msg, key string) {
	if _, cols, err := terminalSize(at.out); err == nil {
		at.line.cols = cols
	}
	at.line.show(msg, key)
}

// statusLine is attach's status between sessions (the terminal is in raw
// mode). On a terminal it is one line, rewritten in place at each
// attempt; elsewhere each change of what it says (key) is a line of its
// own, not each attempt.
type statusLine struct {
	w    io.Writer
	tty  bool
	cols int    // the terminal's width: a longer line would wrap, and \r would not reach its start
	open bool   // the line is on screen, the cursor at its end
	key  string // what the last plain line said
	said bool   // a plain line was printed since the last reset
}

// show writes msg as the status line; key names what it says apart from
// the time (plain lines are printed when it changes).
func (l *statusLine) show(msg, key string) {
	line := "[ahpctl: " + msg + "]"
	if l.tty {
		if r := []rune(line); l.cols > 2 && len(r) >= l.cols {
			line = string(r[:l.cols-2]) + "…"
		}
		if l.open {
			fmt.Fprintf(l.w, "\r\x1b[K%s", line)
		} else {
			fmt.Fprintf(l.w, "\r\n\x1b[0m%s", line)
			l.open = true
		}
		return
	}
	if l.said && key == l.key {
		return
	}
	l.said, l.key = true, key
	fmt.Fprintf(l.w, "\r\n%s\r\n", line)
}

// reset forgets the line once a session is up (its snapshot redraws the
// screen).
func (l *statusLine) reset() { l.open, l.said, l.key = false, false, "" }

// wait sleeps d while watching the keys for the detach sequence; other keys
// are dropped.
func (at *attacher) wait(ctx context.Context, d time.Duration, keys <-chan []byte) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case b, ok := <-keys:
			if !ok {
				return errStdinEOF
			}
			if _, detach := at.feed(b); detach {
				return errDetached
			}
		}
	}
}

// connect dials the WebSocket with the reconnect token (else a fresh
// single-use ticket) and subscribes.
func (at *attacher) connect(ctx context.Context, timeout time.Duration) (*client.Conn, *client.Sub, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var conn *client.Conn
	var res *client.InitializeResult
	var err error
	if at.reconnectToken != "" {
		conn, res, err = client.Dial(ctx, at.wsURL, client.Options{Token: at.reconnectToken, ClientName: "ahpctl attach", ClientVersion: Version, TLS: at.tls})
		var ce *client.Error
		if errors.As(err, &ce) && ce.Code == flow.ErrCodeUnauthorized {
			// Expired, or the daemon restarted: a fresh ticket. (A kick
			// or a revocation ended the session with its own close,
			// which loop does not come back from.)
			at.reconnectToken = ""
		} else if err != nil {
			return nil, nil, err
		}
	}
	if conn == nil {
		ticket, terr := at.ticket(ctx)
		if terr != nil {
			return nil, nil, terr
		}
		conn, res, err = client.Dial(ctx, at.wsURL, client.Options{Token: ticket, ClientName: "ahpctl attach", ClientVersion: Version, TLS: at.tls})
		if err != nil {
			return nil, nil, err
		}
	}
	if res.ReconnectToken != "" {
		at.reconnectToken = res.ReconnectToken
	}
	at.pingable = res.Capabilities.WindowUpdates
	fc := res.Capabilities.FlowControl
	limits := receiveLimits(fc.ClientDefaults, fc.Maximums, at.window)
	sub, err := conn.Subscribe(ctx, at.uri, limits)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	// The window grows on a path whose bandwidth-delay product exceeds
	// it (PROTOCOL.md §6, "Changing a window"), up to four times what was
	// asked for; it never goes below that, which is how far this terminal
	// may lag a flood before it is skipped by snapshot.
	if limits != nil {
		sub.AutoWindow(conn.AutoWindowConfig(*limits, limits.WindowBytes, 4*limits.WindowBytes))
	}
	return conn, sub, nil
}

// AttachWindow is the receive window attach asks for by default (UTF-16
// bytes, as all windows: about 4 MiB of text); ahpbench's throughput
// viewer asks for it too. A terminal viewer may fall
// its window plus the daemon's backlog (1 MiB) behind the program's output
// before the daemon drops what it queued and, once the flood is over (or
// after a second behind), sends a fresh screen instead. A program that
// floods (cat of a big file) is read by the daemon faster than a terminal
// draws it: through attach into a tmux pane a 64 MiB `cat` took 1 such
// skip with 8 MiB and showed its last line at 0.92× the time of the same
// cat in a tmux pane, where 32 MiB drew everything and took 1.67×
// (docs/benchmarks-attach.md, "What these figures decided", make bench-attach).
// A flood this terminal lags by less than the window is drawn in full.
// The cost of a larger one is memory while a flood outruns the terminal
// (ahpctl holds up to this much received output not yet written, and the
// daemon keeps its output log that far back) and, after Ctrl-C in a
// flood, up to this much output still drawn before the prompt.
const AttachWindow = 8 << 20

// receiveLimits returns the receive limits attach subscribes with: the
// host's defaults with a window of want (0: AttachWindow, and never
// below the host's default), lowered to the host's maximum. It returns
// nil (the host's defaults) when the host stated no valid defaults.
func receiveLimits(defaults, maximums flow.ReceiveLimits, want int64) *flow.ReceiveLimits {
	if want <= 0 {
		want = max(AttachWindow, defaults.WindowBytes)
	}
	l := client.WithWindow(defaults, maximums, want)
	if l == (flow.ReceiveLimits{}) {
		return nil
	}
	return &l
}

// ticket mints a single-use ticket for this channel over the control
// socket, or, without one, returns the token given with --url.
func (at *attacher) ticket(ctx context.Context) (string, error) {
	if at.c == nil {
		return at.token, nil
	}
	role := ahpv1.Role_ROLE_CONTROL
	if at.readOnly {
		role = ahpv1.Role_ROLE_VIEW
	}
	res, err := at.c.tokens.CreateToken(ctx, &ahpv1.CreateTokenRequest{
		Channels: []string{at.uri}, Role: role, SingleUse: true, Ttl: durationpb.New(time.Minute),
	})
	if err != nil {
		return "", fmt.Errorf("mint a ticket: %s", at.a.describe(err))
	}
	return res.Secret, nil
}

// session serves one connection: keys → terminal/input, SIGWINCH →
// terminal/resize, and (in a goroutine it waits for) output → stdout.
func (at *attacher) session(ctx context.Context, conn *client.Conn, sub *client.Sub, keys <-chan []byte, winch <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(ctx)
	outErr := make(chan error, 1)
	go func() { outErr <- at.output(ctx, sub) }()
	var probes sync.WaitGroup
	kick := make(chan struct{}, 1)
	expiry := time.NewTimer(time.Hour)
	expiry.Stop()
	defer func() {
		cancel()
		conn.Close() // ends sub.Next
		<-outErr
		probes.Wait()
		expiry.Stop()
		if at.pred != nil {
			// Take back what is drawn before a status line or the exit.
			at.lockPred()
			_ = at.pred.flush(at.out)
			at.unlockPred()
		}
	}()
	if at.pred != nil && at.pingable {
		ping := func(ctx context.Context) error { return conn.Call(ctx, "ping", struct{}{}, &struct{}{}) }
		probes.Go(func() { at.probe(ctx, ping, kick) })
	}
	at.resize(ctx, conn, sub)
	for {
		select {
		case <-expiry.C:
			if !at.tryLockPred() {
				expiry.Reset(5 * time.Millisecond) // a chunk is being written
				continue
			}
			_ = at.pred.tick(time.Now(), at.out)
			at.armExpiry(expiry)
			at.unlockPred()
		case err := <-outErr:
			outErr <- err // for the deferred wait
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-winch:
			at.resize(ctx, conn, sub)
		case b, ok := <-keys:
			if !ok {
				return errStdinEOF
			}
			data, detach := at.feed(b)
			if len(data) > 0 && !at.readOnly {
				// Predicted before it is sent (its echo cannot come back
				// first), drawn after; not predicted while the output
				// goroutine writes a chunk: the predictor is then told
				// it missed a key and holds until the pending ones
				// resolve.
				predicted := false
				if at.pred != nil {
					if predicted = at.tryLockPred(); predicted {
						at.pred.key(data, time.Now())
						at.armExpiry(expiry)
						at.unlockPred()
					} else {
						at.predMissed.Store(true)
					}
				}
				msg := client.AppendNotification(nil, "terminal/input", map[string]string{"data": string(data)})
				if err := sub.Send(ctx, string(msg)); err != nil {
					return err
				}
				if predicted && at.tryLockPred() {
					_ = at.pred.redraw(at.out) // else the output goroutine draws after its chunk
					at.unlockPred()
				}
				if at.pred != nil && at.predBusy.Load() {
					select {
					case kick <- struct{}{}:
					default:
					}
				}
			}
			if detach {
				return errDetached
			}
		}
	}
}

// output writes the subscription's messages to stdout and releases each
// once written (PROTOCOL.md §5: credit follows consumption).
func (at *attacher) output(ctx context.Context, sub *client.Sub) error {
	ready := false // the snapshot has been drawn
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		switch m.Method {
		case "terminal/output":
			var err error
			if at.buf, err = m.AppendTerminalData(at.buf[:0]); err != nil {
				return fmt.Errorf("terminal/output: %w", err)
			}
			if at.pred != nil {
				at.lockPred()
				err = at.pred.host(at.buf, time.Now(), at.out)
				at.unlockPred()
			} else {
				_, err = at.out.Write(at.buf)
			}
			if err != nil {
				return err
			}
		case "terminal/reset":
			at.hostSize(m.Params)
			// A snapshot follows: full reset, scrollback included (§8).
			var err error
			if at.pred != nil {
				at.lockPred()
				at.pred.reset(at.hostRows, at.hostCols)
				_, err = io.WriteString(at.out, "\x1bc\x1b[3J")
				at.unlockPred()
			} else {
				_, err = io.WriteString(at.out, "\x1bc\x1b[3J")
			}
			if err != nil {
				return err
			}
		case "terminal/resize":
			at.hostSize(m.Params)
			if at.pred != nil {
				at.lockPred()
				err := at.pred.resize(at.hostRows, at.hostCols, at.out)
				at.unlockPred()
				if err != nil {
					return err
				}
			}
			if ready {
				at.noteClipped()
			}
		case "channel/ready":
			ready = true
			at.hint()
			at.noteClipped()
		case "terminal/exit":
			var e exitedError
			_ = json.Unmarshal(m.Params, &e)
			_ = sub.Release(ctx, m)
			return &e
		}
		if err := sub.Release(ctx, m); err != nil {
			return err
		}
	}
}

// hint prints the "attached to" line with the detach keys once, after the
// first snapshot has been drawn (channel/ready). Printed before it, the
// line would be wiped at once by the snapshot's full reset (RIS and ED3
// clear the screen and the scrollback). Printed between the reset and the
// snapshot's output, it would shift the snapshot a line down, out of step
// with its absolute cursor position; and leaving out the reset would draw
// the snapshot over whatever this terminal showed before. After the
// snapshot it is a line of its own below the program's cursor (like a
// reconnect's status line): the program's next output or redraw goes on
// from there, and it is on screen for the user to read.
func (at *attacher) hint() {
	if at.quiet || at.hinted {
		return
	}
	at.hinted = true
	fmt.Fprintf(at.a.stderr, "\r\nahpctl: attached to %s; detach: %s\r\n", at.uri, at.detachHint())
}

// hostSize records the channel's size from terminal/reset or
// terminal/resize params.
func (at *attacher) hostSize(params json.RawMessage) {
	var p struct{ Rows, Cols int }
	if json.Unmarshal(params, &p) == nil && p.Rows > 0 && p.Cols > 0 {
		at.hostRows, at.hostCols = p.Rows, p.Cols
	}
}

// noteClipped says, on a line of its own on stderr (like the "attached
// to" line), when the channel becomes larger than this terminal: another
// viewer's size applies, since the most recently active control viewer's
// size decides (docs/protocol-decisions.md), so part of the screen is cut
// off or wrapped here. It says so once each time it becomes clipped.
func (at *attacher) noteClipped() {
	rows, cols, err := terminalSize(at.out)
	if err != nil || rows <= 0 || cols <= 0 || at.hostRows == 0 {
		return
	}
	clipped := at.hostRows > rows || at.hostCols > cols
	if !clipped || at.clipped {
		at.clipped = clipped
		return
	}
	at.clipped = true
	fmt.Fprintf(at.a.stderr, "\r\n%s\r\n", clippedNote(at.hostRows, at.hostCols, rows, cols, at.readOnly))
}

// clippedNote is noteClipped's line; sizes are columns x rows, as
// everywhere in ahpctl's output.
func clippedNote(hostRows, hostCols, rows, cols int, readOnly bool) string {
	how := "another viewer used it last; type here or resize this window to give it this size"
	if readOnly {
		how = "the control viewer used last decides its size (--read-only never resizes)"
	}
	return fmt.Sprintf("ahpctl: clipped: the terminal is %dx%d, larger than this window (%dx%d): %s", hostCols, hostRows, cols, rows, how)
}

// resize tells the daemon this terminal's size: on connecting (the daemon
// applies it when no other viewer decides the size) and after SIGWINCH
// (the user resized the window: the daemon applies it).
func (at *attacher) resize(ctx context.Context, conn *client.Conn, sub *client.Sub) {
	if at.readOnly {
		return
	}
	rows, cols, err := terminalSize(at.out)
	if err != nil || rows <= 0 || cols <= 0 {
		return
	}
	at.localSize.Store(uint64(rows)<<32 | uint64(cols))
	rows, cols = min(rows, 1000), min(cols, 1000)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = conn.Call(rctx, "terminal/resize", map[string]any{"channel": sub.Channel, "subscriptionId": sub.ID, "rows": rows, "cols": cols}, nil)
}

// feed runs keys through the detach detector and the UTF-8 joiner: it
// returns the bytes to send and whether Ctrl-] d was typed.
func (at *attacher) feed(b []byte) ([]byte, bool) {
	out := make([]byte, 0, len(at.carry)+len(b)+1)
	out = append(out, at.carry...)
	at.carry = at.carry[:0]
	for _, c := range b {
		if at.prefix {
			at.prefix = false
			switch c {
			case 'd', 'D':
				return out, true
			case at.prefixKey():
				out = append(out, c)
			default:
				out = append(out, at.prefixKey(), c)
			}
			continue
		}
		if c == at.prefixKey() {
			at.prefix = true
			continue
		}
		out = append(out, c)
	}
	// Keep an incomplete trailing UTF-8 sequence for the next read, so a
	// character split across reads is not turned into U+FFFD.
	if n := incompleteTail(out); n > 0 {
		at.carry = append(at.carry, out[len(out)-n:]...)
		out = out[:len(out)-n]
	}
	return out, false
}

// incompleteTail returns the length of a trailing partial UTF-8 sequence.
func incompleteTail(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

func readKeys(in io.Reader, keys chan<- []byte) {
	defer close(keys)
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			keys <- append([]byte(nil), buf[:n]...)
		}
		if err != nil {
			return
		}
	}
}

// lostHow says, for a status line, how a connection to the daemon ended
// (explainConn): an upgrade in place (close 1012, docs/upgrade.md) as
// "ahpd is upgrading in place", as the web page says it.
func lostHow(err error, remote bool) string { return explainConn(err, remote).msg }

// armExpiry sets t to fire when the first pending prediction expires
// (called with pmu held).
func (at *attacher) armExpiry(t *time.Timer) {
	if d, ok := at.pred.deadline(); ok {
		t.Reset(max(time.Until(d), time.Millisecond))
	}
}

// Round-trip probing for --predict (PROTOCOL.md §6, "Measuring the round
// trip"): one ping outstanding at most, every probeIdle, and every
// probeBusy while predictions wait for the host.
const (
	probeIdle    = 2 * time.Second
	probeBusy    = 100 * time.Millisecond
	probeTimeout = 10 * time.Second
)

// probe measures the round trip with ping until ctx ends and keeps
// at.srtt, smoothed (EWMA 1/4), for the predictor. A key sent while
// predictions are pending (kick) brings the next ping forward to
// probeBusy after the last one.
func (at *attacher) probe(ctx context.Context, ping func(context.Context) error, kick <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			if wait := time.Until(last.Add(probeBusy)); wait > 0 {
				t.Reset(wait)
				continue
			}
		case <-t.C:
		}
		last = time.Now()
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := ping(pctx)
		cancel()
		rtt := time.Since(last)
		if err != nil && ctx.Err() != nil {
			return
		}
		if err == nil {
			at.srtt.Store(int64(smoothRTT(time.Duration(at.srtt.Load()), rtt)))
		}
		next := probeIdle
		if at.predBusy.Load() {
			next = probeBusy
		}
		t.Reset(max(next-time.Since(last), 0))
	}
}

// smoothRTT folds a sample into a smoothed round trip (0: none yet) with
// gain 1/4.
func smoothRTT(srtt, rtt time.Duration) time.Duration {
	if srtt == 0 {
		return max(rtt, 1)
	}
	return srtt + (rtt-srtt)/4
}

// lockPred takes pmu and tells the predictor what the run loop and the
// probe noted meanwhile.
func (at *attacher) lockPred() {
	at.pmu.Lock()
	at.syncPred()
}

// tryLockPred is lockPred when pmu is free; it reports whether it took it.
func (at *attacher) tryLockPred() bool {
	if !at.pmu.TryLock() {
		return false
	}
	at.syncPred()
	return true
}

func (at *attacher) unlockPred() {
	at.predBusy.Store(at.pred.busy())
	at.pmu.Unlock()
}

func (at *attacher) syncPred() {
	if at.predMissed.Swap(false) {
		at.pred.missed()
	}
	if v := at.srtt.Load(); v != at.predSeen.srtt {
		at.predSeen.srtt = v
		at.pred.setRTT(time.Duration(v))
	}
	if v := at.localSize.Load(); v != at.predSeen.size {
		at.predSeen.size = v
		at.pred.setLocalSize(int(v>>32), int(uint32(v)))
	}
}
