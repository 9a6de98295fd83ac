package ctl

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestDefaultControlPathSystemService: with no socket of the user's own
// (no AHP_CONTROL, no runtime or state directory socket), ahpctl finds the
// ahpd@USER system service's socket, /run/ahpd/USER/ahpd.sock (issue 39).
func TestDefaultControlPathSystemService(t *testing.T) {
	dir := t.TempDir()
	old := systemRunDir
	systemRunDir = filepath.Join(dir, "run")
	t.Cleanup(func() { systemRunDir = old })
	t.Setenv("HOME", filepath.Join(dir, "home"))
	env := map[string]string{"USER": "someone"}
	getenv := func(k string) string { return env[k] }
	name := currentUser(getenv)
	if name == "" {
		t.Skip("no user name")
	}
	sock := filepath.Join(systemRunDir, name, "ahpd.sock")
	if got := defaultControlPath(getenv); got == sock {
		t.Fatalf("defaultControlPath = %s before the socket exists", got)
	}
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := defaultControlPath(getenv); got != sock {
		t.Fatalf("defaultControlPath = %s, want %s", got, sock)
	}
	// A socket of the user's own comes first.
	run := filepath.Join(dir, "xdg")
	own := filepath.Join(run, "ahpd", "control.sock")
	os.MkdirAll(filepath.Dir(own), 0o700)
	l2, err := net.Listen("unix", own)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	env["XDG_RUNTIME_DIR"] = run
	if got := defaultControlPath(getenv); got != own {
		t.Fatalf("defaultControlPath = %s, want the user's own %s", got, own)
	}
}
