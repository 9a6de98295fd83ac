package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/internal/testcert"
)

func TestLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7681": true, "127.1.2.3:1": true, "[::1]:7681": true, "localhost:7681": true,
		"0.0.0.0:7681": false, "[::]:7681": false, ":7681": false, "10.0.0.5:7681": false, "example.com:7681": false, "bad": false,
	} {
		if got := loopbackOnly(addr); got != want {
			t.Errorf("loopbackOnly(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestNonLoopbackListenRefused: a listener beyond loopback without TLS is
// refused at start (exit 1), with a message naming both ways out (TLS
// here, or a proxy that terminates it) and --insecure-listen; nothing is
// bound and no state is written (issue 39).
func TestNonLoopbackListenRefused(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		dir := t.TempDir()
		var out strings.Builder
		code := Main([]string{"--config", "none", "--no-default-terminal", "--listen", listen,
			"--state-dir", filepath.Join(dir, "state"), "--control", filepath.Join(dir, "c.sock")}, &out)
		if code != 1 {
			t.Fatalf("--listen %s: exit status %d, want 1:\n%s", listen, code, out.String())
		}
		for _, want := range []string{"listen " + listen + ": refusing", "--tls-cert FILE --tls-key FILE", "a proxy that terminates TLS", "--insecure-listen"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("--listen %s: output lacks %q:\n%s", listen, want, out.String())
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "state", "admin.token")); err == nil {
			t.Errorf("--listen %s: the refusal wrote an admin token", listen)
		}
	}
}

// TestTLSFilesChecked: certificate files that do not load stop the
// daemon at start, naming them; one flag without the other is a usage
// error.
func TestTLSFilesChecked(t *testing.T) {
	dir := t.TempDir()
	cert, err := testcert.Write(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testcert.Write(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"--config", "none", "--no-default-terminal", "--listen", "127.0.0.1:0",
		"--state-dir", filepath.Join(dir, "state"), "--control", filepath.Join(dir, "c.sock")}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tls-cert", filepath.Join(dir, "none.crt"), "--tls-key", cert.KeyFile}, 1, "none.crt"},
		{[]string{"--tls-cert", cert.CertFile, "--tls-key", other.KeyFile}, 1, "private key does not match"},
		{[]string{"--tls-cert", cert.CertFile}, 2, "--tls-cert: needs tlsKey (--tls-key)"},
	} {
		var out strings.Builder
		if code := Main(append(append([]string{}, base...), c.args...), &out); code != c.code || !strings.Contains(out.String(), c.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, out.String())
		}
	}
}

// TestCheckConfigListener: --check-config reports what the start would
// refuse: a listener beyond loopback without TLS, TLS files that do not
// load.
func TestCheckConfigListener(t *testing.T) {
	dir := t.TempDir()
	cert, err := testcert.Write(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--listen", "0.0.0.0:7681"}, 1, "--insecure-listen"},
		{[]string{"--listen", "0.0.0.0:7681", "--insecure-listen"}, 0, "valid"},
		{[]string{"--listen", "0.0.0.0:7681", "--tls-cert", cert.CertFile, "--tls-key", cert.KeyFile}, 0, "valid"},
		{[]string{"--tls-cert", cert.CertFile, "--tls-key", cert.CertFile}, 1, "tlsCert"},
		{nil, 0, "valid"},
	} {
		var out strings.Builder
		code := Main(append([]string{"--check-config", "--config", "none"}, c.args...), &out)
		if code != c.code || !strings.Contains(out.String(), c.want) {
			t.Errorf("--check-config %v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, out.String())
		}
	}
}
