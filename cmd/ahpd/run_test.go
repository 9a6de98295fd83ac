package main

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/daemon/config"
)

func TestHealthURL(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7681}, "http://127.0.0.1:7681/healthz"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, "http://127.0.0.1:80/healthz"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 80}, "http://[::1]:80/healthz"},
		{&net.UnixAddr{Name: "/x", Net: "unix"}, ""},
	} {
		if got := healthURL(c.addr); got != c.want {
			t.Errorf("healthURL(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

func TestRestartOnlyChanges(t *testing.T) {
	a := config.DefaultSettings()
	b := a
	b.Limits.MaxSubscriptions = 3
	b.LogLevel = "debug"
	if got := config.RestartOnlyChanges(a, b); len(got) != 0 {
		t.Errorf("limits and logLevel reported as needing a restart: %v", got)
	}
	b.Listen = "127.0.0.1:1"
	b.AllowedOrigins = []string{"x:1"}
	if got := strings.Join(config.RestartOnlyChanges(a, b), ","); got != "listen,allowedOrigins" {
		t.Errorf("restartOnlyChanges = %s", got)
	}
}

// TestListenInUse: a listen address in use is named, with how to pick
// another, and ahpd exits 1.
func TestListenInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	var out strings.Builder
	code := Main([]string{"--config", "none", "--no-default-terminal", "--listen", l.Addr().String(),
		"--state-dir", filepath.Join(dir, "state"), "--control", filepath.Join(dir, "c.sock")}, &out)
	if code != 1 {
		t.Fatalf("exit status %d, want 1:\n%s", code, out.String())
	}
	if want := "listen: " + l.Addr().String() + " is in use"; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "--listen 127.0.0.1:0") {
		t.Fatalf("output lacks %q and the hint:\n%s", want, out.String())
	}
}

// TestHelpDoubleDash: ahpd --help writes its flags with two dashes, as the
// README and the usage text do (--check-config), and exits 0.
func TestHelpDoubleDash(t *testing.T) {
	var out strings.Builder
	if code := Main([]string{"--help"}, &out); code != 0 {
		t.Fatalf("ahpd --help: exit %d", code)
	}
	help := out.String()
	for _, want := range []string{"\n  --check-config\n", "\n  --config file\n", "\n  --listen address\n", `(default "127.0.0.1:7681")`} {
		if !strings.Contains(help, want) {
			t.Errorf("ahpd --help lacks %q:\n%s", want, help)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "  --") {
			t.Errorf("a flag with one dash: %q", line)
		}
	}
	// A bad flag: one line naming it as the help does, exit 2.
	out.Reset()
	if code := Main([]string{"--check-confg"}, &out); code != 2 || out.String() != "ahpd: flag provided but not defined: --check-confg (see ahpd --help)\n" {
		t.Fatalf("ahpd --check-confg: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := Main([]string{"--listen"}, &out); code != 2 || !strings.Contains(out.String(), "flag needs an argument: --listen") {
		t.Fatalf("ahpd --listen: exit %d, %q", code, out.String())
	}
}
