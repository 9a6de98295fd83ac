package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"

	"github.com/creack/pty"

	"github.com/ahp-dev/ahpd/bench/termbench"
)

// The Go TCP relay is the C relay (floor.go) written in Go: one loopback
// TCP connection copied to and from a PTY running termbench.EchoCommand,
// with no WebSocket, no protocol and no allocation per keystroke, in the
// way a Go program does it: a goroutine per direction, the socket through
// the runtime's poller, the PTY as creack/pty opens it (blocking reads).
// It differs from the minimal Go WebSocket relay (relay.go) only in the
// WebSocket, so beside the two it splits what a Go WebSocket daemon pays
// per keystroke over the C floor into the Go runtime's share and the
// WebSocket's.
// ahpbench runs it as a second copy of itself (-tcprelay).

// tcpRelayFlag runs ahpbench as the Go TCP relay.
const tcpRelayFlag = "tcprelay"

// tcpRelayMain listens on a loopback port, prints it, serves the first
// connection and returns when either side closes, as the C relay does.
func tcpRelayMain() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	c, err := l.Accept()
	l.Close()
	if err != nil {
		return err
	}
	return serveTCPRelay(c)
}

// serveTCPRelay copies c to and from a PTY running termbench.EchoCommand
// until either side closes, then closes both and reaps the command.
func serveTCPRelay(c net.Conn) error {
	defer c.Close()
	cmd := exec.Command("/bin/sh", "-c", termbench.EchoCommand)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		copyBuf(f, c) // keystrokes to the PTY
		// The client closed. A blocking PTY read is not ended by closing
		// the PTY, but by the end of the program on it.
		_ = cmd.Process.Kill()
	})
	copyBuf(c, f) // the echo to the socket, until EIO: the program ended
	c.Close()     // ends the keystroke direction, if the program ended first
	wg.Wait()
	f.Close()
	if err := cmd.Wait(); err != nil && !errors.As(err, new(*exec.ExitError)) {
		return err
	}
	return nil
}

// copyBuf copies src to dst through one buffer, a read and a write a
// time, until either fails: what io.Copy does, without its fast paths
// (splice, sendfile), which a relay of messages cannot take either.
func copyBuf(dst io.Writer, src io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// goTCPRelayCommand is the command that runs this binary as the Go TCP
// relay.
func goTCPRelayCommand() (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(self, "-"+tcpRelayFlag), nil
}
