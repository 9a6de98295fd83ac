package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
)

const usage = `ahpd serves terminals, telemetry and TCP sockets to browsers and ahpctl
over one WebSocket protocol (AHP/1) with per-viewer flow control.

Usage:
  ahpd [flags]

With no flags it listens on 127.0.0.1:7681, starts one terminal running your
login shell, and prints a URL (with a single-use ticket) that opens it in the
browser. The admin token lives in the state directory (mode 0600).

Flags:
`

// Main runs the daemon with command-line args and returns the exit status.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ahpd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:7681", "HTTP and WebSocket listen `address`")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "state `directory` holding admin.token (default $STATE_DIRECTORY, else $XDG_STATE_HOME/ahpd, else ~/.local/state/ahpd)")
	fs.StringVar(&cfg.WebsocketCompression, "websocket-compression", "deflate", "permessage-deflate: deflate or none")
	fs.BoolVar(&cfg.MetricsPublic, "metrics-public", false, "serve /metrics without a token")
	noTerm := fs.Bool("no-default-terminal", false, "do not start the default terminal running the login shell")
	controlPath := fs.String("control", "", "gRPC control `socket`, mode 0660 (default $RUNTIME_DIRECTORY/ahpd.sock, else $XDG_RUNTIME_DIR/ahpd/control.sock, else STATE_DIR/control.sock; \"none\" disables it)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn, error")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ahpd: unexpected argument %q (see ahpd --help)\n", fs.Arg(0))
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stderr, "ahpd", Version)
		return 0
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "ahpd: --log-level: %v\n", err)
		return 2
	}
	cfg.NoDefaultTerminal = *noTerm
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	srv, err := New(cfg, Options{Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "ahpd: %v\n", err)
		return 1
	}
	ln, err := net.Listen("tcp", srv.Config().Listen)
	if err != nil {
		fmt.Fprintf(stderr, "ahpd: listen: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cp, err := srv.StartControl(ctx, ControlOptions{Path: *controlPath, HTTPAddr: ln.Addr().String()})
	if err != nil {
		fmt.Fprintf(stderr, "ahpd: control: %v\n", err)
		ln.Close()
		return 1
	}
	defer cp.Close()

	base := "http://" + ln.Addr().String()
	if !cfg.NoDefaultTerminal {
		ch, err := srv.CreateTerminal(TerminalSpec{ID: "shell", Title: "shell"})
		if err != nil {
			fmt.Fprintf(stderr, "ahpd: default terminal: %v\n", err)
			ln.Close()
			return 1
		}
		fmt.Fprintf(stderr, "\n  Open %s in your browser (single-use link, valid %v)\n\n",
			srv.BrowserURL(base, ch.URI, RoleControl), srv.Config().TicketTTL)
	}
	log.Info("listening", "addr", ln.Addr().String(), "version", Version)
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "ahpd: %v\n", err)
		return 1
	}
	log.Info("stopped")
	return 0
}
