package ctl

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/internal/testcert"
)

// TestWebsocketURLPrefix: the URL of a daemon behind a proxy (its
// publicUrl, with a path) gets v1/ws under that path (issue 39).
func TestWebsocketURLPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"https://h.example/ahpd/":    "wss://h.example/ahpd/v1/ws",
		"https://h.example/ahpd":     "wss://h.example/ahpd/v1/ws",
		"http://127.0.0.1:8080/a/b/": "ws://127.0.0.1:8080/a/b/v1/ws",
		"http://h:1/ahpd/v1/ws":      "ws://h:1/ahpd/v1/ws",
		"http://h:1":                 "ws://h:1/v1/ws",
	} {
		if got, err := websocketURL(in); err != nil || got != want {
			t.Errorf("websocketURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestCAFile(t *testing.T) {
	dir := t.TempDir()
	cert, err := testcert.Write(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := func(args []string, url string, env map[string]string) (bool, error) {
		fs := flag.NewFlagSet("attach", flag.ContinueOnError)
		r := remoteFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		c, err := r.tlsConfig(url, func(k string) string { return env[k] })
		return c != nil && c.RootCAs != nil && !c.InsecureSkipVerify, err
	}
	if ok, err := conf([]string{"--ca-file", cert.CertFile}, "wss://h/v1/ws", nil); !ok || err != nil {
		t.Errorf("--ca-file: %v %v, want its roots", ok, err)
	}
	if ok, err := conf(nil, "wss://h/v1/ws", map[string]string{"AHP_CA_FILE": cert.CertFile}); !ok || err != nil {
		t.Errorf("AHP_CA_FILE: %v %v, want its roots", ok, err)
	}
	if ok, err := conf(nil, "wss://h/v1/ws", nil); ok || err != nil {
		t.Errorf("no file: %v %v, want the system's roots (nil)", ok, err)
	}
	for _, c := range []struct {
		file, url, want string
	}{
		{cert.CertFile, "ws://h/v1/ws", "--ca-file is for an https:// --url"},
		{notPEM, "wss://h/v1/ws", "no PEM certificate"},
		{filepath.Join(dir, "none.pem"), "wss://h/v1/ws", "none.pem"},
	} {
		if _, err := conf([]string{"--ca-file", c.file}, c.url, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--ca-file %s with %s: %v, want %q", c.file, c.url, err, c.want)
		}
	}
	if c := localTLS("wss://127.0.0.1:1/v1/ws"); c == nil || !c.InsecureSkipVerify {
		t.Errorf("localTLS(wss) = %+v", c)
	}
	if c := localTLS("ws://127.0.0.1:1/v1/ws"); c != nil {
		t.Errorf("localTLS(ws) = %+v, want nil", c)
	}
}
