package control_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ahp-dev/ahpd/daemon/control"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestListenCreatesPrivateDirAndSocket0660(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "ahpd")
	path := filepath.Join(dir, "control.sock")
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode = %v, want socket 0660", fi.Mode())
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("created directory mode = %v, want 0700", di.Mode().Perm())
	}
	if ln.Path() != path {
		t.Fatalf("Path() = %q, want %q", ln.Path(), path)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after Close: %v, want removed", err)
	}
}

// staleSocket leaves a socket file that nothing listens on, as a daemon
// that was killed does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatal(err)
	}
}

func TestListenRemovesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	staleSocket(t, path)
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("the stale socket answers")
	}
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestListenRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	other, err := net.Listen("unix", path) // another process's server, without our lock
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ln, err := control.Listen(path); !errors.Is(err, control.ErrInUse) {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen on a live socket: err = %v, want ErrInUse", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the live socket was removed: %v", err)
	}
}

func TestListenTwiceIsRefusedByTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ln2, err := control.Listen(path); !errors.Is(err, control.ErrInUse) {
		if ln2 != nil {
			ln2.Close()
		}
		t.Fatalf("second Listen: err = %v, want ErrInUse", err)
	}
	// After Close the path is free again.
	ln.Close()
	ln3, err := control.Listen(path)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	ln3.Close()
}

func TestListenRefusesUnsafePaths(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "regular")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ln, err := control.Listen(file); err == nil {
		ln.Close()
		t.Fatal("Listen over a regular file succeeded")
	}
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if ln, err := control.Listen(filepath.Join(open, "c.sock")); !errors.Is(err, control.ErrUnsafe) {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen in a world-writable directory: err = %v, want ErrUnsafe", err)
	}
	long := filepath.Join(dir, strings.Repeat("y", 120))
	if ln, err := control.Listen(long); err == nil {
		ln.Close()
		t.Fatal("Listen on a path longer than sun_path succeeded")
	}
}

func TestListenRefusesSocketOwnedByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.sock")
	staleSocket(t, path)
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if ln, err := control.Listen(path); !errors.Is(err, control.ErrUnsafe) {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen over another user's socket: err = %v, want ErrUnsafe", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("another user's socket was removed: %v", err)
	}
	sub := filepath.Join(dir, "theirs")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sub, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if ln, err := control.Listen(filepath.Join(sub, "c.sock")); !errors.Is(err, control.ErrUnsafe) {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen in another user's directory: err = %v, want ErrUnsafe", err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("RUNTIME_DIRECTORY", "/run/ahpd:/run/other")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	if got := control.DefaultPath("/state"); got != "/run/ahpd/ahpd.sock" {
		t.Errorf("with RUNTIME_DIRECTORY: %q", got)
	}
	t.Setenv("RUNTIME_DIRECTORY", "")
	if got := control.DefaultPath("/state"); got != "/run/user/1000/ahpd/control.sock" {
		t.Errorf("with XDG_RUNTIME_DIR: %q", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if got := control.DefaultPath("/state"); got != "/state/control.sock" {
		t.Errorf("fallback: %q", got)
	}
}

func TestServerHealthAndStop(t *testing.T) {
	ln, err := control.Listen(filepath.Join(t.TempDir(), "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := control.NewServer(control.Options{HealthServices: []string{"ahp.v1.Test"}})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	cc, err := grpc.NewClient("unix://"+ln.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "ahp.v1.Test"})
	if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", res, err)
	}
	s.Stop(time.Second)
	s.Stop(time.Second) // idempotent
	if s.Context().Err() == nil {
		t.Fatal("Context not cancelled by Stop")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Stop")
	}
	ln.Close()
}

// TestSocketInSetgidDirKeepsDaemonGroup: in a setgid directory a new file
// takes the directory's group; the control socket must not, or that
// group's members could run commands as the daemon's user (it is 0660).
// Needs root to give the directory a foreign group.
func TestSocketInSetgidDirKeepsDaemonGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chgrp a directory to a foreign group")
	}
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const foreign = 54321
	if err := os.Chown(dir, 0, foreign); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "control.sock")
	ln, err := control.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; int(gid) != os.Getegid() {
		t.Fatalf("socket group %d, want the daemon's %d (the directory's is %d)", gid, os.Getegid(), foreign)
	}
}
