package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// Version is ahpctl's version, set at link time.
var Version = "dev"

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the daemon refused, or the environment failed
	exitUsage = 2
)

// usageError is bad usage (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// app is one ahpctl invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	control string        // socket path
	output  string        // the global -o, "" if not given
	timeout time.Duration // per unary RPC
	cc      *grpc.ClientConn
}

// Main runs ahpctl with args (without the program name) and returns the
// exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err := a.run(ctx, args)
	if a.cc != nil {
		a.cc.Close()
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, prefixed(oneLine(ue.msg)))
		return exitUsage
	}
	var xe *exitStatusError
	if errors.As(err, &xe) {
		// The program's own status (attach): already reported.
		return xe.code
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.InvalidArgument {
		// A value the daemon refuses is bad usage too.
		fmt.Fprintln(stderr, prefixed(oneLine(a.describe(err))))
		return exitUsage
	}
	fmt.Fprintln(stderr, prefixed(oneLine(a.describe(err))))
	return exitError
}

func prefixed(msg string) string {
	if strings.HasPrefix(msg, "ahpctl ") || strings.HasPrefix(msg, "ahpctl:") {
		return msg
	}
	return "ahpctl: " + msg
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// describe is the CLI side of the error mapping: a gRPC status becomes one
// sentence an operator can act on.
func (a *app) describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Sprintf("timed out after %v (--timeout)", a.timeout)
		}
		return err.Error()
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		if strings.Contains(msg, "permission denied") {
			return fmt.Sprintf("cannot reach ahpd at %s: permission denied (the control socket is mode 0660: run as the daemon's user or a member of its group)", a.control)
		}
		if strings.Contains(msg, "no such file") || strings.Contains(msg, "connection refused") {
			return fmt.Sprintf("cannot reach ahpd at %s: no daemon is listening (is ahpd running? set --control or AHP_CONTROL)", a.control)
		}
		return fmt.Sprintf("ahpd at %s is unavailable: %s", a.control, msg)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("timed out after %v waiting for ahpd (--timeout)", a.timeout)
	case codes.InvalidArgument:
		return "invalid argument: " + msg
	case codes.NotFound, codes.AlreadyExists:
		return msg
	case codes.PermissionDenied:
		return "permission denied: " + msg
	case codes.ResourceExhausted:
		return "limit reached: " + msg
	case codes.FailedPrecondition:
		return "cannot do that now: " + msg
	case codes.Unimplemented:
		return "this daemon does not support that (older ahpd?): " + msg
	case codes.Canceled:
		return "cancelled"
	}
	return fmt.Sprintf("daemon error (%s): %s", st.Code(), msg)
}

const globalUsage = `ahpctl manages ahpd, the daemon that serves terminals and TCP sockets to
browsers and CLIs over AHP/1, through its gRPC control socket.

Usage:
  ahpctl [global flags] COMMAND [flags] [args]

Commands:
%s
Global flags:
  --control PATH   control socket (default $AHP_CONTROL, else the first that exists of
                   $RUNTIME_DIRECTORY/ahpd.sock, $XDG_RUNTIME_DIR/ahpd/control.sock,
                   $XDG_STATE_HOME/ahpd/control.sock, ~/.local/state/ahpd/control.sock,
                   /run/ahpd/$USER/ahpd.sock (the ahpd@USER system service))
  --timeout DUR    timeout of each request (default 10s)
  -o FORMAT        output format of a listing: table, wide, json or yaml
                   (the same as the command's own -o)

The control socket is mode 0660: whoever can open it (the daemon's user and
group) has every right. Run 'ahpctl COMMAND --help' for a command's flags and
examples. Where a command takes a channel URI, a bare ID (shell) names the one
channel with that ID. Exit status: 0 success, 1 error, 2 bad usage (a value
the daemon refuses included); attach exits with the program's status.

Examples:
  ahpctl terminal create --id build -- make -j8
  ahpctl attach build                 # = ahp-terminal:/build; Ctrl-] d detaches
  ahpctl token create --channel ahp-terminal:/build --role view --ttl 1h
  ahpctl -o json ls                   # ls is channels list
  ahpctl tcp allow 127.0.0.1:3000 && ahpctl tcp create 127.0.0.1:3000
  ahpctl limits set maxOutputStall=2s maxBufferedBytes=8MiB
`

func (a *app) run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ahpctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.control, "control", "", "control socket path")
	fs.DurationVar(&a.timeout, "timeout", 10*time.Second, "timeout of each request")
	fs.StringVar(&a.output, "o", "", "output format of the command")
	fs.StringVar(&a.output, "output", "", "same as -o")
	version := fs.Bool("version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.printGlobalUsage(a.stdout)
			return flag.ErrHelp
		}
		return usagef("%s (see ahpctl --help)", dashes(err))
	}
	if *version {
		fmt.Fprintln(a.stdout, "ahpctl", Version)
		return nil
	}
	if a.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	if a.output != "" {
		if err := checkOutput(a.output); err != nil {
			return err
		}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		a.printGlobalUsage(a.stderr)
		return usagef("missing command (see ahpctl --help)")
	}
	if a.control == "" {
		a.control = a.getenv("AHP_CONTROL")
	}
	if a.control == "" {
		a.control = defaultControlPath(a.getenv)
	}
	return a.dispatch(ctx, rootCommand(), rest, "ahpctl")
}

func (a *app) printGlobalUsage(w io.Writer) {
	var b strings.Builder
	for _, c := range rootCommand().sub {
		if c.hidden {
			continue
		}
		for _, s := range c.leaves() {
			fmt.Fprintf(&b, "  %-36s %s\n", strings.Join(strings.Fields(c.name+" "+s.name+" "+s.args), " "), s.summary)
		}
	}
	fmt.Fprintf(w, globalUsage, b.String())
}

// defaultControlPath mirrors the daemon's default (daemon/control.DefaultPath)
// and picks the first candidate that exists, so that ahpctl finds a daemon
// started under systemd as well as one started by hand.
func defaultControlPath(getenv func(string) string) string {
	var cands []string
	if d := getenv("RUNTIME_DIRECTORY"); d != "" {
		cands = append(cands, filepath.Join(filepath.SplitList(d)[0], "ahpd.sock"))
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		cands = append(cands, filepath.Join(d, "ahpd", "control.sock"))
	}
	if d := getenv("STATE_DIRECTORY"); d != "" {
		cands = append(cands, filepath.Join(filepath.SplitList(d)[0], "control.sock"))
	}
	if d := getenv("XDG_STATE_HOME"); d != "" {
		cands = append(cands, filepath.Join(d, "ahpd", "control.sock"))
	}
	if h, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(h, ".local", "state", "ahpd", "control.sock"))
	}
	// The system service ahpd@USER (systemd/ahpd@.service:
	// RuntimeDirectory=ahpd/%i, ahpd@.socket's ListenStream).
	if name := currentUser(getenv); name != "" {
		cands = append(cands, filepath.Join(systemRunDir, name, "ahpd.sock"))
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return c
		}
	}
	if len(cands) == 0 {
		return "control.sock"
	}
	return cands[0]
}

// systemRunDir is where the ahpd@USER units keep each user's control
// socket (a variable for tests).
var systemRunDir = "/run/ahpd"

// currentUser is the name of the user ahpctl runs as: the password
// database's (the effective user, as the unit's User=%i), else $USER.
func currentUser(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return getenv("USER")
}

// conn returns the gRPC connection to the control socket (lazily made).
func (a *app) conn() (*grpc.ClientConn, error) {
	if a.cc != nil {
		return a.cc, nil
	}
	path, err := filepath.Abs(a.control)
	if err != nil {
		return nil, err
	}
	a.control = path
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no control socket at %s (is ahpd running? set --control or AHP_CONTROL)", path)
	}
	cc, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	a.cc = cc
	return cc, nil
}

// rpc returns a context bounded by --timeout for one unary call.
func (a *app) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// connect returns the control-plane clients and a context bounded by the
// request timeout; the caller defers cancel.
func (a *app) connect(ctx context.Context) (*clients, context.Context, context.CancelFunc, error) {
	c, err := a.clients()
	if err != nil {
		return nil, nil, nil, err
	}
	rctx, cancel := a.rpc(ctx)
	return c, rctx, cancel, nil
}

// clients of the control plane.
type clients struct {
	daemon    ahpv1.DaemonServiceClient
	channels  ahpv1.ChannelServiceClient
	terminals ahpv1.TerminalServiceClient
	tokens    ahpv1.TokenServiceClient
	limits    ahpv1.LimitsServiceClient
	viewers   ahpv1.ViewerServiceClient
	tcp       ahpv1.TCPServiceClient
	telemetry ahpv1.TelemetryServiceClient
	// recordings lists and reads terminal recordings.
	recordings ahpv1.RecordingServiceClient
}

func (a *app) clients() (*clients, error) {
	cc, err := a.conn()
	if err != nil {
		return nil, err
	}
	return &clients{
		daemon:     ahpv1.NewDaemonServiceClient(cc),
		channels:   ahpv1.NewChannelServiceClient(cc),
		terminals:  ahpv1.NewTerminalServiceClient(cc),
		tokens:     ahpv1.NewTokenServiceClient(cc),
		limits:     ahpv1.NewLimitsServiceClient(cc),
		viewers:    ahpv1.NewViewerServiceClient(cc),
		tcp:        ahpv1.NewTCPServiceClient(cc),
		telemetry:  ahpv1.NewTelemetryServiceClient(cc),
		recordings: ahpv1.NewRecordingServiceClient(cc),
	}, nil
}
