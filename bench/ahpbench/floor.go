package main

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/bench/termbench"
)

// The C relay (testdata/crelay.c) is the floor of any terminal relay on
// the machine, in any language: one epoll loop copying bytes between a
// loopback TCP connection and a PTY, without WebSocket, protocol or
// allocation. What it adds to the raw PTY echo is the price of being a
// separate process behind a socket (two more process wake-ups and a TCP
// send each way), which no daemon avoids.
//
//go:embed testdata/crelay.c
var cRelaySource []byte

// errNoCompiler reports that the machine has no C compiler: the C relay's
// row is left out.
var errNoCompiler = errors.New("no C compiler (cc) on PATH")

// buildCRelay compiles the C relay into dir and returns its path.
func buildCRelay(dir string) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", errNoCompiler
	}
	src, bin := filepath.Join(dir, "crelay.c"), filepath.Join(dir, "crelay")
	if err := os.WriteFile(src, cRelaySource, 0o600); err != nil {
		return "", err
	}
	out, err := exec.Command(cc, "-O2", "-o", bin, src, "-lutil").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("compiling the C relay: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// cRelayEcho times n keystrokes through the C relay at bin (a process of
// its own, serving one connection) and takes its CPU time.
func cRelayEcho(bin string, n int, gap time.Duration) (timed, error) {
	return tcpRelayEcho(exec.Command(bin), n, gap)
}

// dialTCPRelay starts cmd, a relay that prints the loopback port it
// listens on and serves one connection (the C relay, the Go TCP relay),
// and connects to it, with a 5-minute deadline. The caller closes the
// connection, then waits for cmd (benchproc.WaitOrKill): the relay exits
// when the connection closes.
func dialTCPRelay(cmd *exec.Cmd) (net.Conn, error) {
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // if ahpbench is killed
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	fail := func(err error) (net.Conn, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fail(fmt.Errorf("the relay did not start: %w", err))
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strings.TrimSpace(port)), 10*time.Second)
	if err != nil {
		return fail(err)
	}
	if err := c.SetDeadline(time.Now().Add(5 * time.Minute)); err != nil {
		c.Close()
		return fail(err)
	}
	return c, nil
}

// tcpRelayEcho times n keystrokes through the relay cmd runs
// (dialTCPRelay), serving termbench.EchoCommand on a PTY, and takes its
// CPU time.
func tcpRelayEcho(cmd *exec.Cmd, n int, gap time.Duration) (out timed, err error) {
	c, err := dialTCPRelay(cmd)
	if err != nil {
		return out, err
	}
	defer benchproc.WaitOrKill(cmd, 10*time.Second)
	defer c.Close()
	cpu0, err := taskCPU(cmd.Process.Pid)
	if err != nil {
		return out, err
	}
	if out.d, err = termbench.Echo(c, n, gap); err != nil {
		return out, err
	}
	cpu1, err := taskCPU(cmd.Process.Pid)
	out.cpu = cpu1 - cpu0
	return out, err
}

// cRelayThroughput runs `cat path` through the C relay at bin (its
// batched mode) and reads it to the end of the program's output. It
// returns the bytes read, the time taken and the relay's CPU time, read
// once the client has all the output (the relay waits for the client to
// close before it exits). The output goes to sink (nil: discarded).
func cRelayThroughput(bin, path string, sink io.Writer) (n int64, elapsed, cpu time.Duration, err error) {
	if sink == nil {
		sink = io.Discard
	}
	cmd := exec.Command(bin, "exec cat "+path)
	c, err := dialTCPRelay(cmd)
	if err != nil {
		return 0, 0, 0, err
	}
	defer benchproc.WaitOrKill(cmd, 10*time.Second)
	defer c.Close()
	cpu0, err := taskCPU(cmd.Process.Pid)
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	n, err = io.CopyBuffer(sink, c, make([]byte, 64<<10))
	if err != nil {
		return n, 0, 0, err
	}
	elapsed = time.Since(start)
	cpu1, err := taskCPU(cmd.Process.Pid)
	return n, elapsed, cpu1 - cpu0, err
}
