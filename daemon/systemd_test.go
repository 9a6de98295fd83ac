package daemon_test

// Black-box tests of ahpd as systemd runs it: the real binary, built into
// t.TempDir(), with a fake NOTIFY_SOCKET, pre-opened listeners passed the
// way socket activation passes them, SIGHUP and SIGTERM; and the unit files
// checked by systemd-analyze verify after install.sh installed them.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ahp-dev/ahpd/ctl/client"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestSystemd builds ahpd and ahpctl once (with -race when the tests run
// with it) and runs each scenario against the binaries.
func TestSystemd(t *testing.T) {
	bin := buildBins(t, raceEnabled)
	t.Run("NotifyReadyWatchdogStopping", func(t *testing.T) { testNotifyReadyWatchdogStopping(t, bin) })
	t.Run("SocketActivation", func(t *testing.T) { testSocketActivation(t, bin) })
	t.Run("SocketActivationRefusesUnsafe", func(t *testing.T) { testSocketActivationRefusesUnsafe(t, bin) })
	t.Run("ReloadOnSIGHUP", func(t *testing.T) { testReloadOnSIGHUP(t, bin) })
	t.Run("CheckConfig", func(t *testing.T) { testCheckConfig(t, bin) })
	t.Run("UnitsVerifyAfterInstall", func(t *testing.T) { testUnitsVerifyAfterInstall(t, bin) })
	t.Run("ProcsFollowProducers", func(t *testing.T) { testProcsFollowProducers(t, bin) })
	t.Run("DaemonTelemetryFlag", func(t *testing.T) { testDaemonTelemetryFlag(t, bin) })
}

// notifySocket is a fake NOTIFY_SOCKET: it collects the datagrams.
type notifySocket struct {
	path string
	msgs chan string
}

func newNotifySocket(t *testing.T, dir string) *notifySocket {
	t.Helper()
	path := filepath.Join(dir, "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n := &notifySocket{path: path, msgs: make(chan string, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			select {
			case n.msgs <- string(buf[:k]):
			default: // a test that stopped reading; the channel bounds memory
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return n
}

// await returns the first message containing want (a line such as
// "READY=1"), failing the test after timeout; it also returns the
// messages skipped on the way.
func (n *notifySocket) await(t *testing.T, want string, timeout time.Duration) (string, []string) {
	t.Helper()
	var skipped []string
	deadline := time.After(timeout)
	for {
		select {
		case m := <-n.msgs:
			for _, line := range strings.Split(m, "\n") {
				if line == want {
					return m, skipped
				}
			}
			skipped = append(skipped, m)
		case <-deadline:
			t.Fatalf("no %s from ahpd within %v (got %q)", want, timeout, skipped)
			return "", nil
		}
	}
}

// daemonProc is a running ahpd.
type daemonProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// baseEnv is a small environment for ahpd: no NOTIFY_SOCKET or LISTEN_*
// of the test's own, HOME and XDG dirs in dir.
func baseEnv(dir string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_RUNTIME_DIR=" + filepath.Join(dir, "run"),
		"SHELL=/bin/sh",
		"TERM=dumb",
		// A race-built ahpd need not wait 1 s at exit for reports; a race
		// still exits 66, which the tests' exit-status checks catch.
		"GORACE=atexit_sleep_ms=0",
	}
}

// startDaemon starts cmd and registers a cleanup that kills it if the test
// did not stop it.
func startDaemon(t *testing.T, cmd *exec.Cmd) *daemonProc {
	t.Helper()
	p := &daemonProc{cmd: cmd, done: make(chan struct{})}
	if cmd.Stderr == nil {
		p.stderr = &syncBuffer{}
		cmd.Stderr = p.stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() && p.stderr != nil {
			t.Logf("ahpd stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// stop sends sig and waits for the exit status.
func (p *daemonProc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("ahpd did not exit within 20s")
	}
	return p.cmd.ProcessState.ExitCode()
}

var statusURL = regexp.MustCompile(`STATUS=serving (http://[^;]+); control socket (\S+)`)

// readyAddrs parses the HTTP base URL and control socket from READY's
// STATUS.
func readyAddrs(t *testing.T, msg string) (base, control string) {
	t.Helper()
	m := statusURL.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("READY without the expected STATUS: %q", msg)
	}
	return m[1], m[2]
}

func healthz(t *testing.T, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
	res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(b) != "ok\n" {
		t.Fatalf("GET /healthz = %s %q", res.Status, b)
	}
}

func grpcConn(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health on %s = %v, %v", path, res, err)
	}
	return cc
}

// testNotifyReadyWatchdogStopping: READY=1 comes once both listeners
// accept connections, WATCHDOG=1 follows at half WATCHDOG_USEC, SIGTERM
// gives STOPPING=1 and exit status 0. stderr is "the journal" here
// ($JOURNAL_STREAM names it), so lines carry priorities and no time.
func testNotifyReadyWatchdogStopping(t *testing.T, bin string) {
	dir := t.TempDir()
	ns := newNotifySocket(t, dir)
	logPath := filepath.Join(dir, "stderr.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(logf.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "ahpd"), "--config", "none", "--listen", "127.0.0.1:0",
		"--state-dir", filepath.Join(dir, "state"), "--control", filepath.Join(dir, "c.sock"))
	cmd.Env = append(baseEnv(dir), "NOTIFY_SOCKET="+ns.path, "WATCHDOG_USEC=400000",
		fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino), "INVOCATION_ID=0123456789abcdef")
	cmd.Stderr = logf
	p := startDaemon(t, cmd)

	msg, before := ns.await(t, "READY=1", 30*time.Second)
	for _, m := range before {
		if strings.Contains(m, "WATCHDOG=1") {
			t.Errorf("WATCHDOG=1 before READY=1: %q", m)
		}
	}
	// At READY both listeners take connections.
	base, control := readyAddrs(t, msg)
	healthz(t, base)
	grpcConn(t, control)

	ns.await(t, "WATCHDOG=1", 10*time.Second)
	ns.await(t, "WATCHDOG=1", 10*time.Second)

	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status after SIGTERM = %d, want 0", code)
	}
	ns.await(t, "STOPPING=1", 15*time.Second)

	b, _ := os.ReadFile(logPath)
	log := string(b)
	for _, want := range []string{"<6>listening addr=127.0.0.1:", "<6>watchdog enabled interval=400ms", "<6>default terminal started; print a browser link with: ", "open ahp-terminal:/shell", "<6>stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("journal log lacks %q:\n%s", want, log)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if !regexp.MustCompile(`^<[3467]>`).MatchString(line) || strings.Contains(line, "time=") {
			t.Errorf("not a journal line (priority prefix, no time): %q", line)
		}
	}
	if strings.Contains(log, "ticket=") {
		t.Errorf("the journal got a ticket:\n%s", log)
	}
}

// testSocketActivation passes a TCP and a unix listener the way systemd
// does (fds 3 and 4, LISTEN_PID = the daemon's pid, LISTEN_FDNAMES) and
// talks to ahpd through them: /healthz, a WebSocket initialize with the
// admin token from the state dir, gRPC health on the control socket. The
// shells ahpd starts inherit neither the variables nor the descriptors, and
// the socket file, systemd's, survives the daemon.
func testSocketActivation(t *testing.T, bin string) {
	for _, tc := range []struct {
		name     string
		names    string // LISTEN_FDNAMES
		unixLast bool   // fd order: http, control
	}{
		{"named", "http:control", true},
		{"unnamed-by-type", "ahpd.socket:ahpd.socket", false},
		{"no-names", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ns := newNotifySocket(t, dir)
			tl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer tl.Close()
			sockPath := filepath.Join(dir, "ctl.sock")
			ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: sockPath, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ul.SetUnlinkOnClose(false)
			defer ul.Close()
			if err := os.Chmod(sockPath, 0o660); err != nil {
				t.Fatal(err)
			}
			tf, err := tl.File()
			if err != nil {
				t.Fatal(err)
			}
			defer tf.Close()
			uf, err := ul.File()
			if err != nil {
				t.Fatal(err)
			}
			defer uf.Close()
			files := []*os.File{tf, uf}
			if !tc.unixLast {
				files = []*os.File{uf, tf}
			}
			envFile := filepath.Join(dir, "shell-env")
			fdsFile := filepath.Join(dir, "shell-fds")
			// LISTEN_PID must be the daemon's pid: the shell sets it to its
			// own and execs ahpd, which keeps the pid (and fds 3 and 4).
			args := []string{"-c", `LISTEN_PID=$$ exec "$0" "$@"`, filepath.Join(bin, "ahpd"),
				"--config", "none", "--state-dir", filepath.Join(dir, "state"),
				"--listen", "127.0.0.1:1", "--control", filepath.Join(dir, "ignored.sock")}
			cmd := exec.Command("/bin/sh", args...)
			cmd.Env = append(baseEnv(dir), "LISTEN_FDS=2", "NOTIFY_SOCKET="+ns.path,
				"SHELL=/bin/sh")
			if tc.names != "" {
				cmd.Env = append(cmd.Env, "LISTEN_FDNAMES="+tc.names)
			}
			cmd.ExtraFiles = files
			p := startDaemon(t, cmd)

			msg, _ := ns.await(t, "READY=1", 30*time.Second)
			base, control := readyAddrs(t, msg)
			if want := "http://" + tl.Addr().String(); base != want {
				t.Fatalf("serving %s, want the passed listener %s", base, want)
			}
			if control != sockPath {
				t.Fatalf("control socket %s, want the passed %s", control, sockPath)
			}
			healthz(t, base)
			cc := grpcConn(t, sockPath)
			info, err := ahpv1.NewDaemonServiceClient(cc).GetInfo(ctxT(t), &ahpv1.GetInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if info.ListenAddress != tl.Addr().String() || info.ControlSocket != sockPath {
				t.Fatalf("GetInfo: listen %s control %s", info.ListenAddress, info.ControlSocket)
			}

			token, err := os.ReadFile(filepath.Join(dir, "state", "admin.token"))
			if err != nil {
				t.Fatal(err)
			}
			c, res, err := client.Dial(ctxT(t), strings.Replace(base, "http://", "ws://", 1)+"/v1/ws",
				client.Options{Token: strings.TrimSpace(string(token))})
			if err != nil {
				t.Fatalf("WebSocket initialize through the passed listener: %v", err)
			}
			defer c.Close()
			if res.Access.Role != "control" {
				t.Fatalf("initialize: role %q, want control", res.Access.Role)
			}

			// A terminal's process must not inherit the activation.
			_, err = ahpv1.NewTerminalServiceClient(cc).CreateTerminal(ctxT(t), &ahpv1.CreateTerminalRequest{
				Id: "probe", Command: "/bin/sh",
				Args: []string{"-c", fmt.Sprintf("env > %s.tmp; ls -l /proc/self/fd/ > %s; mv %s.tmp %s", envFile, fdsFile, envFile, envFile)},
			})
			if err != nil {
				t.Fatal(err)
			}
			env := waitFile(t, envFile)
			for _, v := range []string{"LISTEN_PID=", "LISTEN_FDS=", "LISTEN_FDNAMES=", "NOTIFY_SOCKET=", "WATCHDOG_"} {
				if strings.Contains(env, "\n"+v) || strings.HasPrefix(env, v) {
					t.Errorf("a terminal inherited %s…:\n%s", v, env)
				}
			}
			fds, _ := os.ReadFile(fdsFile)
			if strings.Contains(string(fds), "socket:") {
				t.Errorf("a terminal inherited a socket:\n%s", fds)
			}

			if tc.name == "named" {
				// An upgrade in place keeps the passed listeners, says
				// RELOADING=1 then READY=1 from the new binary (same
				// PID), and the socket file stays systemd's.
				if err := p.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
					t.Fatal(err)
				}
				ns.await(t, "RELOADING=1", 30*time.Second)
				msg, _ := ns.await(t, "READY=1", 30*time.Second)
				if b, c := readyAddrs(t, msg); b != base || c != sockPath {
					t.Fatalf("after the upgrade: serving %s, control %s", b, c)
				}
				healthz(t, base)
				info, err := ahpv1.NewDaemonServiceClient(grpcConn(t, sockPath)).GetInfo(ctxT(t), &ahpv1.GetInfoRequest{})
				if err != nil || info.Upgrades != 1 || info.ControlSocket != sockPath {
					t.Fatalf("GetInfo after the upgrade: %v, %v", info, err)
				}
			}

			if code := p.stop(t, syscall.SIGTERM); code != 0 {
				t.Fatalf("exit status %d, want 0", code)
			}
			if _, err := os.Lstat(sockPath); err != nil {
				t.Fatalf("the passed control socket was removed: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "ignored.sock")); err == nil {
				t.Fatal("ahpd bound --control although the control socket was passed")
			}
		})
	}
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(20 * time.Millisecond) // polls a file another process writes
	}
}

// testSocketActivationRefusesUnsafe: a world-connectable control socket
// is refused (whoever connects has every right), and so is an HTTP fd that
// is not a listening TCP socket.
func testSocketActivationRefusesUnsafe(t *testing.T, bin string) {
	dir := t.TempDir()
	sockPath := filepath.Join(dir, "ctl.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: sockPath, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	if err := os.Chmod(sockPath, 0o666); err != nil {
		t.Fatal(err)
	}
	uf, err := ul.File()
	if err != nil {
		t.Fatal(err)
	}
	defer uf.Close()
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, filepath.Join(bin, "ahpd"),
		"--config", "none", "--state-dir", filepath.Join(dir, "state"), "--listen", "127.0.0.1:0", "--no-default-terminal")
	cmd.Env = append(baseEnv(dir), "LISTEN_FDS=1", "LISTEN_FDNAMES=control")
	cmd.ExtraFiles = []*os.File{uf}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = runBounded(t, cmd)
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "lets every user connect") {
		t.Fatalf("world-writable control socket: %v, stderr %q; want exit 1 naming the problem", err, stderr.String())
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	cmd = exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, filepath.Join(bin, "ahpd"),
		"--config", "none", "--state-dir", filepath.Join(dir, "state"), "--no-default-terminal")
	cmd.Env = append(baseEnv(dir), "LISTEN_FDS=1", "LISTEN_FDNAMES=http")
	cmd.ExtraFiles = []*os.File{pr}
	stderr.Reset()
	cmd.Stderr = &stderr
	_ = runBounded(t, cmd)
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "fd 3 (\"http\") is not a socket") {
		t.Fatalf("a pipe as fd 3: stderr %q; want exit 1 naming fd 3", stderr.String())
	}
}

func runBounded(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("ahpd did not exit within 30s")
		return nil
	}
}

// testReloadOnSIGHUP: SIGHUP applies the file's limits without dropping a
// WebSocket connection; a bad file is logged and changes nothing.
func testReloadOnSIGHUP(t *testing.T, bin string) {
	dir := t.TempDir()
	ns := newNotifySocket(t, dir)
	conf := filepath.Join(dir, "config.toml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("maxOutputStall = \"60s\"\nmaxSubscriptions = 1024\n")
	cmd := exec.Command(filepath.Join(bin, "ahpd"), "--config", conf, "--listen", "127.0.0.1:0",
		"--state-dir", filepath.Join(dir, "state"), "--control", filepath.Join(dir, "c.sock"), "--no-default-terminal")
	cmd.Env = append(baseEnv(dir), "NOTIFY_SOCKET="+ns.path)
	p := startDaemon(t, cmd)
	msg, _ := ns.await(t, "READY=1", 30*time.Second)
	base, control := readyAddrs(t, msg)
	limits := ahpv1.NewLimitsServiceClient(grpcConn(t, control))
	get := func() *ahpv1.Limits {
		t.Helper()
		res, err := limits.GetLimits(ctxT(t), &ahpv1.GetLimitsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Effective
	}
	if l := get(); l.MaxOutputStall.AsDuration() != time.Minute {
		t.Fatalf("maxOutputStall = %v, want 1m from the file", l.MaxOutputStall.AsDuration())
	}
	token, err := os.ReadFile(filepath.Join(dir, "state", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := client.Dial(ctxT(t), strings.Replace(base, "http://", "ws://", 1)+"/v1/ws", client.Options{Token: strings.TrimSpace(string(token))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	reload := func() {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		ns.await(t, "RELOADING=1", 10*time.Second)
		ns.await(t, "READY=1", 10*time.Second)
	}
	// listen is also a flag, which wins: no change there. shutdownTimeout
	// changes but needs a restart.
	write("maxOutputStall = \"2s\"\nmaxSubscriptions = 3\nlisten = \"127.0.0.1:1\"\nshutdownTimeout = 5s\n")
	reload()
	l := get()
	if l.MaxOutputStall.AsDuration() != 2*time.Second || l.MaxSubscriptions != 3 {
		t.Fatalf("after SIGHUP: maxOutputStall %v maxSubscriptions %d, want 2s and 3", l.MaxOutputStall.AsDuration(), l.MaxSubscriptions)
	}
	var list struct {
		Channels []any `json:"channels"`
	}
	if err := c.Call(ctxT(t), "channels/list", struct{}{}, &list); err != nil {
		t.Fatalf("the WebSocket after SIGHUP: %v", err)
	}
	select {
	case <-c.Done():
		t.Fatalf("the WebSocket closed at reload: %v", c.Err())
	default:
	}
	if strings.Contains(p.stderr.String(), "reload: listen changed") {
		t.Errorf("listen is set by a flag, which wins over the file: no change to report")
	}
	if !strings.Contains(p.stderr.String(), "reload: shutdownTimeout changed; restart ahpd to apply it") {
		t.Errorf("no warning about shutdownTimeout needing a restart:\n%s", p.stderr.String())
	}

	write("maxOutputStall = \"2s\"\nmaxSubscriptions = lots\n")
	reload()
	if l := get(); l.MaxSubscriptions != 3 {
		t.Fatalf("a bad file changed maxSubscriptions to %d", l.MaxSubscriptions)
	}
	if !strings.Contains(p.stderr.String(), conf+":2: maxSubscriptions: want an integer") {
		t.Errorf("the bad reload was not logged with file and line:\n%s", p.stderr.String())
	}
	if err := c.Call(ctxT(t), "channels/list", struct{}{}, &list); err != nil {
		t.Fatalf("the WebSocket after a failed reload: %v", err)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
}

// testCheckConfig runs `ahpd --check-config` on good and bad files.
func testCheckConfig(t *testing.T, bin string) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		args       []string
		code       int
		want       string
	}{
		{"good", "listen = \"127.0.0.1:7000\"\nmaxOutputStall = 2s\n", nil, 0, "is valid"},
		{"example", "", []string{"--config", "../systemd/config.example.toml"}, 0, "config.example.toml is valid"},
		{"unknown key", "listen = \"127.0.0.1:7000\"\nmaxoutputstall = 2s\n", nil, 1, "config.toml:2: maxoutputstall: unknown key (did you mean maxOutputStall?)"},
		{"bad value", "\nmaxBufferedBytes = 10M\n", nil, 1, "config.toml:2: maxBufferedBytes: want an integer with an optional unit: KiB, MiB, GiB"},
		{"invalid limit", "maxOutputStall = 1ms\n", nil, 1, "config.toml:1: maxOutputStall: must be at least 100ms"},
		{"group conflict", "hostReceive.maximumFrameBytes = 512KiB\n", nil, 1, "config.toml:1: hostReceive.maximumFrameBytes: conflicts with the default of hostReceive.windowBytes"},
		{"flag wins", "listen = nohost\n", []string{"--listen", "127.0.0.1:7000"}, 0, "is valid"},
		{"bad flag", "", []string{"--websocket-compression", "gzip"}, 1, "ahpd: config: --websocket-compression: must be deflate or none"},
		{"missing file", "", []string{"--config", filepath.Join(dir, "nope.toml")}, 1, "nope.toml: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"--check-config", "--config", path}, tc.args...)
			cmd := exec.Command(filepath.Join(bin, "ahpd"), args...)
			cmd.Env = baseEnv(dir)
			var out bytes.Buffer
			cmd.Stderr = &out
			_ = runBounded(t, cmd)
			if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("ahpd %s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), code, out.String(), tc.code, tc.want)
			}
		})
	}
}

// testUnitsVerifyAfterInstall installs into a temporary prefix with
// install.sh and runs systemd-analyze verify on every unit; then checks the
// DESTDIR layout and that an existing config survives.
func testUnitsVerifyAfterInstall(t *testing.T, bin string) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is missing: CI must verify the units (.ci/run installs Debian's systemd package)")
		}
		t.Skip("systemd-analyze not found (apt-get install systemd): the unit files are not verified")
	}
	root := t.TempDir()
	prefix := filepath.Join(root, "usr")
	install := func(env ...string) string {
		t.Helper()
		cmd := exec.Command("../install.sh")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "BUILDDIR=" + bin}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh %v: %v\n%s", env, err, out)
		}
		return string(out)
	}
	install("PREFIX="+prefix, "SYSCONFDIR="+filepath.Join(root, "etc"))
	for _, f := range []string{"bin/ahpd", "bin/ahpctl", "lib/systemd/system/ahpd@.service", "lib/systemd/system/ahpd@.socket",
		"lib/systemd/user/ahpd.service", "lib/systemd/user/ahpd.socket", "share/ahpd/config.example.toml"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("install.sh did not install %s: %v", f, err)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(prefix, "lib/systemd/system/ahpd@.service"))
	if !strings.Contains(string(unit), "\nExecStart="+prefix+"/bin/ahpd\n") {
		t.Errorf("the installed unit does not run %s/bin/ahpd", prefix)
	}

	verify := func(user bool, units ...string) (string, error) {
		args := []string{"verify", "--man=no"}
		if user {
			args = append([]string{"--user"}, args...)
		}
		cmd := exec.Command(analyze, append(args, units...)...)
		run := filepath.Join(root, "xdg-run")
		os.MkdirAll(run, 0o700)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "XDG_RUNTIME_DIR=" + run, "HOME=" + root}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	sys := filepath.Join(prefix, "lib/systemd/system")
	usr := filepath.Join(prefix, "lib/systemd/user")
	for _, c := range []struct {
		user  bool
		units []string
	}{
		{false, []string{sys + "/ahpd@.service", sys + "/ahpd@.socket"}},
		{true, []string{usr + "/ahpd.service", usr + "/ahpd.socket"}},
	} {
		// systemd-analyze exits 0 on unknown keys and bad values: any
		// output is a failure.
		if out, err := verify(c.user, c.units...); err != nil || out != "" {
			if strings.Contains(out, "/bin/kill is not executable") {
				out += "\n(ExecReload= uses /bin/kill: apt-get install procps)"
			}
			t.Errorf("systemd-analyze verify %v: %v\n%s", c.units, err, out)
		}
	}
	// The check above can fail: a broken copy of the unit is reported.
	broken := filepath.Join(root, "broken@.service")
	os.WriteFile(broken, bytes.Replace(unit, []byte("Type=notify"), []byte("Type=notfy"), 1), 0o644)
	if out, _ := verify(false, broken); !strings.Contains(out, "notfy") {
		t.Errorf("systemd-analyze verify did not report a bad Type=: %q", out)
	}

	// DESTDIR: the same tree under a staging root; an existing config stays.
	dest := filepath.Join(root, "dest")
	conf := filepath.Join(dest, "etc/ahpd/config.toml")
	os.MkdirAll(filepath.Dir(conf), 0o755)
	os.WriteFile(conf, []byte("maxSubscriptions = 7\n"), 0o644)
	out := install("DESTDIR=" + dest)
	for _, f := range []string{"usr/local/bin/ahpd", "usr/local/lib/systemd/system/ahpd@.socket", "usr/local/lib/systemd/user/ahpd.service", "usr/local/share/ahpd/config.example.toml"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("DESTDIR install lacks %s", f)
		}
	}
	if b, _ := os.ReadFile(conf); string(b) != "maxSubscriptions = 7\n" || !strings.Contains(out, "kept "+conf) {
		t.Errorf("install.sh replaced an existing config (now %q); output:\n%s", b, out)
	}
	unit, _ = os.ReadFile(filepath.Join(dest, "usr/local/lib/systemd/system/ahpd@.service"))
	if !strings.Contains(string(unit), "\nExecStart=/usr/local/bin/ahpd\n") {
		t.Error("with DESTDIR the unit must name the final path, not the staging one")
	}
	sc := bufio.NewScanner(bytes.NewReader(unit))
	for sc.Scan() {
		if strings.Contains(sc.Text(), dest) {
			t.Errorf("the unit names the staging root: %q", sc.Text())
		}
	}
}
