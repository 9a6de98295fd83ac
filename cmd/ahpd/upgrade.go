package main

// An upgrade in place (SIGUSR2; docs/upgrade.md): ahpd checks the new
// binary (ahpd --upgrade-check), closes its connections with 1012, hands
// its listeners and terminals to a sealed state, and re-executes itself
// with execve: the same PID, its shells still its children.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/internal/handover"
	"golang.org/x/sys/unix"
)

// envState names, in a re-executed ahpd's environment, the descriptor of
// the sealed state it inherits (handover.Inherited).
const envState = "AHPD_UPGRADE_STATE"

// envRefused, in the environment of an ahpd that re-executed itself with
// its own state because the new binary refused it (or could not be
// executed), is why: the upgrade did not happen.
const envRefused = "AHPD_UPGRADE_REFUSED"

// maxRefusedReason bounds the reason passed in envRefused.
const maxRefusedReason = 2000

// maxState bounds the state a new ahpd reads: terminals of 1,000,000
// scrollback lines are ~130 MB each; 4 GiB is the bound of a sane host.
const maxState = 4 << 30

// sectionDaemon names the daemon's own section of the state.
const sectionDaemon = "daemon"

// daemonVersion is the version of the daemon section: a change to
// handedDaemon bumps it. A binary built with -ldflags -X
// main.stateVersionOverride=N speaks version N instead (the tests'
// binary of an incompatible state version).
const daemonVersion = 1

var stateVersionOverride string

// refuseTerminals, set with -ldflags -X main.refuseTerminals=1, makes
// --upgrade-check refuse a state that holds a terminal: the tests' binary
// that passes the first check (no terminal in it) and refuses the second,
// after the freeze, so that the daemon takes its own state back. Empty
// (inert) in every other build.
var refuseTerminals string

// stateVersion is the daemon section's version this binary writes and
// reads.
func stateVersion() int {
	if v, err := strconv.Atoi(stateVersionOverride); err == nil {
		return v
	}
	return daemonVersion
}

// handedDaemon is the daemon section: what the next binary needs besides
// the channels.
type handedDaemon struct {
	Version  int       `json:"version"`
	Started  time.Time `json:"started"`  // when the first process of this PID started
	Upgraded time.Time `json:"upgraded"` // when this hand-over began
	Upgrades int       `json:"upgrades"` // hand-overs before this one
	// Previous is when the last upgrade before this one was done (zero:
	// none), which a binary that takes its own state back goes on
	// reporting.
	Previous time.Time `json:"previous,omitzero"`
	// Refused is the last upgrade refused since Started, if any.
	Refused *handedRefusal `json:"refused,omitempty"`
	// EventSeq and Events are the event bus's last seq and its retained
	// events (events.Bus.Snapshot): the numbering goes on in the next
	// binary, and a watcher resumes after the last event it got.
	EventSeq uint64         `json:"eventSeq,omitempty"`
	Events   []events.Event `json:"events,omitempty"`
	// The listeners' descriptors (-1: none): the HTTP listener and the
	// control socket, kept open across the execve, so that a connect
	// meanwhile waits in their backlogs instead of being refused.
	HTTPFD    int `json:"httpFd"`
	ControlFD int `json:"controlFd"`
	// ControlActivated: the control socket came from socket activation;
	// its file is systemd's (control.Inherited).
	ControlActivated bool   `json:"controlActivated,omitempty"`
	From             string `json:"from"` // the binary that wrote it, for the log
}

// handedRefusal is an upgrade that was refused (service.UpgradeRefusal).
type handedRefusal struct {
	Time          time.Time `json:"time"`
	Reason        string    `json:"reason"`
	AfterHandOver bool      `json:"afterHandOver,omitempty"`
}

// inherited is what a re-executed ahpd took over.
type inherited struct {
	state   *handover.State
	daemon  handedDaemon
	http    net.Listener
	control *os.File
	// refused: this ahpd is the one that handed over, taking its state
	// back because the upgrade was refused (envRefused); why.
	refused string
}

// takeState reads the state an upgrade handed over, if any, and removes
// its variable from the environment (no shell inherits it).
func takeState() (*inherited, error) {
	refused, _ := os.LookupEnv(envRefused)
	os.Unsetenv(envRefused)
	v, ok := os.LookupEnv(envState)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(envState)
	fd, err := strconv.Atoi(v)
	if err != nil {
		return nil, fmt.Errorf("upgrade: %s=%q is not a descriptor", envState, v)
	}
	f, err := handover.Inherited(fd)
	if err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	defer f.Close()
	st, err := handover.Read(f, maxState)
	if err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	b, ok := st.Section(sectionDaemon)
	if !ok {
		return nil, errors.New("upgrade: the state has no daemon section")
	}
	in := &inherited{state: st, refused: refused}
	if err := json.Unmarshal(b, &in.daemon); err != nil {
		return nil, fmt.Errorf("upgrade: daemon section: %w", err)
	}
	// The channels' sections carry their own versions (daemon.CheckState).
	if in.daemon.Version != stateVersion() {
		return nil, fmt.Errorf("upgrade: daemon state version %d, this ahpd reads version %d", in.daemon.Version, stateVersion())
	}
	return in, nil
}

// listeners takes the inherited listeners: the HTTP one as a
// net.Listener; the control socket's descriptor stays a file for
// control.Inherited. (main made every inherited descriptor close-on-exec
// already: fds.CloseOnExecInherited.)
func (in *inherited) listeners() error {
	if fd := in.daemon.HTTPFD; fd >= 3 {
		f := os.NewFile(uintptr(fd), "http-listener")
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("upgrade: HTTP listener (descriptor %d): %w", fd, err)
		}
		in.http = ln
	}
	if fd := in.daemon.ControlFD; fd >= 3 {
		in.control = os.NewFile(uintptr(fd), "control-socket")
	}
	return nil
}

// upgradeCheck is ahpd --upgrade-check: run by the old daemon on the new
// binary before it gives anything up. It reads the check state the old
// daemon passes (the versions it would write) and the config, and exits
// 0 when this binary can take over, 1 (with the reason) when not.
func upgradeCheck(stderr io.Writer, configErr error) int {
	in, err := takeState()
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "ahpd: upgrade check: %v\n", err)
		return 1
	case in == nil:
		fmt.Fprintf(stderr, "ahpd: upgrade check: no state (%s is not set): run by the daemon at an upgrade\n", envState)
		return 1
	case configErr != nil:
		printErr(stderr, "upgrade check: config", configErr)
		return 1
	}
	if err := daemon.CheckState(in.state); err != nil {
		fmt.Fprintf(stderr, "ahpd: upgrade check: %v\n", err)
		return 1
	}
	if _, ok := in.state.Section("terminal/0"); ok && refuseTerminals != "" {
		fmt.Fprintln(stderr, "ahpd: upgrade check: this binary refuses a state with terminals (built with -X main.refuseTerminals for tests)")
		return 1
	}
	fmt.Fprintf(stderr, "ahpd: upgrade check: ahpd %s takes state version %d from %s\n", daemon.Version, in.daemon.Version, in.daemon.From)
	return 0
}

// upgrader carries out an upgrade in place for run.
type upgrader struct {
	self     string   // the binary ahpd was started from (os.Executable at start)
	args     []string // ahpd's arguments, for the new binary
	env      []string // systemd's variables that run cleared, restored for the new binary
	started  time.Time
	upgrades int
	upgraded time.Time // when the last upgrade was done; zero: never
	// controlActivated: the control socket handed over came from socket
	// activation (set by runner.upgrade).
	controlActivated bool

	mu      sync.Mutex // guards refused
	refused *service.UpgradeRefusal
}

// refuse records an upgrade refused at t, and why.
func (u *upgrader) refuse(t time.Time, reason string, afterHandOver bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.refused = &service.UpgradeRefusal{Time: t, Reason: reason, AfterHandOver: afterHandOver}
}

// lastRefused returns the last upgrade refused since the daemon started,
// or nil.
func (u *upgrader) lastRefused() *service.UpgradeRefusal {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.refused == nil {
		return nil
	}
	r := *u.refused
	return &r
}

// check runs bin --upgrade-check with a check state: the versions this
// daemon would write, and its arguments (the config is read as it will
// be). It returns why bin cannot take over, or nil.
func (u *upgrader) check(bin string) error {
	fi, err := os.Stat(bin)
	switch {
	case err != nil:
		return fmt.Errorf("new binary: %w", err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("new binary %s: not a regular file", bin)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("new binary %s: not executable (mode %v)", bin, fi.Mode().Perm())
	}
	w := &handover.Writer{}
	b, _ := json.Marshal(u.daemonSection(-1, -1))
	if err := w.Section(sectionDaemon, b); err != nil {
		return err
	}
	if err := daemon.EmptyChannels(w); err != nil {
		return err
	}
	f, err := handover.Sealed("ahpd-check", w.Bytes())
	if err != nil {
		return err
	}
	defer f.Close()
	return u.runCheck(bin, f)
}

// runCheck runs bin --upgrade-check on the sealed state f (30 s at most).
func (u *upgrader) runCheck(bin string, f *os.File) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--upgrade-check"}, u.args...)...)
	cmd.ExtraFiles = []*os.File{f} // descriptor 3
	cmd.Env = append(append(os.Environ(), u.env...), envState+"=3")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("new binary %s: --upgrade-check did not answer within 30 s", bin)
	case out.Len() == 0:
		return fmt.Errorf("new binary %s: %w", bin, err)
	}
	return fmt.Errorf("new binary %s refused: %s", bin, strings.TrimSpace(out.String()))
}

func (u *upgrader) daemonSection(httpFD, controlFD int) handedDaemon {
	d := handedDaemon{
		Version: stateVersion(),
		Started: u.started, Upgraded: time.Now(), Upgrades: u.upgrades, Previous: u.upgraded,
		HTTPFD: httpFD, ControlFD: controlFD, ControlActivated: u.controlActivated, From: "ahpd " + daemon.Version,
	}
	if r := u.lastRefused(); r != nil {
		d.Refused = &handedRefusal{Time: r.Time, Reason: r.Reason, AfterHandOver: r.AfterHandOver}
	}
	return d
}

// adopt takes the daemon's figures from an inherited state: the upgrade
// count and time and the last refusal; for an ahpd that took its own
// state back (in.refused), the upgrade that was refused is not counted
// and becomes the last refusal.
func (u *upgrader) adopt(in *inherited) {
	u.started = in.daemon.Started
	if r := in.daemon.Refused; r != nil {
		u.refuse(r.Time, r.Reason, r.AfterHandOver)
	}
	if in.refused != "" {
		u.upgrades, u.upgraded = in.daemon.Upgrades, in.daemon.Previous
		u.refuse(in.daemon.Upgraded, in.refused, true)
		return
	}
	u.upgrades, u.upgraded = in.daemon.Upgrades+1, in.daemon.Upgraded
}

// exec hands over and re-executes bin: the terminals are frozen into the
// state with the listeners' descriptors, which lose close-on-exec, and
// execve replaces this process. It returns only if execve failed; then
// it tries the binary this process runs (/proc/self/exe) with the same
// state, and returns the error if that fails too.
func (u *upgrader) exec(srv *daemon.Server, log *slog.Logger, bin string, httpLn, control *os.File) error {
	w := &handover.Writer{}
	files, err := srv.HandOverChannels(w)
	if err != nil {
		return fmt.Errorf("handing the channels over: %w", err)
	}
	fd := func(f *os.File) int {
		if f == nil {
			return -1
		}
		return int(f.Fd())
	}
	d := u.daemonSection(fd(httpLn), fd(control))
	d.EventSeq, d.Events = srv.Events().Snapshot() // after the channels' last events
	b, _ := json.Marshal(d)
	if err := w.Section(sectionDaemon, b); err != nil {
		return err
	}
	state, err := w.Seal("ahpd-state") // the terminals' states go as they are, not copied into one buffer first
	if err != nil {
		return err
	}
	// The new binary checks the very state it will read; if it refuses
	// it, this binary takes its own state back (execve of /proc/self/exe:
	// the same program, even if its file was replaced), and the channels
	// go on under it; envRefused tells it why.
	refused := ""
	if err := u.runCheck(bin, state); err != nil {
		log.Error("upgrade refused after the hand-over began; this binary takes its channels back", "err", err)
		bin, refused = "/proc/self/exe", err.Error()
	}
	keep := append([]*os.File{state, httpLn, control}, files...)
	for _, f := range keep {
		if f != nil {
			if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
				return fmt.Errorf("keeping descriptor %d open across execve: %w", f.Fd(), err)
			}
		}
	}
	env := append(append(os.Environ(), u.env...), envState+"="+strconv.Itoa(int(state.Fd())))
	withRefused := func(reason string) []string {
		if len(reason) > maxRefusedReason {
			reason = reason[:maxRefusedReason] + "…"
		}
		return append(env[:len(env):len(env)], envRefused+"="+strings.ReplaceAll(reason, "\x00", ""))
	}
	argv := append([]string{bin}, u.args...)
	first := env
	if refused != "" {
		first = withRefused(refused)
	}
	err = syscall.Exec(bin, argv, first)
	// Still here: the new binary did not start. This one can read the
	// state it wrote.
	err2 := syscall.Exec("/proc/self/exe", argv, withRefused(fmt.Sprintf("execve %s: %v", bin, err)))
	// The files' finalizers would close the descriptors the execve must
	// pass: keep them reachable up to here.
	runtime.KeepAlive(keep)
	return fmt.Errorf("execve %s: %w; execve of this binary again: %w", bin, err, err2)
}
