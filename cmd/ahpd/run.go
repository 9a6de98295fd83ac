package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/control"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/daemon/systemd"
	"github.com/ahp-dev/ahpd/internal/procs"
	"golang.org/x/sys/unix"
)

const usage = `ahpd serves terminals, telemetry and TCP sockets to browsers and ahpctl
over one WebSocket protocol (AHP/1) with per-viewer flow control.

Usage:
  ahpd [flags]
  ahpd --check-config [--config FILE] [flags]

With no flags it listens on 127.0.0.1:7681, starts one terminal running your
login shell, and, when stderr is a terminal, prints a URL (with a single-use
ticket) that opens it in the browser; otherwise it logs how to get one with
ahpctl open. The admin token lives in the state directory, which must be
owned by ahpd's user and not writable by others (mode 0700; the token 0600);
one ahpd at a time may use a state directory.

Settings come from the defaults, then the config file (see --config and
systemd/config.example.toml), then the flags. SIGHUP re-reads the config file
and applies its limits, logLevel, tcpAllow and TLS certificate without
dropping connections; SIGINT and SIGTERM shut down gracefully. Under
systemd, ahpd takes its listeners from socket activation (ahpd.socket), reports
READY/RELOADING/STOPPING and watchdog pings on $NOTIFY_SOCKET, and logs with
journald priorities.

A listen address other than loopback needs TLS (--tls-cert, --tls-key) or
--insecure-listen (a proxy in front terminates TLS). Behind a reverse proxy,
--public-url names the URL browsers open; its path is the prefix ahpd serves
under.

It runs its Go code on one core, and on two while a telemetry producer pushes
fast (where it may use two CPUs); GOMAXPROCS in the environment fixes the
number instead.

Flags:
`

// Main runs the daemon with command-line args and returns the exit status.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ahpd", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Main reports a bad flag itself, in one line
	fl := config.DefaultSettings()
	fs.StringVar(&fl.Listen, "listen", "127.0.0.1:7681", "HTTP and WebSocket listen `address` (ignored when socket activation passes the listener)")
	fs.StringVar(&fl.StateDir, "state-dir", "", "state `directory` holding admin.token (default $STATE_DIRECTORY, else $XDG_STATE_HOME/ahpd, else ~/.local/state/ahpd)")
	fs.StringVar(&fl.WebsocketCompression, "websocket-compression", "deflate", "permessage-deflate: deflate or none")
	fs.BoolVar(&fl.MetricsPublic, "metrics-public", false, "serve /metrics without a token")
	fs.BoolVar(&fl.NoDefaultTerminal, "no-default-terminal", false, "do not start the default terminal running the login shell")
	fs.BoolVar(&fl.NoTypingFirst, "no-typing-first", false, "read a flooding terminal at full speed even while another terminal is typed into (by default it is paced to ~2 MB/s then, so keystrokes echo at once)")
	fs.BoolVar(&fl.DaemonTelemetry, "daemon-telemetry", false, "create the telemetry channel ahp-telemetry:/ahpd at start: the daemon's own figures (connections, subscriptions, bytes, drops, snapshots, resets) every second")
	fs.StringVar(&fl.Control, "control", "", "gRPC control `socket`, mode 0660 (default $RUNTIME_DIRECTORY/ahpd.sock, else $XDG_RUNTIME_DIR/ahpd/control.sock, else STATE_DIR/control.sock; \"none\" disables it; ignored when socket activation passes it)")
	fs.StringVar(&fl.LogLevel, "log-level", "info", "log `level`: debug, info, warn, error")
	fs.StringVar(&fl.LogFormat, "log-format", "auto", "log `format`: text; journal (\"<6>message key=value\", no timestamps); auto: journal when stderr is journald's stream ($JOURNAL_STREAM), else text")
	fs.StringVar(&fl.PublicURL, "public-url", "", "the `URL` browsers and remote clients reach ahpd at through a reverse proxy (https://example.com/ahpd/): printed links use it, its path is the prefix everything is served under, and its host and origin are allowed")
	fs.StringVar(&fl.TLSCert, "tls-cert", "", "serve HTTPS and WSS with this PEM certificate (chain) `file` (with --tls-key; re-read on SIGHUP)")
	fs.StringVar(&fl.TLSKey, "tls-key", "", "the PEM private key `file` of --tls-cert")
	fs.BoolVar(&fl.InsecureListen, "insecure-listen", false, "allow a listen address other than loopback without TLS (by default refused: use --tls-cert, or a proxy that terminates TLS)")
	configFlag := fs.String("config", "", "config `file` (default: the first that exists of $CONFIGURATION_DIRECTORY/config.toml, $XDG_CONFIG_HOME/ahpd/config.toml (~/.config/ahpd/config.toml), /etc/ahpd/config.toml; \"none\": no file)")
	checkConfig := fs.Bool("check-config", false, "validate the config file and flags, print the result and exit: 0 valid, 1 not")
	showVersion := fs.Bool("version", false, "print the version and exit")
	checkUpgrade := fs.Bool("upgrade-check", false, "run by ahpd itself on a new binary before an upgrade in place (SIGUSR2): check that this binary reads the state it is handed and the config, then exit: 0 it can take over, 1 not")
	printLink := fs.Bool("print-link", false, "print the default terminal's browser link (single-use ticket) on stderr even when stderr is not a terminal (never with the journal log format)")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usage)
			printDefaults(fs, stderr)
			return 0
		}
		fmt.Fprintf(stderr, "ahpd: %s (see ahpd --help)\n", flagInMessage.ReplaceAllString(err.Error(), "$1--$2"))
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ahpd: unexpected argument %q (see ahpd --help)\n", fs.Arg(0))
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stderr, "ahpd", daemon.Version)
		return 0
	}
	flagged := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { flagged[f.Name] = true })
	path := config.FindFile(*configFlag)
	s, _, err := config.LoadSettings(path, fl, flagged)
	if *checkConfig {
		if err == nil {
			err = checkListener(s.Config)
		}
		return reportCheck(stderr, *configFlag, path, err)
	}
	if *checkUpgrade {
		return upgradeCheck(stderr, err)
	}
	if err != nil {
		printErr(stderr, "config", err)
		var ce *config.FileError
		if errors.As(err, &ce) && ce.Path == "" {
			return 2 // a bad flag value is a usage error
		}
		return 1
	}
	return run(s, runOptions{configFlag: *configFlag, configPath: path, fromFlags: fl, flagged: flagged, printLink: *printLink, args: args}, stderr)
}

// flagInMessage is a flag as Go's flag package names it in an error
// ("flag provided but not defined: -bogus"), to be written --bogus.
var flagInMessage = regexp.MustCompile(`(^|: |flag |for )-([A-Za-z][A-Za-z0-9_.-]+)`)

// printDefaults is flag.PrintDefaults with the flags written as the README
// and the usage text write them, with two dashes (--check-config); Go's
// flag package takes both forms.
func printDefaults(fs *flag.FlagSet, w io.Writer) {
	fs.VisitAll(func(f *flag.Flag) {
		var b strings.Builder
		b.WriteString("  --" + f.Name)
		name, usage := flag.UnquoteUsage(f)
		if name != "" {
			b.WriteString(" " + name)
		}
		b.WriteString("\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t"))
		if def := f.DefValue; def != "" && def != "false" && def != "0" {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					def = strconv.Quote(def)
				}
			}
			b.WriteString(" (default " + def + ")")
		}
		fmt.Fprintln(w, b.String())
	})
}

// printErr writes err with one "ahpd: " prefix per line (errors.Join
// puts each config problem on its own line).
func printErr(w io.Writer, what string, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "ahpd: %s: %s\n", what, line)
	}
}

func reportCheck(w io.Writer, flagValue, path string, err error) int {
	if err != nil {
		printErr(w, "config", err)
		return 1
	}
	if path == "" {
		if flagValue == "none" {
			fmt.Fprintln(w, "ahpd: config: no file (--config none); the flags and defaults are valid")
		} else {
			fmt.Fprintf(w, "ahpd: config: no file (looked for %s); the flags and defaults are valid\n", strings.Join(config.DefaultPaths(), ", "))
		}
		return 0
	}
	fmt.Fprintf(w, "ahpd: config: %s is valid\n", path)
	return 0
}

// configFileOption is daemon.Options.ConfigFile: the file loaded, "" for
// none found, "none" for --config none.
func (ro runOptions) configFileOption() string {
	if ro.configFlag == "none" {
		return "none"
	}
	return ro.configPath
}

type runOptions struct {
	configFlag string // --config as given: "", "none" or a path
	configPath string // the file loaded at start, "" for none
	fromFlags  config.Settings
	flagged    map[string]bool
	printLink  bool // --print-link
	args       []string
}

func run(s config.Settings, ro runOptions, stderr io.Writer) int {
	level := new(slog.LevelVar)
	_ = level.UnmarshalText([]byte(s.LogLevel)) // validated by config.LoadSettings
	journal := s.LogFormat == "journal" || s.LogFormat == "auto" && systemd.JournalStderr(stderr)
	var h slog.Handler
	if journal {
		h = systemd.NewJournalHandler(stderr, level)
	} else {
		h = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	}
	log := slog.New(h)
	// fatal reports why the daemon cannot start, as an error for journald.
	fatal := func(format string, args ...any) int {
		msg := "ahpd: " + fmt.Sprintf(format, args...)
		if journal {
			msg = "<3>" + strings.ReplaceAll(msg, "\n", "\n<3>")
		}
		fmt.Fprintln(stderr, msg)
		return 1
	}
	if ro.configPath != "" {
		log.Info("config file", "path", ro.configPath)
	}

	// Catch SIGHUP and SIGUSR2 before anything can send them: their
	// default action would end the daemon.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Serving also ends for an upgrade in place (runner.upgrade).
	ctx, endServing := context.WithCancel(sigCtx)
	defer endServing()

	// What an upgrade in place needs later: the binary as started, and
	// systemd's variables, which the lines below clear.
	up := &upgrader{args: ro.args, started: time.Now()}
	if self, err := os.Executable(); err == nil {
		up.self = self
	}
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
		if v, ok := os.LookupEnv(k); ok {
			up.env = append(up.env, k+"="+v)
		}
	}
	in, err := takeState()
	if err != nil {
		return fatal("%v", err)
	}
	if in != nil {
		if err := in.listeners(); err != nil {
			return fatal("%v", err)
		}
		up.adopt(in)
	}

	// Read (and clear) systemd's variables before any terminal starts.
	sd, err := systemd.NotifierFromEnv()
	if err != nil {
		log.Warn("not notifying systemd", "err", err)
	}
	wd, err := systemd.WatchdogFromEnv()
	if err != nil {
		log.Warn("watchdog disabled", "err", err)
	}
	act, err := systemd.ListenersFromEnv()
	if err != nil {
		return fatal("%v", err)
	}

	cfg := s.Config
	// One daemon per state directory, held until run returns (and by no
	// terminal: the lock file is close-on-exec).
	lock, err := auth.LockStateDir(cfg.WithDefaults().StateDir)
	if err != nil {
		act.Close()
		return fatal("%v", err)
	}
	defer lock.Close()
	if in != nil && in.http != nil {
		act.HTTP = in.http // kept across the upgrade
	} else if act.HTTP != nil {
		log.Info("HTTP listener from socket activation", "addr", act.HTTP.Addr().String())
	}
	if act.HTTP != nil {
		cfg.Listen = act.HTTP.Addr().String()
	}
	// Shells and tokens over plain HTTP beyond this machine: refused
	// unless asked for. An upgrade in place keeps the listener it serves
	// (a refusal here would end every terminal): it only warns.
	if listen := cfg.WithDefaults().Listen; !cfg.TLS() && !cfg.InsecureListen && !loopbackOnly(listen) {
		if in == nil {
			act.Close()
			return fatal("%s", insecureListenMessage(listen))
		}
		log.Warn("serving plain HTTP beyond loopback (an upgrade keeps the listener); set tlsCert and tlsKey, or insecureListen = true", "addr", listen)
	}
	certs, err := newCertStore(cfg.WithDefaults())
	if err != nil {
		act.Close()
		return fatal("%v", err)
	}
	var tlsConf *tls.Config
	if certs != nil {
		tlsConf = certs.tlsConfig()
	}
	busy, stopScaling := procs.Start(log)
	defer stopScaling()
	srv, err := daemon.New(cfg, daemon.Options{Logger: log, Busy: busy, ConfigFile: ro.configFileOption(), Started: up.started, TLS: tlsConf})
	if err != nil {
		act.Close()
		return fatal("%v", err)
	}
	if in != nil {
		// The events' numbering goes on (before any channel is adopted).
		srv.Events().Restore(in.daemon.EventSeq, in.daemon.Events)
	}
	// A soft memory limit from the budgets, unless GOMEMLIMIT sets one.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(daemon.MemoryLimit(srv.Config()))
	}
	ln := act.HTTP
	if ln == nil {
		if ln, err = net.Listen("tcp", srv.Config().Listen); err != nil {
			act.Close()
			if errors.Is(err, syscall.EADDRINUSE) {
				return fatal("listen: %s is in use (another ahpd, or another server); pick another address with --listen, e.g. --listen 127.0.0.1:0 for any free port (with make run: make run ARGS='--listen 127.0.0.1:9000')", srv.Config().Listen)
			}
			return fatal("listen: %v", err)
		}
	}
	// The control plane's Upgrade call runs the runner's upgrade, once the
	// runner exists (below).
	var runnerRef atomic.Pointer[runner]
	copts := service.ControlOptions{Path: s.Control, HTTPAddr: ln.Addr().String(),
		Started: up.started, Upgrades: int64(up.upgrades), Upgraded: up.upgraded, Refused: up.lastRefused,
		Upgrade: func(bin string) (string, int64, error) {
			r := runnerRef.Load()
			if r == nil {
				return "", 0, fmt.Errorf("%w: the daemon is still starting", service.ErrUpgradeRefused)
			}
			if bin == "" {
				bin = up.self
			}
			if err := r.upgrade(bin, "ahpctl daemon upgrade"); err != nil {
				return "", 0, fmt.Errorf("%w: %v", service.ErrUpgradeRefused, err)
			}
			return bin, int64(up.upgrades + 1), nil
		},
	}
	var cp *service.ControlPlane
	if in != nil && in.control != nil {
		cl, err := control.Inherited(in.control, in.daemon.ControlActivated)
		if err != nil {
			ln.Close()
			return fatal("control: %v", err)
		}
		copts.Listener = cl
	} else if act.Control != nil {
		cl, err := control.FromListener(act.Control)
		if err != nil {
			act.Control.Close()
			ln.Close()
			return fatal("control: %v", err)
		}
		if s.Control != "" && s.Control != cl.Path() {
			log.Warn("control socket from socket activation differs from --control/control; using it", "path", cl.Path(), "configured", s.Control)
		}
		copts.Listener = cl
	}
	if cp, err = srv.StartControl(ctx, copts); err != nil {
		ln.Close()
		return fatal("control: %v", err)
	}
	defer cp.Close()

	// Links name publicUrl, else the listener (https with TLS).
	base := srv.Config().BaseURL(ln.Addr().String())
	var link string // the default terminal's line for the operator
	if in != nil {
		n, err := srv.AdoptChannels(in.state)
		if err != nil {
			log.Error("upgrade: channels lost", "err", err)
		}
		took := time.Since(in.daemon.Upgraded).Round(time.Millisecond)
		if in.refused != "" {
			log.Warn("took its channels back: the upgrade was refused after the hand-over began", "reason", in.refused,
				"channels", n, "upgrades", up.upgrades, "took", took)
		} else {
			log.Info("upgraded in place", "from", in.daemon.From, "to", "ahpd "+daemon.Version, "channels", n,
				"upgrades", up.upgrades, "took", took)
		}
	} else if !cfg.NoDefaultTerminal {
		ch, err := srv.CreateTerminal(service.TerminalSpec{ID: "shell", Title: "shell"})
		if err != nil {
			ln.Close()
			return fatal("default terminal: %v", err)
		}
		if journal || !ro.printLink && !isTerminal(stderr) {
			// A log (the journal, a file) is kept and may be read by
			// others: no ticket in it.
			link = "log"
			log.Info("default terminal started; print a browser link with: "+ahpctlName()+" open "+ch.URI, "channel", ch.URI)
		} else {
			// The operator's link reaches every channel (the page lists
			// them all) and opens the default terminal.
			l, err := srv.BrowserLink(ctx, base, service.LinkRequest{Channel: ch.URI, AllChannels: true, Role: auth.RoleControl})
			if err != nil {
				ln.Close()
				return fatal("default terminal's link: %v", err)
			}
			link = fmt.Sprintf("\n  Open %s in your browser (single-use link, valid %v)\n\n", l.URL, srv.Config().TicketTTL)
		}
	}
	if _, kept := srv.Registry().Get("ahp-telemetry:/ahpd"); cfg.DaemonTelemetry && !kept {
		if _, err := srv.CreateTelemetry(ctx, service.TelemetryRequest{Kind: "daemon", ID: "ahpd"}); err != nil {
			ln.Close()
			return fatal("daemon telemetry: %v", err)
		}
	}
	log.Info("listening", "addr", ln.Addr().String(), "url", base, "control", cp.Path(), "admin_token", filepath.Join(srv.Config().StateDir, "admin.token"), "version", daemon.Version)
	if link != "" && link != "log" {
		// Last, so that it is what the operator sees.
		fmt.Fprint(stderr, link)
	}

	r := &runner{
		srv: srv, log: log, level: level, sd: sd, watchdog: wd, opts: ro, started: s,
		up: up, ln: ln, cp: cp, serving: ctx, endServing: endServing, certs: certs,
		status: fmt.Sprintf("serving %s; control socket %s", strings.TrimSuffix(base, "/"), cp.Path()),
		probe:  probeURL(ln.Addr(), srv.Config()),
		// No proxy from the environment, no kept-alive connection. The
		// probe asks our own socket whether it answers, not who it is:
		// the certificate need not name 127.0.0.1.
		hc: &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
	}
	runnerRef.Store(r)
	loopCtx, stopLoop := context.WithCancel(context.Background())
	var loop sync.WaitGroup
	loop.Go(func() { r.loop(loopCtx, ctx, hup, usr2) })
	defer func() { stopLoop(); loop.Wait() }()

	// Both listeners are bound and listening: a connection made now is
	// queued by the kernel and served as soon as Serve runs.
	r.notify("READY=1\nSTATUS=" + r.status)
	if err := srv.Serve(ctx, ln); err != nil {
		return fatal("%v", err)
	}
	if h := r.pending(); h != nil {
		stopLoop()
		loop.Wait()
		cp.Close() // the socket file stays: the new binary serves it
		err := up.exec(srv, log, h.bin, h.http, h.control)
		return fatal("upgrade: %v; the terminals are lost", err)
	}
	log.Info("stopped")
	return 0
}

// runner is the daemon's main loop: SIGHUP reloads, watchdog pings.
type runner struct {
	srv      *daemon.Server
	log      *slog.Logger
	level    *slog.LevelVar
	sd       *systemd.Notifier
	watchdog time.Duration // WatchdogSec; 0: none
	opts     runOptions
	started  config.Settings // in force since start: keys that need a restart
	status   string          // STATUS= for systemctl status
	probe    string          // URL of /healthz on our own listener
	hc       *http.Client
	certs    *certStore // the listener's certificate; nil without TLS

	up         *upgrader
	ln         net.Listener
	cp         *service.ControlPlane
	serving    context.Context // cancelled when serving ends: a shutdown, or an upgrade handed over
	endServing context.CancelFunc
	mu         sync.Mutex   // guards upgrading and handing
	upgrading  bool         // upgrade runs or ran: one at a time
	handing    *handingOver // an upgrade that passed its check: set once, by upgrade
}

// handingOver is an upgrade that passed its check: the new binary and
// the listeners' descriptors it gets.
type handingOver struct {
	bin           string
	http, control *os.File
}

func (r *runner) pending() *handingOver {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handing
}

// upgrade starts an upgrade in place to bin, asked by by (SIGUSR2 or
// ahpctl daemon upgrade): the new binary is checked first, and one that
// fails the check is refused with the reason, logged, while this daemon
// goes on serving. Then serving ends (connections close with 1012) and
// run hands over and re-executes (upgrader.exec).
func (r *runner) upgrade(bin, by string) (err error) {
	r.mu.Lock()
	if r.upgrading {
		r.mu.Unlock()
		r.log.Warn("upgrade refused: one is under way", "by", by)
		return errors.New("an upgrade is already under way")
	}
	r.upgrading = true
	r.mu.Unlock()
	reloading := false
	defer func() {
		if err == nil {
			return
		}
		if r.serving.Err() != nil {
			// SIGTERM came while the new binary was checked: the daemon
			// is shutting down, not serving on.
			r.log.Warn("upgrade abandoned: ahpd is shutting down", "err", err, "by", by)
		} else {
			r.log.Error("upgrade refused; still serving", "err", err, "by", by)
		}
		r.up.refuse(time.Now(), err.Error(), false)
		if reloading && r.serving.Err() == nil {
			r.notify("READY=1\nSTATUS=" + r.status)
		}
		r.mu.Lock()
		r.upgrading = false
		r.mu.Unlock()
	}()
	if bin == "" {
		return errors.New("the path ahpd was started from is unknown (os.Executable failed)")
	}
	if !filepath.IsAbs(bin) {
		return fmt.Errorf("binary %q: not an absolute path", bin)
	}
	r.notify(fmt.Sprintf("RELOADING=1\nSTATUS=upgrading to %s\nMONOTONIC_USEC=%d", bin, systemd.MonotonicUsec()))
	reloading = true
	if err := r.up.check(bin); err != nil {
		return err
	}
	if r.serving.Err() != nil {
		return errors.New("ahpd is shutting down")
	}
	h := &handingOver{bin: bin}
	tl, ok := r.ln.(interface{ File() (*os.File, error) })
	if !ok {
		return fmt.Errorf("the HTTP listener (%T) cannot be handed over", r.ln)
	}
	if h.http, err = tl.File(); err != nil {
		return fmt.Errorf("the HTTP listener: %w", err)
	}
	if h.control, r.up.controlActivated, err = r.cp.Handover(); err != nil {
		h.http.Close()
		return err
	}
	r.mu.Lock()
	r.handing = h
	r.mu.Unlock()
	r.log.Info("upgrading in place", "binary", bin, "pid", os.Getpid(), "by", by)
	r.srv.PrepareUpgrade()
	r.endServing()
	return nil
}

func (r *runner) notify(state string) {
	if err := r.sd.Notify(state); err != nil {
		r.log.Warn("sd_notify failed", "err", err)
	}
}

// loop runs until ctx is cancelled (after Serve returns). serving is
// cancelled when shutdown begins: the loop then sends STOPPING=1, and from
// then on the watchdog pings without probing, since the HTTP listener is
// closing.
func (r *runner) loop(ctx, serving context.Context, hup, usr2 <-chan os.Signal) {
	stopping := serving.Done()
	var tick <-chan time.Time
	if r.watchdog > 0 && r.sd != nil {
		// sd_watchdog_enabled(3): ping at half the interval.
		t := time.NewTicker(r.watchdog / 2)
		defer t.Stop()
		tick = t.C
		r.log.Info("watchdog enabled", "interval", r.watchdog)
	}
	healthy := true
	for {
		select {
		case <-ctx.Done():
			if stopping != nil && serving.Err() != nil && r.pending() == nil {
				r.notify("STOPPING=1\nSTATUS=shutting down") // select chose this case first
			}
			return
		case <-stopping:
			if r.pending() == nil {
				r.notify("STOPPING=1\nSTATUS=shutting down")
			}
			stopping = nil
		case <-hup:
			r.reload()
		case <-usr2:
			if serving.Err() != nil {
				continue
			}
			_ = r.upgrade(r.up.self, "SIGUSR2") // a refusal is logged
		case <-tick:
			if serving.Err() == nil {
				if err := r.check(ctx); err != nil {
					if healthy {
						r.log.Error("watchdog: health check failed; not pinging systemd", "err", err)
					}
					healthy = false
					continue
				}
				if !healthy {
					r.log.Info("watchdog: health check passes again")
				}
				healthy = true
			}
			r.notify("WATCHDOG=1")
		}
	}
}

// check is the watchdog's health check: the registry's lock is free and
// the HTTP server answers /healthz on its own listener within a quarter of
// the watchdog interval (half the ping period). A miss skips one ping;
// systemd restarts the service only after a whole interval without one.
func (r *runner) check(ctx context.Context) error {
	_ = r.srv.Registry().List()
	if r.probe == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, max(r.watchdog/4, 50*time.Millisecond))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.probe, nil)
	if err != nil {
		return err
	}
	res, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1024))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz: %s", res.Status)
	}
	return nil
}

// healthURL is /healthz on addr, with an unspecified IP (0.0.0.0, ::)
// replaced by loopback.
func healthURL(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return ""
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
		if ta.IP != nil && ta.IP.To4() == nil {
			ip = net.IPv6loopback
		}
	}
	return "http://" + net.JoinHostPort(ip.String(), fmt.Sprint(ta.Port)) + "/healthz"
}

// probeURL is the watchdog's /healthz on our own listener: https with
// TLS, under publicUrl's path.
func probeURL(addr net.Addr, cfg config.Config) string {
	u := healthURL(addr)
	if u == "" {
		return ""
	}
	u = strings.TrimSuffix(u, "/healthz") + cfg.BasePath() + "healthz"
	if cfg.TLS() {
		u = "https" + strings.TrimPrefix(u, "http")
	}
	return u
}

// reload re-reads the config file (the one given by --config, or the
// first default path that exists now) and applies its limits, logLevel,
// the files of tlsCert and tlsKey and tcpAllow, with the rules kept in the state directory (the file read
// becomes the one `ahpctl tcp deny` rewrites); a bad file changes
// nothing. Keys that need a restart are reported if they changed.
func (r *runner) reload() {
	r.notify(fmt.Sprintf("RELOADING=1\nSTATUS=reloading\nMONOTONIC_USEC=%d", systemd.MonotonicUsec()))
	defer r.notify("READY=1\nSTATUS=" + r.status)
	path := config.FindFile(r.opts.configFlag)
	s, _, err := config.LoadSettings(path, r.opts.fromFlags, r.opts.flagged)
	if err != nil {
		r.log.Error("reload failed; nothing changed", "err", err)
		return
	}
	_, changed, err := r.srv.UpdateLimits(context.Background(), nil, s.Limits)
	if err != nil {
		r.log.Error("reload failed; nothing changed", "err", err)
		return
	}
	if r.certs != nil {
		// A certificate that does not load leaves the one in use, and the
		// rest of the reload goes on.
		if certChanged, err := r.certs.reload(s.Config); err != nil {
			r.log.Error("reload: TLS certificate not changed", "err", err)
		} else if certChanged {
			r.log.Info("reload: TLS certificate loaded", "cert", s.TLSCert)
		}
	}
	_ = r.level.UnmarshalText([]byte(s.LogLevel))
	ro := r.opts
	ro.configPath = path
	tcpChanged := r.srv.ReloadTCPRules(context.Background(), ro.configFileOption(), s.TCPAllow)
	for _, key := range config.RestartOnlyChanges(r.started, s) {
		r.log.Warn("reload: "+key+" changed; restart ahpd to apply it", "key", key)
	}
	if path == "" {
		path = "none"
	}
	r.log.Info("config reloaded", "path", path, "limitsChanged", changed, "logLevel", s.LogLevel, "tcpAllowChanged", tcpChanged)
}

// isTerminal reports whether w is a terminal (the startup link is printed
// only there, never into a log file).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// ahpctlName is how the operator runs ahpctl, for the hints ahpd logs:
// "ahpctl" when it is on PATH, else the one beside this ahpd (./bin/ahpctl
// after make build), relative to the working directory when under it.
func ahpctlName() string {
	if _, err := exec.LookPath("ahpctl"); err == nil {
		return "ahpctl"
	}
	self, err := os.Executable()
	if err != nil {
		return "ahpctl"
	}
	p := filepath.Join(filepath.Dir(self), "ahpctl")
	if _, err := os.Stat(p); err != nil {
		return "ahpctl"
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return p
}
