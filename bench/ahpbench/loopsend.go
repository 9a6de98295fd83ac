package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
)

// loopSendFlag runs ahpbench as a bare loopback sender (-loopsend ADDR
// with -loopconns N, -pacedcat FILE and -pace R): the floor under a
// further viewer in the paced fan-out table. It writes the file to N TCP
// connections to ADDR, each piece of the paced program to every one in
// turn at its rate, as ahpd writes its viewers' frames after each read,
// and prints the CPU the sending took (loopSending) as JSON.
const (
	loopSendFlag  = "loopsend"
	loopConnsFlag = "loopconns"
	loopBytesFlag = "loopbytes"
)

// A further bare socket's cost is the difference between two runs of the
// bare sender, whose own wake-ups (one per piece, the same with one
// connection and with N) vary from run to run by more than a socket
// costs: bareSocket takes the median of bareRounds such differences, each
// over the first bareBytes of the file.
const (
	bareRounds = 3
	bareBytes  = 16 << 20
)

// bareSocket returns the CPU per MB that each of conns − 1 further
// loopback connections costs a bare sender at rate bytes per second
// (loopbackSend), the median of bareRounds rounds of one connection and
// conns, in alternating order. conns must be at least 2.
func bareSocket(file string, rate float64, conns int) (float64, error) {
	var diffs []float64
	for i := range bareRounds {
		// Alternate which run goes first, so that neither always runs
		// right after the other's load.
		order := []int{1, conns}
		if i%2 == 1 {
			order = []int{conns, 1}
		}
		var one, many loopSending
		for _, n := range order {
			r, err := loopbackSend(file, rate, n, bareBytes)
			if err != nil {
				return 0, err
			}
			if n == 1 {
				one = r
			} else {
				many = r
			}
		}
		diffs = append(diffs, float64(many.CPU-one.CPU)/1e6/(float64(one.Bytes)/1e6)/float64(conns-1))
	}
	return median(diffs), nil
}

// loopSending is what a bare loopback sender reports.
type loopSending struct {
	Bytes int64         `json:"bytes"`
	CPU   time.Duration `json:"cpu_ns"` // the process's user and system time while it sent
}

// loopSend dials addr conns times and writes data to every connection
// at rate bytes per second, each piece of pacedPiece bytes to every
// connection in turn (pacedCopy), then closes them. It reports the
// process's CPU time from the first write to the last close: the kernel's
// send path for loopback sockets, which charges the receiving side's
// protocol work and wake-ups to the sender, as ahpd's viewers' sockets
// are charged to ahpd; the difference between conns connections and one,
// over conns − 1, is what one more costs.
func loopSend(addr string, conns int, data []byte, rate float64) (loopSending, error) {
	if conns < 1 {
		return loopSending{}, fmt.Errorf("%d connections", conns)
	}
	// A minute beyond the time the data takes at the rate.
	deadline := time.Now().Add(time.Duration(float64(len(data))/rate*float64(time.Second)) + time.Minute)
	cs := make([]net.Conn, 0, conns)
	ws := make([]io.Writer, 0, conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return loopSending{}, err
		}
		cs, ws = append(cs, c), append(ws, c)
		if err := c.SetWriteDeadline(deadline); err != nil {
			return loopSending{}, err
		}
	}
	cpu0 := termbench.CPUTime()
	sent, err := pacedCopy(io.MultiWriter(ws...), bytes.NewReader(data), rate)
	if err != nil {
		return loopSending{Bytes: sent}, err
	}
	for _, c := range cs {
		if err := c.Close(); err != nil {
			return loopSending{Bytes: sent}, err
		}
	}
	return loopSending{Bytes: sent, CPU: termbench.CPUTime() - cpu0}, nil
}

// loopSendMain is ahpbench -loopsend ADDR -loopconns N -loopbytes B
// -pacedcat FILE -pace R: the first B bytes of the file (all of it if 0)
// are read into memory first, so only the sending is timed. Bytes is what
// each connection was sent.
func loopSendMain(addr string, conns int, limit int64, file string, rate float64) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if limit > 0 && int64(len(data)) > limit {
		data = data[:limit]
	}
	r, err := loopSend(addr, conns, data, rate)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// loopbackSend has a copy of ahpbench (-loopsend) send the first limit
// bytes of file to this process over conns loopback TCP connections at
// rate bytes per second, discards what it receives (a goroutine per
// connection, as ahpbench reads its viewers), and returns what the sender
// reported; 5 minutes at most.
func loopbackSend(file string, rate float64, conns int, limit int64) (loopSending, error) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), 5*time.Minute, errors.New("no end after 5 minutes"))
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		return loopSending{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return loopSending{}, err
	}
	defer ln.Close()
	cmd := exec.CommandContext(ctx, self, "-"+loopSendFlag, ln.Addr().String(), "-"+loopConnsFlag, fmt.Sprint(conns), "-"+loopBytesFlag, fmt.Sprint(limit), "-"+pacedCatFlag, file, "-pace", fmt.Sprint(rate/1e6))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		return loopSending{}, err
	}
	received := make(chan int64, conns)
	var wg sync.WaitGroup
	wg.Go(func() {
		for range conns {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				n, _ := io.Copy(io.Discard, c)
				c.Close()
				received <- n
			})
		}
	})
	werr := cmd.Wait()
	ln.Close() // ends an Accept that the sender never dialled
	wg.Wait()
	close(received)
	if werr != nil {
		return loopSending{}, fmt.Errorf("loopback send of %s: %w", file, termbench.ChildError(ctx, werr, errb.Bytes()))
	}
	var r loopSending
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return loopSending{}, fmt.Errorf("loopback send of %s: it said %q: %w", file, out.Bytes(), err)
	}
	n := 0
	for got := range received {
		if got != r.Bytes {
			return loopSending{}, fmt.Errorf("loopback send of %s: sent %d bytes, %d arrived", file, r.Bytes, got)
		}
		n++
	}
	if n != conns {
		return loopSending{}, fmt.Errorf("loopback send of %s: %d of %d connections arrived", file, n, conns)
	}
	return r, nil
}
