package benchproc

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Daemon is a bin/ahpd a benchmark runs: listening on a free loopback
// port, its state directory and control socket in a directory of the
// benchmark's, and a gRPC connection to its control socket.
type Daemon struct {
	Cmd   *exec.Cmd
	Addr  string // HOST:PORT of the HTTP and WebSocket listener
	Sock  string // the control socket
	Token string // the admin token
	Conn  *grpc.ClientConn
}

// StartDaemon starts bin with --listen, --state-dir and --control set
// (state and socket under dir) and args after them, with env added to this
// process's environment, its output on this process's stderr; it waits
// (10 s at most) until the daemon is up and dials its control socket. The
// daemon gets SIGTERM if the benchmark dies. Without --config in args it
// gets --config none: a benchmark measures the defaults, never the
// settings of the user's own config file.
func StartDaemon(bin, dir string, args, env []string) (*Daemon, error) {
	if !slices.Contains(args, "--config") {
		args = append([]string{"--config", "none"}, args...)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "control.sock")
	cmd := exec.Command(bin, append([]string{"--listen", addr, "--state-dir", state, "--control", sock}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &Daemon{Cmd: cmd, Addr: addr, Sock: sock}
	if d.Token, err = WaitForDaemon(state, sock); err != nil {
		d.Stop()
		return nil, err
	}
	if d.Conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// WS is the daemon's WebSocket URL.
func (d *Daemon) WS() string { return "ws://" + d.Addr + "/v1/ws" }

// Base is the daemon's HTTP URL, without a trailing slash.
func (d *Daemon) Base() string { return "http://" + d.Addr }

// CPU is the daemon's user+system CPU time so far (0 if unreadable).
func (d *Daemon) CPU() time.Duration {
	c, err := CPU(d.Cmd.Process.Pid)
	if err != nil {
		return 0
	}
	return c
}

// Stop closes the control connection, sends SIGTERM and waits (15 s at
// most, then kills).
func (d *Daemon) Stop() {
	if d.Conn != nil {
		d.Conn.Close()
	}
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	WaitOrKill(d.Cmd, 15*time.Second)
}
