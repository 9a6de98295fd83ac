// Command attachbench measures `ahpctl attach` under a terminal flood, the
// way a user sees it: `cat` of a 64 MiB text file typed into an ahpd
// terminal that bin/ahpctl attach shows in a tmux pane, timed until the
// file's last line (a marker of its own) is on the pane's screen, against
// the same `cat` typed into a shell in a tmux pane of the same size (the
// raw baseline), and the raw PTY read of the file without tmux, all in the
// same run, interleaved, -rounds times. It reports per round and as
// medians: those times and their ratios, the snapshots the attach's
// subscription was sent during the cat (the daemon's count: `ahpctl -o
// json viewers list`, the subscription's snapshots after the marker less
// those before the cat, i.e. the initial one left out), the output bytes
// the daemon dropped for it, and the CPU time (utime+stime from
// /proc/PID/stat) of ahpd, of ahpctl attach and of the tmux server over
// the timed span.
//
// SIGINT and SIGTERM cancel the run: the step under way gives up, and
// the run's processes (ahpd, the tmux server, which is a daemon of its own
// and would outlive this process) are ended once, by run, before it
// returns. The raw PTY read runs in a process of its own (this binary with
// -rawread FILE, termbench.RawReadProcess), killed if it has not ended
// within -timeout.
//
// Run it with `make bench-attach` (which builds bin/ first and runs it
// under flock /tmp/ahp-bench.lock), or:
//
//	go build -o bin/ ./cmd/... && flock /tmp/ahp-bench.lock go run ./bench/attachbench
//
// See docs/benchmarks-attach.md for what it found.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/internal/units"
)

type config struct {
	ahpd, ahpctl string
	rounds       int
	sizeMiB      int
	cols, rows   int
	poll         time.Duration
	timeout      time.Duration
	profile      string     // directory for ahpctl's CPU profiles, "" none
	attachEnv    []string   // added to ahpctl attach's environment
	limits       []string   // ahpctl limits set KEY=VALUE… on the daemon at start
	variants     [][]string // attach's extra arguments, one set per attach in a round
	keep         bool
}

func main() {
	var c config
	flag.StringVar(&c.ahpd, "ahpd", "bin/ahpd", "the ahpd binary")
	flag.StringVar(&c.ahpctl, "ahpctl", "bin/ahpctl", "the ahpctl binary")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds (each: raw PTY read, cat in a tmux pane, cat through ahpctl attach in a tmux pane)")
	flag.IntVar(&c.sizeMiB, "size", 64, "size of the file in MiB")
	flag.IntVar(&c.cols, "cols", 120, "tmux pane width")
	flag.IntVar(&c.rows, "rows", 40, "tmux pane height")
	flag.DurationVar(&c.poll, "poll", 5*time.Millisecond, "how often the pane's screen is captured")
	flag.DurationVar(&c.timeout, "timeout", 3*time.Minute, "bound of each wait for the marker")
	flag.StringVar(&c.profile, "cpuprofile", "", "`directory` for a CPU profile of ahpctl attach per round (AHPCTL_CPUPROFILE)")
	env := flag.String("attach-env", "", "comma-separated KEY=VALUE entries added to ahpctl attach's environment")
	lim := flag.String("limits", "", "comma-separated KEY=VALUE entries set on the daemon at start with `ahpctl limits set` (e.g. clientReceiveDefaults.windowBytes=16MiB: the window attach gets when it asks for the host's defaults)")
	variants := flag.String("variants", "", "attaches per round, ';'-separated, each the extra arguments of one (space-separated), e.g. ';--window 1MiB': one with attach's defaults, one with a 1 MiB window; a first field bin=PATH runs another ahpctl binary")
	flag.BoolVar(&c.keep, "keep", false, "keep the temporary directory (logs, file)")
	rawFile := flag.String(termbench.RawReadFlag, "", "read `file` raw from a PTY and print the bytes, time and CPU as JSON (attachbench starts it itself)")
	flag.Parse()
	if *rawFile != "" {
		termbench.RawReadMain("attachbench", *rawFile)
	}
	if *env != "" {
		c.attachEnv = strings.Split(*env, ",")
	}
	if *lim != "" {
		c.limits = strings.Split(*lim, ",")
	}
	for _, v := range strings.Split(*variants, ";") {
		c.variants = append(c.variants, strings.Fields(v))
	}
	if c.rounds < 1 || c.rounds > 100 || c.sizeMiB < 1 || c.sizeMiB > 4096 {
		fmt.Fprintln(os.Stderr, "attachbench: -rounds 1..100, -size 1..4096")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, c)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "attachbench:", err)
		os.Exit(1)
	}
}

// bench is one run's processes, owned by run: close, which run defers,
// ends them all.
type bench struct {
	c    config
	dir  string
	file string
	d    *benchproc.Daemon
	t    *tmuxServer
}

func (b *bench) close() {
	if b.t != nil {
		b.t.kill()
	}
	if b.d != nil {
		b.d.Stop()
	}
	if !b.c.keep {
		os.RemoveAll(b.dir)
	} else {
		fmt.Fprintln(os.Stderr, "attachbench: kept", b.dir)
	}
}

// result is one attach in one round, with the round's baselines.
type result struct {
	variant       int
	rawPTY        time.Duration // raw PTY read of the file, no tmux
	tmux          time.Duration // cat in a tmux pane: until the marker is on screen
	tmuxCPU       time.Duration // the tmux server's CPU over it
	attach        time.Duration // cat through ahpctl attach in a tmux pane
	snapshots     int64         // sent to attach's subscription during the cat
	dropped       int64         // output bytes dropped for it
	consumed      int64         // message bytes (UTF-16) it consumed: what reached the pane
	window        int64         // its window (UTF-16 bytes)
	ahpdCPU       time.Duration
	ahpctlCPU     time.Duration
	attachTmuxCPU time.Duration
}

// run runs the benchmark until it is done or ctx ends (a signal), and
// returns after it has ended every process it started.
func run(ctx context.Context, c config) error {
	for _, p := range []string{c.ahpd, c.ahpctl} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%v (build with: go build -o bin/ ./cmd/...)", err)
		}
	}
	var err error
	if c.ahpd, err = filepath.Abs(c.ahpd); err != nil {
		return err
	}
	if c.ahpctl, err = filepath.Abs(c.ahpctl); err != nil {
		return err
	}
	if c.profile != "" {
		if c.profile, err = filepath.Abs(c.profile); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "attachbench")
	if err != nil {
		return err
	}
	b := &bench{c: c, dir: dir, file: filepath.Join(dir, "data.txt")}
	defer b.close()

	if b.d, err = startDaemon(c.ahpd, dir); err != nil {
		return err
	}
	if len(c.limits) > 0 {
		if _, err := b.ctl(ctx, append([]string{"limits", "set"}, c.limits...)...); err != nil {
			return err
		}
	}
	if b.t, err = startTmux(dir, c.cols, c.rows); err != nil {
		return err
	}

	fmt.Printf("attachbench: %s, %d MiB file, %d rounds, panes %dx%d, poll %v; load %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), c.sizeMiB, c.rounds, c.cols, c.rows, c.poll, loadavg())
	if len(c.limits) > 0 || len(c.attachEnv) > 0 {
		fmt.Printf("daemon limits: %s; attach environment: %s\n", strings.Join(c.limits, " "), strings.Join(c.attachEnv, " "))
	}
	var rs []result
	for i := range c.rounds {
		round, err := b.round(ctx, i)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		for _, r := range round {
			fmt.Fprintf(os.Stderr, "round %d, attach %q: raw PTY %v, tmux %v, attach %v, %d snapshots\n", i+1, c.variants[r.variant], r.rawPTY.Round(time.Millisecond), r.tmux.Round(time.Millisecond), r.attach.Round(time.Millisecond), r.snapshots)
		}
		rs = append(rs, round...)
	}
	report(c, rs)
	fmt.Printf("load at the end: %s\n", loadavg())
	return nil
}

// startDaemon starts ahpd on a free loopback port with no config file and
// no default terminal, its state and control socket in dir/ahpd, its
// warnings on stderr.
func startDaemon(bin, dir string) (*benchproc.Daemon, error) {
	l := filepath.Join(dir, "ahpd")
	if err := os.Mkdir(l, 0o700); err != nil {
		return nil, err
	}
	return benchproc.StartDaemon(bin, l, []string{"--config", "none", "--no-default-terminal", "--log-level", "warn"}, nil)
}

// round runs the raw PTY read, then the raw tmux pane and each variant of
// attach, the latter in an order that turns round by round.
func (b *bench) round(ctx context.Context, i int) ([]result, error) {
	var r result
	marker, err := writeFile(b.file, b.c.sizeMiB<<20, i)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeoutCause(ctx, b.c.timeout, fmt.Errorf("no end after %v", b.c.timeout))
	raw, err := termbench.RawReadProcess(rctx, b.file)
	cancel()
	if err != nil {
		return nil, err
	}
	if raw.Bytes < int64(b.c.sizeMiB)<<20 {
		return nil, fmt.Errorf("raw PTY read: %d bytes", raw.Bytes)
	}
	r.rawPTY = raw.Elapsed
	rs := make([]result, len(b.c.variants))
	steps := []func() error{func() error { return b.rawTmux(ctx, &r, marker) }}
	for v := range b.c.variants {
		steps = append(steps, func() error { rs[v].variant = v; return b.attach(ctx, &rs[v], i, v, marker) })
	}
	k := i % len(steps)
	steps = append(steps[k:], steps[:k]...)
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, err
		}
	}
	for v := range rs {
		rs[v].rawPTY, rs[v].tmux, rs[v].tmuxCPU = r.rawPTY, r.tmux, r.tmuxCPU
	}
	return rs, nil
}

// writeFile writes size bytes of 110-byte text lines to path, then a last
// line with a marker unique to this run and round, and returns the marker.
func writeFile(path string, size, round int) (string, error) {
	var id [6]byte
	_, _ = rand.Read(id[:])
	marker := fmt.Sprintf("ATTACHBENCH-LAST-LINE-%d-%s", round+1, hex.EncodeToString(id[:]))
	const text = "the quick brown fox jumps over the lazy dog 0123456789 THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG abcdefghij"
	buf := make([]byte, 0, size+len(marker)+1)
	for k := 0; len(buf)+110 <= size; k++ {
		buf = fmt.Appendf(buf, "%08d ", k)
		buf = append(buf, text[:100]...)
		buf = append(buf, '\n')
	}
	buf = append(buf, marker...)
	buf = append(buf, '\n')
	return marker, os.WriteFile(path, buf, 0o600)
}

// shellEnv is the environment of both shells: a plain sh with the prompt
// "$ ".
var shellEnv = []string{"PS1=$ ", "ENV=", "TERM=tmux-256color"}

// rawTmux types the cat into /bin/sh in a tmux pane and times it until the
// marker is on the pane's screen.
func (b *bench) rawTmux(ctx context.Context, r *result, marker string) error {
	pane, _, err := b.t.newWindow(shellEnv, "/bin/sh")
	if err != nil {
		return err
	}
	defer b.t.killWindow(pane)
	if err := b.waitPrompt(ctx, pane); err != nil {
		return fmt.Errorf("raw tmux pane: %w", err)
	}
	cpu0 := b.t.cpu()
	d, err := b.timeCat(ctx, pane, marker)
	if err != nil {
		return fmt.Errorf("raw tmux pane: %w", err)
	}
	r.tmux = d
	r.tmuxCPU = b.t.cpu() - cpu0
	return nil
}

// timeCat types the cat of the file into pane and returns the time until
// marker is on the pane's screen.
func (b *bench) timeCat(ctx context.Context, pane, marker string) (time.Duration, error) {
	start := time.Now()
	if err := b.t.typeLine(pane, "cat "+b.file); err != nil {
		return 0, err
	}
	if err := b.waitFor(ctx, pane, marker, start); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// attach creates a terminal running /bin/sh in ahpd, attaches to it with
// ahpctl in a tmux pane, types the cat and times it until the marker is
// on the pane's screen.
func (b *bench) attach(ctx context.Context, r *result, i, variant int, marker string) error {
	id := fmt.Sprintf("r%d-%d", i+1, variant+1)
	args := []string{"terminal", "create", "--id", id, "--rows", strconv.Itoa(b.c.rows), "--cols", strconv.Itoa(b.c.cols), "--clear-env"}
	for _, e := range append(shellEnv, "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME")) {
		args = append(args, "--env", e)
	}
	if _, err := b.ctl(ctx, append(args, "--", "/bin/sh")...); err != nil {
		return err
	}
	// Closed even when ctx has ended (a signal): the daemon is stopped
	// anyway, but not before the round's cleanup.
	defer func() { _, _ = b.ctl(context.WithoutCancel(ctx), "channels", "close", "ahp-terminal:/"+id) }()
	env := slices.Clone(b.c.attachEnv)
	if b.c.profile != "" {
		env = append(env, "AHPCTL_CPUPROFILE="+filepath.Join(b.c.profile, fmt.Sprintf("ahpctl-round%d-%d.pprof", i+1, variant+1)))
	}
	ahpctl, args := b.c.ahpctl, b.c.variants[variant]
	if len(args) > 0 && strings.HasPrefix(args[0], "bin=") {
		ahpctl, args = strings.TrimPrefix(args[0], "bin="), args[1:]
	}
	argv := append([]string{ahpctl, "--control", b.d.Sock, "attach", "--quiet"}, args...)
	pane, pid, err := b.t.newWindow(env, append(argv, id)...)
	if err != nil {
		return err
	}
	defer b.t.killWindow(pane)
	if err := b.waitPrompt(ctx, pane); err != nil {
		return fmt.Errorf("attach pane: %w", err)
	}
	s0, err := b.viewer(ctx, id)
	if err != nil {
		return err
	}
	cpuD, cpuC, cpuT := b.d.CPU(), cpuOf(pid), b.t.cpu()
	if r.attach, err = b.timeCat(ctx, pane, marker); err != nil {
		return fmt.Errorf("attach pane: %w", err)
	}
	r.ahpdCPU, r.ahpctlCPU, r.attachTmuxCPU = b.d.CPU()-cpuD, cpuOf(pid)-cpuC, b.t.cpu()-cpuT
	s1, err := b.viewer(ctx, id)
	if err != nil {
		return err
	}
	r.snapshots, r.dropped, r.window = s1.Snapshots-s0.Snapshots, s1.DroppedBytes-s0.DroppedBytes, s1.WindowBytes
	r.consumed = s1.Consumed - s0.Consumed
	// Detach (Ctrl-] d), so that attach ends on its own and writes its
	// profile; bounded, then the window is killed.
	if _, err := b.t.cmd("send-keys -t " + pane + " C-] d"); err != nil {
		return err
	}
	if !waitGone(ctx, pid, 5*time.Second) {
		return errors.Join(fmt.Errorf("attach (pid %d) did not exit within 5 s of Ctrl-] d", pid), context.Cause(ctx))
	}
	return nil
}

// subscription is the daemon's account of attach's subscription
// (`ahpctl -o json viewers list`).
type subscription struct {
	Channel      string `json:"channel"`
	WindowBytes  int64  `json:"windowBytes"`
	DroppedBytes int64  `json:"droppedBytes"`
	Consumed     int64  `json:"consumedBytes"`
	Snapshots    int64  `json:"snapshots"`
}

// viewer returns the one subscription to ahp-terminal:/id.
func (b *bench) viewer(ctx context.Context, id string) (subscription, error) {
	out, err := b.ctl(ctx, "-o", "json", "viewers", "list")
	if err != nil {
		return subscription{}, err
	}
	var vs []struct {
		Subscriptions []subscription `json:"subscriptions"`
	}
	if err := json.Unmarshal(out, &vs); err != nil {
		return subscription{}, fmt.Errorf("viewers list: %w", err)
	}
	var found []subscription
	for _, v := range vs {
		for _, s := range v.Subscriptions {
			if s.Channel == "ahp-terminal:/"+id {
				found = append(found, s)
			}
		}
	}
	if len(found) != 1 {
		return subscription{}, fmt.Errorf("viewers list: %d subscriptions to %s, want 1", len(found), id)
	}
	return found[0], nil
}

// ctl runs bin/ahpctl against the daemon's control socket, killed (and
// waited for) if it has not ended within 30 s or when ctx ends.
func (b *bench) ctl(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, 30*time.Second, errors.New("no end in 30 s"))
	defer cancel()
	cmd := exec.CommandContext(ctx, b.c.ahpctl, append([]string{"--control", b.d.Sock}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return nil, fmt.Errorf("ahpctl %s: %w: %s", strings.Join(args, " "), err, errb.Bytes())
	}
	return out.Bytes(), nil
}

// waitPrompt waits (10 s at most) until pane's screen ends with the
// shell's prompt: the shell is up (through attach: attached, and the
// snapshot drawn). dash prompts "# " for root whatever PS1 says.
func (b *bench) waitPrompt(ctx context.Context, pane string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		lines, err := b.t.capture(pane)
		if err != nil {
			return err
		}
		for k := len(lines) - 1; k >= 0; k-- {
			if l := strings.TrimSpace(lines[k]); l != "" {
				if l == "$" || l == "#" {
					return nil
				}
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no prompt within 10 s; screen:\n%s", strings.Join(lines, "\n"))
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitFor polls pane's screen every c.poll until a line holds marker,
// c.timeout at most after start.
func (b *bench) waitFor(ctx context.Context, pane, marker string, start time.Time) error {
	for {
		lines, err := b.t.capture(pane)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if strings.Contains(l, marker) {
				return nil
			}
		}
		if time.Since(start) > b.c.timeout {
			return fmt.Errorf("the last line not on screen after %v; screen:\n%s", b.c.timeout, strings.Join(lines, "\n"))
		}
		if err := sleep(ctx, b.c.poll); err != nil {
			return err
		}
	}
}

// report prints the table: each round, then the medians.
func report(c config, rs []result) {
	fmt.Println()
	fmt.Println("| round | raw PTY read | cat in tmux | via attach | attach/tmux | attach/raw PTY | snapshots | dropped (UTF-16) | consumed (UTF-16) | window (UTF-16) | CPU ahpd | CPU ahpctl | CPU tmux (attach) | CPU tmux (cat in tmux) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	row := func(name string, r result) {
		fmt.Printf("| %s | %s | %s | %s | %.2f× | %.1f× | %d | %.1f MiB | %.1f MiB | %s | %s | %s | %s | %s |\n", name,
			secs(r.rawPTY), secs(r.tmux), secs(r.attach),
			float64(r.attach)/float64(r.tmux), float64(r.attach)/float64(r.rawPTY),
			r.snapshots, float64(r.dropped)/(1<<20), float64(r.consumed)/(1<<20), units.FormatSize(r.window),
			secs(r.ahpdCPU), secs(r.ahpctlCPU), secs(r.attachTmuxCPU), secs(r.tmuxCPU))
	}
	var targets []string
	for v, args := range c.variants {
		name := "ahpctl attach " + strings.Join(append(slices.Clone(args), "ID"), " ")
		fmt.Printf("| **%s** | | | | | | | | | | | | | |\n", name)
		var vs []result
		for _, r := range rs {
			if r.variant == v {
				vs = append(vs, r)
				row(strconv.Itoa(len(vs)), r)
			}
		}
		m := median(vs)
		if len(vs) > 1 {
			row("median", m)
		}
		targets = append(targets, fmt.Sprintf("%s: last line within 1.5× the raw time (%s ≤ 1.5 × %s: %v) with at most 2 snapshots per 64 MiB (%.1f per 64 MiB: %v)",
			name, secs(m.attach), secs(m.tmux), float64(m.attach) <= 1.5*float64(m.tmux),
			float64(m.snapshots)*64/float64(c.sizeMiB), float64(m.snapshots)*64/float64(c.sizeMiB) <= 2))
	}
	fmt.Println()
	for _, t := range targets {
		fmt.Println("target, " + t)
	}
}

// median is the field-wise median of rs.
func median(rs []result) result {
	med := func(f func(result) int64) int64 {
		v := make([]int64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 0 {
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		return v[len(v)/2]
	}
	d := func(f func(result) time.Duration) time.Duration {
		return time.Duration(med(func(r result) int64 { return int64(f(r)) }))
	}
	return result{
		rawPTY:        d(func(r result) time.Duration { return r.rawPTY }),
		tmux:          d(func(r result) time.Duration { return r.tmux }),
		tmuxCPU:       d(func(r result) time.Duration { return r.tmuxCPU }),
		attach:        d(func(r result) time.Duration { return r.attach }),
		snapshots:     med(func(r result) int64 { return r.snapshots }),
		dropped:       med(func(r result) int64 { return r.dropped }),
		consumed:      med(func(r result) int64 { return r.consumed }),
		window:        med(func(r result) int64 { return r.window }),
		ahpdCPU:       d(func(r result) time.Duration { return r.ahpdCPU }),
		ahpctlCPU:     d(func(r result) time.Duration { return r.ahpctlCPU }),
		attachTmuxCPU: d(func(r result) time.Duration { return r.attachTmuxCPU }),
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// cpuOf is a process's CPU time so far, 0 if it is gone.
func cpuOf(pid int) time.Duration {
	c, err := benchproc.CPU(pid)
	if err != nil {
		return 0
	}
	return c
}

// waitGone waits until pid, a process that is not this one's child (a
// tmux pane's, the tmux server), is gone or a zombie, polling, d at most
// or until ctx ends; it reports whether it is gone.
func waitGone(ctx context.Context, pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); benchproc.Alive(pid); {
		if time.Now().After(deadline) || sleep(ctx, 20*time.Millisecond) != nil {
			return !benchproc.Alive(pid)
		}
	}
	return true
}

// sleep waits d, or until ctx ends: then it returns ctx's cause.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
