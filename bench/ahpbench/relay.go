package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/bench/termbench"
)

// The minimal relay is a floor for a Go WebSocket terminal daemon: a
// process of its own that copies PTY output into binary WebSocket
// messages and WebSocket messages into the PTY, with no protocol, no
// emulator, no credit and no second viewer. ahpbench runs it (as a second
// copy of itself, `-relay`) next to ahpd, so that the cost of ahpd's
// features can be told apart from the cost of being a separate process
// behind a socket.

// serveRelay serves the relay on a loopback port, printed on stdout, until
// stdin closes. Each WebSocket connection runs `/bin/sh -c <cmd>` (the
// query parameter) on a PTY of its own.
func serveRelay() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(relayConn), ReadHeaderTimeout: 10 * time.Second}
	stdinClosed := make(chan struct{})
	go func() {
		defer close(stdinClosed)
		_, _ = io.Copy(io.Discard, os.Stdin)
		srv.Close()
	}()
	fmt.Println(l.Addr().String())
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err // the process exits
	}
	<-stdinClosed
	return nil
}

func relayConn(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	cmd := exec.Command("/bin/sh", "-c", r.URL.Query().Get("cmd"))
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		ws.Close(websocket.StatusInternalError, err.Error())
		return
	}
	defer func() { _ = cmd.Wait() }() // reaps the command once the relay closed its PTY
	benchproc.Relay(r.Context(), ws, f, 64<<10)
}

// relay is a running minimal relay.
type relay struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	addr string
}

func startRelay() (*relay, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-relay")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // if ahpbench is killed
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		in.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("minimal relay did not start: %w", err)
	}
	return &relay{cmd: cmd, in: in, addr: strings.TrimSpace(addr)}, nil
}

func (r *relay) stop() {
	r.in.Close() // the relay exits when its stdin closes
	benchproc.WaitOrKill(r.cmd, 10*time.Second)
}

func (r *relay) dial(ctx context.Context, command string) (*websocket.Conn, error) {
	ws, _, err := websocket.Dial(ctx, "ws://"+r.addr+"/?cmd="+url.QueryEscape(command), nil)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(1 << 20)
	return ws, nil
}

// throughput runs `cat path` through the relay and reads it to the end.
// It returns the bytes read, the time taken and the relay's CPU time over
// the run (its connection's set-up and the program's start included: a
// millisecond or two against the hundreds the 64 MiB take).
func (r *relay) throughput(path string) (n int64, elapsed, cpu time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cpu0, err := taskCPU(r.cmd.Process.Pid)
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	ws, err := r.dial(ctx, "exec cat "+path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer ws.CloseNow()
	buf := make([]byte, 64<<10)
	for {
		_, rd, err := ws.Reader(ctx)
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			elapsed = time.Since(start)
			break
		}
		if err != nil {
			return n, 0, 0, err
		}
		for {
			k, err := rd.Read(buf)
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				return n, 0, 0, err
			}
		}
	}
	cpu1, err := taskCPU(r.cmd.Process.Pid)
	return n, elapsed, cpu1 - cpu0, err
}

// echo times n keystrokes through the relay to `cat` on a raw PTY, and
// takes the relay's CPU time.
func (r *relay) echo(n int, gap time.Duration) (timed, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out timed
	ws, err := r.dial(ctx, termbench.EchoCommand)
	if err != nil {
		return out, err
	}
	defer ws.CloseNow()
	if _, b, err := ws.Read(ctx); err != nil {
		return out, err
	} else if string(b) != termbench.EchoReady {
		return out, fmt.Errorf("the relay's terminal said %q, not the ready mark %q", b, termbench.EchoReady)
	}
	cpu0, err := taskCPU(r.cmd.Process.Pid)
	if err != nil {
		return out, err
	}
	for range n {
		time.Sleep(gap)
		t := time.Now()
		if err := ws.Write(ctx, websocket.MessageBinary, []byte{'x'}); err != nil {
			return out, err
		}
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return out, err
			}
			if strings.Contains(string(b), "x") {
				break
			}
		}
		out.d = append(out.d, time.Since(t))
	}
	cpu1, err := taskCPU(r.cmd.Process.Pid)
	out.cpu = cpu1 - cpu0
	return out, err
}
