package main

import (
	"net"
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
