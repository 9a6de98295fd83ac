package ctl_test

import (
	"bytes"
	"crypto/tls"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/internal/testcert"
)

// copyCert puts c's files where the daemon reads its certificate.
func copyCert(t *testing.T, c *testcert.Cert, certPath, keyPath string) {
	t.Helper()
	for _, f := range [][2]string{{c.CertFile, certPath}, {c.KeyFile, keyPath}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1]+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f[1]+".tmp", f[1]); err != nil {
			t.Fatal(err)
		}
	}
}

// servedCert returns the certificate the daemon's listener presents,
// checked against c's.
func servedCert(t *testing.T, addr string, c *testcert.Cert) []byte {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: c.Pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS to %s trusting %s: %v", addr, c.CertFile, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Raw
}

// TestE2ETLSAttach: ahpd serving TLS with a self-signed certificate;
// `ahpctl attach --url https://… --ca-file CERT` (the certificate trusted
// explicitly) reaches the shell, without --ca-file the certificate is
// refused; the links are https; SIGHUP loads a renewed certificate, and
// an upgrade in place serves TLS on the inherited listener (issue 39).
func TestE2ETLSAttach(t *testing.T) {
	dir := t.TempDir()
	certA, err := testcert.Write(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	certB, err := testcert.Write(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	copyCert(t, certA, certPath, keyPath)
	d := startDaemonWith(t, []string{"--tls-cert", certPath, "--tls-key", keyPath}, nil)
	if !bytes.Equal(servedCert(t, d.addr, certA), certA.DER) {
		t.Fatal("the listener does not present the configured certificate")
	}
	if out := d.mustCtl("open"); !strings.HasPrefix(out, "https://"+d.addr+"/#ticket=") {
		t.Errorf("ahpctl open printed %q, want an https link", out)
	}
	d.mustCtl("terminal", "create", "--id", "tsh", "--env", "PS1=TLS> ", "--env", "HOME=/tmp", "--", "/bin/sh")
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control", "--channel", "ahp-terminal:/tsh"))
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remoteAttach := func(extra ...string) *exec.Cmd {
		args := append([]string{"--control", filepath.Join(dir, "none.sock"), "attach", "--url", "https://" + d.addr, "--token-file", tokFile}, extra...)
		cmd := exec.Command(d.ahpctl, append(args, "ahp-terminal:/tsh")...)
		cmd.Env = append(os.Environ(), "AHP_TOKEN=", "AHP_URL=", "AHP_CA_FILE=")
		return cmd
	}

	// The certificate trusted explicitly.
	cmd := remoteAttach("--ca-file", certA.CertFile)
	f, screen, done := inPTY(t, cmd)
	pos := screen.waitFor(t, 0, regexp.MustCompile(`TLS> `))
	if _, err := f.Write([]byte("echo ov''er-tls\r")); err != nil {
		t.Fatal(err)
	}
	screen.waitFor(t, pos, regexp.MustCompile(`\r\nover-tls\r\n`))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done

	// Not trusted: the system's roots do not know it.
	cmd = remoteAttach()
	_, screen, done = inPTY(t, cmd)
	screen.waitFor(t, 0, regexp.MustCompile(`certificate`))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done

	// Through the control socket: the daemon's own listener.
	cmd = exec.Command(d.ahpctl, "--control", d.control, "attach", "tsh")
	f, screen, done = inPTY(t, cmd)
	pos = screen.waitFor(t, 0, regexp.MustCompile(`TLS> `))
	if _, err := f.Write([]byte("echo lo''cal-tls\r")); err != nil {
		t.Fatal(err)
	}
	screen.waitFor(t, pos, regexp.MustCompile(`\r\nlocal-tls\r\n`))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done

	// A renewed certificate: SIGHUP loads it for the next connections.
	copyCert(t, certB, certPath, keyPath)
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(d.logs(), "reload: TLS certificate loaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload of the certificate within 20 s:\n%s", d.logs())
		}
		time.Sleep(20 * time.Millisecond) // polling another process's log
	}
	if !bytes.Equal(servedCert(t, d.addr, certB), certB.DER) {
		t.Fatal("after SIGHUP the listener still presents the old certificate")
	}

	// An upgrade in place: the new binary wraps the inherited listener
	// in TLS again.
	d.upgrade(1)
	if !bytes.Equal(servedCert(t, d.addr, certB), certB.DER) {
		t.Fatal("after the upgrade the listener does not present the certificate")
	}
	cmd = remoteAttach("--ca-file", certB.CertFile)
	f, screen, done = inPTY(t, cmd)
	pos = screen.waitFor(t, 0, regexp.MustCompile(`TLS> `))
	if _, err := f.Write([]byte("echo af''ter-upgrade\r")); err != nil {
		t.Fatal(err)
	}
	screen.waitFor(t, pos, regexp.MustCompile(`\r\nafter-upgrade\r\n`))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// TestE2EInsecureListen: --insecure-listen lets the daemon listen on all
// interfaces without TLS; ahpctl reaches it through the loopback address
// (issue 39). Without the flag it is refused (cmd/ahpd's
// TestNonLoopbackListenRefused).
func TestE2EInsecureListen(t *testing.T) {
	d := startDaemonWith(t, []string{"--listen", "0.0.0.0:0", "--insecure-listen"}, nil)
	if !strings.HasPrefix(d.addr, "0.0.0.0:") && !strings.HasPrefix(d.addr, "[::]:") {
		t.Fatalf("listening on %s, want all interfaces", d.addr)
	}
	out := d.mustCtl("open")
	if !strings.HasPrefix(out, "http://127.0.0.1:") && !strings.HasPrefix(out, "http://[::1]:") {
		t.Errorf("ahpctl open printed %q, want a loopback http link", out)
	}
}

// TestE2EUpgradeKeepsInsecureListener: an upgrade in place whose new
// configuration no longer allows plain HTTP beyond loopback keeps the
// listener it inherits and warns, instead of refusing and ending every
// terminal (issue 39).
func TestE2EUpgradeKeepsInsecureListener(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, []byte("insecureListen = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, []string{"--config", conf, "--listen", "0.0.0.0:0"}, nil)
	d.mustCtl("terminal", "create", "--id", "keep", "--", "/bin/sh")
	if err := os.WriteFile(conf, []byte("insecureListen = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.upgrade(1)
	if !strings.Contains(d.logs(), "serving plain HTTP beyond loopback (an upgrade keeps the listener)") {
		t.Errorf("no warning after the upgrade:\n%s", d.logs())
	}
	if out := d.mustCtl("channels", "get", "keep", "-o", "json"); !strings.Contains(out, `"running"`) {
		t.Errorf("the terminal after the upgrade: %s", out)
	}
}
