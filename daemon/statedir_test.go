package daemon_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/config"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestStateDirTrust runs the real ahpd on state directories that another
// user could have tampered with: each is refused at start with a message
// naming the path and the fix, and a second ahpd on a state directory in
// use is refused while the first runs.
func TestStateDirTrust(t *testing.T) {
	bin := buildBins(t, raceEnabled)
	ahpd := filepath.Join(bin, "ahpd")
	// refused runs ahpd on state and wants exit 1 with each of wants in
	// stderr.
	refused := func(t *testing.T, dir, state string, wants ...string) {
		t.Helper()
		cmd := exec.Command(ahpd, "--config", "none", "--listen", "127.0.0.1:0", "--no-default-terminal",
			"--state-dir", state, "--control", filepath.Join(dir, "c.sock"))
		cmd.Env = baseEnv(dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_ = runBounded(t, cmd)
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
		}
		for _, w := range wants {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
			}
		}
	}
	// goodToken writes a valid admin token at path with mode perm.
	goodToken := func(t *testing.T, path string, perm os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte("ahp_plantedplantedplantedplanted\n"), perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, perm); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	mkState := func(t *testing.T, dir string, perm os.FileMode) string {
		t.Helper()
		state := filepath.Join(dir, "state")
		if err := os.Mkdir(state, perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(state, perm); err != nil {
			t.Fatal(err)
		}
		return state
	}

	t.Run("WorldWritableDir", func(t *testing.T) {
		dir := t.TempDir()
		state := mkState(t, dir, 0o777)
		refused(t, dir, state, "state dir "+state+": mode -rwxrwxrwx is writable by group or others", "fix: chmod 700 "+state)
		if _, err := os.Lstat(filepath.Join(state, "admin.token")); err == nil {
			t.Error("admin.token was created in the refused directory")
		}
	})
	t.Run("GroupWritableDir", func(t *testing.T) {
		dir := t.TempDir()
		state := mkState(t, dir, 0o770)
		refused(t, dir, state, "is writable by group or others", "fix: chmod 700 "+state)
	})
	t.Run("DirOwnedByAnotherUser", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("chown to another uid needs root")
		}
		// The attack of issue 12: another user's 0700 directory with a
		// token of their choosing.
		dir := t.TempDir()
		state := mkState(t, dir, 0o700)
		goodToken(t, filepath.Join(state, "admin.token"), 0o600)
		for _, p := range []string{filepath.Join(state, "admin.token"), state} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		refused(t, dir, state, fmt.Sprintf("state dir %s: owned by uid 65534, not by this user (uid %d)", state, os.Geteuid()), "chown -R")
	})
	t.Run("TokenOwnedByAnotherUser", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("chown to another uid needs root")
		}
		dir := t.TempDir()
		state := mkState(t, dir, 0o700)
		tok := filepath.Join(state, "admin.token")
		goodToken(t, tok, 0o600)
		if err := os.Chown(tok, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, state, "admin token "+tok+": owned by uid 65534", "fix: remove it")
	})
	t.Run("Token0644", func(t *testing.T) {
		dir := t.TempDir()
		state := mkState(t, dir, 0o700)
		tok := filepath.Join(state, "admin.token")
		goodToken(t, tok, 0o644)
		refused(t, dir, state, "admin token "+tok+": mode -rw-r--r-- is looser than 0600; fix: chmod 600 "+tok)
	})
	t.Run("TokenSymlink", func(t *testing.T) {
		dir := t.TempDir()
		state := mkState(t, dir, 0o700)
		real := filepath.Join(dir, "elsewhere")
		goodToken(t, real, 0o600)
		tok := filepath.Join(state, "admin.token")
		if err := os.Symlink(real, tok); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, state, "admin token "+tok+": is a symlink")
	})
	t.Run("DirSymlink", func(t *testing.T) {
		dir := t.TempDir()
		real := mkState(t, dir, 0o700)
		state := filepath.Join(dir, "link")
		if err := os.Symlink(real, state); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, state, "state dir "+state+": is a symlink (to "+real+")", "--state-dir")
	})
	t.Run("SecondDaemon", func(t *testing.T) {
		dir := t.TempDir()
		state := filepath.Join(dir, "state")
		ns := newNotifySocket(t, dir)
		cmd := exec.Command(ahpd, "--config", "none", "--listen", "127.0.0.1:0", "--no-default-terminal",
			"--state-dir", state, "--control", filepath.Join(dir, "first.sock"))
		cmd.Env = append(baseEnv(dir), "NOTIFY_SOCKET="+ns.path)
		first := startDaemon(t, cmd)
		msg, _ := ns.await(t, "READY=1", 30*time.Second)
		base, _ := readyAddrs(t, msg)
		healthz(t, base)
		// The normal case: the directory and token are created private.
		for p, want := range map[string]os.FileMode{state: 0o700, filepath.Join(state, "admin.token"): 0o600} {
			if fi, err := os.Lstat(p); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: %v, %v; want mode %v", p, fi.Mode(), err, want)
			}
		}
		// A separate control socket, so only the state dir is shared.
		second := filepath.Join(dir, "second")
		if err := os.Mkdir(second, 0o700); err != nil {
			t.Fatal(err)
		}
		refused(t, second, state, fmt.Sprintf("state dir %s: another ahpd (pid %d) holds it", state, first.cmd.Process.Pid))
		if code := first.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("first ahpd: exit %d after SIGTERM", code)
		}
		// The lock goes with the daemon: the directory is usable again.
		ns2 := newNotifySocket(t, second)
		cmd = exec.Command(ahpd, "--config", "none", "--listen", "127.0.0.1:0", "--no-default-terminal",
			"--state-dir", state, "--control", filepath.Join(second, "c.sock"))
		cmd.Env = append(baseEnv(second), "NOTIFY_SOCKET="+ns2.path)
		third := startDaemon(t, cmd)
		ns2.await(t, "READY=1", 30*time.Second)
		if code := third.stop(t, syscall.SIGTERM); code != 0 {
			t.Fatalf("ahpd after the first stopped: exit %d after SIGTERM", code)
		}
	})
}

// TestStartupLink: the default terminal's ticket link is printed when
// stderr is a terminal, and only logged as "ahpctl open" otherwise (a log
// file is read by others), unless --print-link asks for it.
func TestStartupLink(t *testing.T) {
	bin := buildBins(t, raceEnabled)
	start := func(t *testing.T, dir string, extra ...string) *exec.Cmd {
		args := append([]string{"--config", "none", "--listen", "127.0.0.1:0",
			"--state-dir", filepath.Join(dir, "state"), "--control", filepath.Join(dir, "c.sock")}, extra...)
		cmd := exec.Command(filepath.Join(bin, "ahpd"), args...)
		cmd.Env = baseEnv(dir)
		t.Cleanup(func() {
			if cmd.Process != nil && cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		return cmd
	}
	// awaitLines reads lines from r up to one containing until (the
	// "listening" log line, or the link, which follows it) or EOF and
	// returns all it read. The daemon is killed after 30s, so the read
	// ends.
	awaitLines := func(t *testing.T, r *bufio.Reader, until string) string {
		t.Helper()
		var all strings.Builder
		for {
			line, err := r.ReadString('\n')
			all.WriteString(line)
			if strings.Contains(line, until) || err != nil {
				return all.String()
			}
		}
	}
	stop := func(t *testing.T, cmd *exec.Cmd) {
		t.Helper()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("ahpd did not exit within 20s of SIGTERM")
		}
	}

	t.Run("Pipe", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			extra []string
			link  bool
		}{{"Default", nil, false}, {"PrintLink", []string{"--print-link"}, true}} {
			t.Run(tc.name, func(t *testing.T) {
				dir := t.TempDir()
				cmd := start(t, dir, tc.extra...)
				pr, err := cmd.StderrPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
				until := "msg=listening"
				if tc.link {
					until = "in your browser"
				}
				out := awaitLines(t, bufio.NewReader(pr), until)
				timer.Stop()
				if tc.link {
					checkLinkReachesAll(t, dir, out)
				}
				stop(t, cmd)
				if !strings.Contains(out, "msg=listening") {
					t.Fatalf("ahpd did not start:\n%s", out)
				}
				hasLink := strings.Contains(out, "Open http://127.0.0.1:") && strings.Contains(out, "#ticket=ahp_")
				if hasLink != tc.link {
					t.Errorf("link printed = %v, want %v:\n%s", hasLink, tc.link, out)
				}
				if !tc.link {
					if strings.Contains(out, "ticket=") {
						t.Errorf("a ticket in the log:\n%s", out)
					}
					// "ahpctl" when on PATH, else its path.
					if !regexp.MustCompile(`print a browser link with: \S*ahpctl open ahp-terminal:/shell`).MatchString(out) {
						t.Errorf("the log does not say how to get a link:\n%s", out)
					}
				}
			})
		}
	})
	t.Run("Terminal", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		cmd := start(t, t.TempDir())
		cmd.Stderr = tty
		if err := cmd.Start(); err != nil {
			tty.Close()
			t.Fatal(err)
		}
		tty.Close()
		timer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		out := awaitLines(t, bufio.NewReader(ptmx), "in your browser")
		timer.Stop()
		stop(t, cmd)
		if !strings.Contains(out, "Open http://127.0.0.1:") || !strings.Contains(out, "#ticket=ahp_") {
			t.Errorf("no link on the terminal:\n%s", out)
		}
	})
}

// checkLinkReachesAll: the startup link's ticket reaches every channel,
// not just the default terminal it opens: a terminal created after it
// is listed too.
func checkLinkReachesAll(t *testing.T, dir, out string) {
	t.Helper()
	m := regexp.MustCompile(`Open http://(\S+)/#ticket=(ahp_[A-Za-z0-9_-]+)&channel=ahp-terminal:/shell in your browser`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no link opening ahp-terminal:/shell:\n%s", out)
	}
	cc := grpcConn(t, filepath.Join(dir, "c.sock"))
	if _, err := ahpv1.NewTerminalServiceClient(cc).CreateTerminal(ctxT(t), &ahpv1.CreateTerminalRequest{Id: "later", Command: "/bin/sh"}); err != nil {
		t.Fatal(err)
	}
	c, _, err := client.Dial(ctxT(t), "ws://"+m[1]+"/v1/ws", client.Options{Token: m[2], Header: http.Header{"Origin": {"http://" + m[1]}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := listedChannels(t, c)
	if want := []string{"ahp-terminal:/later", "ahp-terminal:/shell"}; !slices.Equal(got, want) {
		t.Fatalf("the link's ticket lists %v, want %v", got, want)
	}
}

// TestNewRefusesUnsafeToken: daemon.New (ahpd in-process, as embedders
// use it) applies the same checks through LoadTokens.
func TestNewRefusesUnsafeToken(t *testing.T) {
	state := t.TempDir()
	tok := filepath.Join(state, "admin.token")
	if err := os.WriteFile(tok, []byte("ahp_plantedplantedplantedplanted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tok, 0o640); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := config.Config{Listen: "127.0.0.1:0", StateDir: state, NoDefaultTerminal: true}
	_, err := daemon.New(cfg, daemon.Options{Logger: log})
	if want := "chmod 600 " + tok; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New with a 0640 token: %v; want an error naming %q", err, want)
	}
	if err := os.Chmod(tok, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := daemon.New(cfg, daemon.Options{Logger: log})
	if err != nil {
		t.Fatalf("New with a 0600 token: %v", err)
	}
	if _, err := srv.Tokens().Authenticate("ahp_plantedplantedplantedplanted"); err != nil {
		t.Fatalf("the token from the file is not the admin token: %v", err)
	}
	if err := os.Chmod(state, 0o707); err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.New(cfg, daemon.Options{Logger: log}); err == nil || !strings.Contains(err.Error(), "chmod 700 "+state) {
		t.Fatalf("New on a world-writable state dir: %v; want an error naming chmod 700", err)
	}
}
