// Package benchproc holds what the process benchmarks (bench/ahpbench,
// bench/tcpbench) share: a process's CPU time from /proc, a bounded
// wait for a child to exit, the wait for ahpd to be up, and the minimal
// WebSocket relay.
package benchproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// CPU returns a process's user+system CPU time so far (/proc/PID/stat).
func CPU(pid int) (time.Duration, error) {
	user, sys, err := CPUSplit(pid)
	return user + sys, err
}

// CPUSplit returns a process's user and system CPU time so far
// (/proc/PID/stat's utime and stime, in ticks of 10 ms).
func CPUSplit(pid int) (user, sys time.Duration, err error) {
	f, err := stat(pid)
	if err != nil {
		return 0, 0, err
	}
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	const tick = time.Second / 100 // USER_HZ is 100 on Linux
	return time.Duration(ut) * tick, time.Duration(st) * tick, nil
}

// Alive reports whether pid is a process that has not ended: it exists
// and is not a zombie.
func Alive(pid int) bool {
	f, err := stat(pid)
	return err == nil && len(f) > 0 && f[0] != "Z"
}

// stat returns the fields of /proc/PID/stat after the command name (which
// may hold spaces, in parentheses): the state first.
func stat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 > len(b) {
		return nil, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strings.Fields(string(b[i+2:])), nil
}

// WaitOrKill waits for cmd to exit, and kills it after d.
func WaitOrKill(cmd *exec.Cmd, d time.Duration) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
	}
}

// WaitForDaemon waits (10 s at most) until an ahpd started with
// --state-dir state and --control sock has written its admin token and
// opened its control socket, and returns the token.
func WaitForDaemon(state, sock string) (string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		tok, err := os.ReadFile(filepath.Join(state, "admin.token"))
		_, serr := os.Stat(sock)
		if err == nil && serr == nil && len(tok) > 0 {
			return strings.TrimSpace(string(tok)), nil
		}
		if time.Now().After(deadline) {
			return "", errors.New("ahpd did not start within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Relay copies between a WebSocket and rw until either ends: each read of
// rw (up to bufSize bytes) becomes one binary message, and each message is
// written to rw. It is the minimal relay the benchmarks measure ahpd
// against (a PTY in ahpbench, a TCP socket in tcpbench). rw is closed
// when Relay returns, and its goroutine has ended.
func Relay(ctx context.Context, ws *websocket.Conn, rw io.ReadWriteCloser, bufSize int) {
	input := make(chan struct{})
	defer func() {
		ws.CloseNow() // ends the input goroutine,
		rw.Close()
		<-input // and waits for it
	}()
	go func() {
		defer close(input)
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				rw.Close()
				return
			}
			if _, err := rw.Write(b); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, bufSize)
	for {
		n, err := rw.Read(buf)
		if n > 0 {
			if werr := ws.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			ws.Close(websocket.StatusNormalClosure, "")
			return
		}
	}
}
