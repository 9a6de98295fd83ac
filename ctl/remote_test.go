package ctl

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWebsocketURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7681":       "ws://127.0.0.1:7681/v1/ws",
		"http://127.0.0.1:7681/":      "ws://127.0.0.1:7681/v1/ws",
		"https://ahp.example:8443":    "wss://ahp.example:8443/v1/ws",
		"ws://[::1]:9000/v1/ws":       "ws://[::1]:9000/v1/ws",
		"http://host:1/proxied/v1/ws": "ws://host:1/proxied/v1/ws",
	} {
		if got, err := websocketURL(in); err != nil || got != want {
			t.Errorf("websocketURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"127.0.0.1:7681", "ftp://h:1", "http://", "http://u:p@h:1", "http://h:1/?token=x", "http://h:1/#t=x"} {
		if _, err := websocketURL(bad); err == nil {
			t.Errorf("websocketURL(%q) accepted, want an error", bad)
		}
	}
}

func TestRemoteResolve(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tokFile, empty, big := file("tok", "ahp_from-file\n"), file("empty", "\n"), file("big", strings.Repeat("x", maxTokenFile+1))
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	resolve := func(args []string, e map[string]string) (string, string, bool, error) {
		fs := flag.NewFlagSet("attach", flag.ContinueOnError)
		r := remoteFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return r.resolve(env(e), io.Discard)
	}
	// No URL: the control socket.
	if _, _, ok, err := resolve(nil, nil); ok || err != nil {
		t.Fatalf("no URL: ok %v, %v; want the control socket", ok, err)
	}
	// From the file, and from the environment (the file wins).
	if u, tok, ok, err := resolve([]string{"--url", "http://127.0.0.1:1", "--token-file", tokFile}, map[string]string{"AHP_TOKEN": "ahp_env"}); !ok || err != nil || tok != "ahp_from-file" || u != "ws://127.0.0.1:1/v1/ws" {
		t.Fatalf("--token-file: %q %q %v %v", u, tok, ok, err)
	}
	if _, tok, ok, err := resolve(nil, map[string]string{"AHP_URL": "http://127.0.0.1:1", "AHP_TOKEN": " ahp_env\n"}); !ok || err != nil || tok != "ahp_env" {
		t.Fatalf("AHP_URL and AHP_TOKEN: %q %v %v", tok, ok, err)
	}
	// Errors that say what to do; none takes a token from argv.
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--url", "http://127.0.0.1:1"}, nil, "--token-file FILE or AHP_TOKEN"},
		{[]string{"--token-file", tokFile}, nil, "--token-file needs --url"},
		{[]string{"--url", "http://127.0.0.1:1", "--token-file", filepath.Join(dir, "missing")}, nil, "no such file"},
		{[]string{"--url", "http://127.0.0.1:1", "--token-file", empty}, nil, "empty"},
		{[]string{"--url", "http://127.0.0.1:1", "--token-file", big}, nil, "not a token"},
	} {
		if _, _, _, err := resolve(tc.args, tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}

// TestTokenFileMode: a token file its group or others may read is read,
// with a warning that names it, its mode and the fix, as ssh warns of a
// key; a 0600 file draws none.
func TestTokenFileMode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o400, false}, {0o644, true}, {0o640, true}, {0o604, true}} {
		path := filepath.Join(dir, "tok")
		os.Remove(path)
		if err := os.WriteFile(path, []byte("ahp_tok\n"), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		tok, err := readTokenFile(path, &stderr)
		if err != nil || tok != "ahp_tok" {
			t.Fatalf("mode %04o: %q, %v", tc.mode, tok, err)
		}
		want := fmt.Sprintf("ahpctl: warning: --token-file %s is open to others (mode %04o): whoever can read it can use the token; run chmod 600 %s\n", path, tc.mode, path)
		if got := stderr.String(); tc.warn && got != want || !tc.warn && got != "" {
			t.Errorf("mode %04o: stderr %q; want %q", tc.mode, got, map[bool]string{true: want}[tc.warn])
		}
	}
}
