package ctl_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EUpgradeForwardResumes: `ahpctl forward` carries a transferSize
// stream each way through an echo target while ahpd upgrades in place
// three times, each started (SIGUSR2) while the stream is under way, with
// bytes in flight both ways (the reader waits for each upgrade, and the
// writer holds the last quarter back until the third): the TCP channel crosses each upgrade with
// its socket and journal, forward resumes it, and what comes back is the
// stream sent, sha256 equal — nothing lost or repeated either way. The
// channel is the same (one opened line, one channel URI) and its resumes
// are counted.
func TestE2EUpgradeForwardResumes(t *testing.T) {
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, echo.addr())
	f := startForward(t, d, nil, "127.0.0.1:0", echo.addr())
	if f.addr == "" {
		t.Fatalf("forward did not start:\n%s", f.log())
	}
	size := transferSize()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := sha256.New()
	werr := make(chan error, 1)
	lastQuarter := make(chan struct{}) // closed after the third upgrade
	go func() {
		// The last quarter waits for the third upgrade, so that the
		// channel is open (not finished) at each one.
		r := io.TeeReader(io.LimitReader(rand.Reader, int64(size)), sent)
		_, err := io.CopyBuffer(c, io.LimitReader(r, int64(size)*3/4), make([]byte, 64<<10))
		if err == nil {
			select {
			case <-lastQuarter:
			case <-time.After(3 * time.Minute):
			}
			_, err = io.CopyBuffer(c, r, make([]byte, 64<<10))
		}
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	// The reader stops at each quarter of the stream until the upgrade it
	// starts there has finished: the writer goes on until the windows and
	// buffers on the way are full, so each hand-over happens with bytes in
	// flight both ways (in the journal, the read buffers, the kernels').
	got := sha256.New()
	var read int64
	var during []int64 // bytes read back when each upgrade finished
	buf := make([]byte, 64<<10)
	if err := c.SetReadDeadline(time.Now().Add(3 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	for {
		if n := len(during); n < 3 && read >= int64(n+1)*int64(size)/4 {
			if err := d.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
				t.Fatal(err)
			}
			d.awaitUpgrade(n + 1)
			during = append(during, read)
			if len(during) == 3 {
				close(lastQuarter)
			}
		}
		k, err := c.Read(buf)
		got.Write(buf[:k])
		read += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading the echo after %d of %d bytes (%d upgrades): %v", read, size, len(during), err)
		}
	}
	if err := <-werr; err != nil {
		t.Fatalf("writing: %v", err)
	}
	if read != int64(size) {
		t.Fatalf("read %d bytes back, want %d", read, size)
	}
	if !bytes.Equal(sent.Sum(nil), got.Sum(nil)) {
		t.Fatal("the bytes read back differ from those sent (sha256)")
	}
	if len(during) != 3 || d.upgrades() != 3 {
		t.Fatalf("%d upgrades during the transfer, %d in all; want 3", len(during), d.upgrades())
	}
	t.Logf("%d MiB each way; bytes back when each upgrade finished: %v", size>>20, during)
	if adopted := strings.Count(d.logs(), `msg="tcp channel adopted"`); adopted != 3 {
		t.Fatalf("the daemon adopted a TCP channel %d times, want 3:\n%s", adopted, d.logs())
	}
	if strings.Contains(d.logs(), "not handed over") {
		t.Fatalf("a channel was not handed over:\n%s", d.logs())
	}
	if opened := regexp.MustCompile(`(?m)^forward: #\d+ from \S+: opened (ahp-tcp:/\S+)`).FindAllStringSubmatch(f.log(), -1); len(opened) != 1 {
		t.Fatalf("forward opened %d channels for one connection, want 1:\n%s", len(opened), f.log())
	}
	closed := regexp.MustCompile(fmt.Sprintf(`(?m)^forward: #\d+ from \S+: \S+ closed: sent %d bytes, received %d bytes$`, size, size))
	deadline := time.Now().Add(20 * time.Second)
	for !closed.MatchString(f.log()) {
		if time.Now().After(deadline) {
			t.Fatalf("no closed line with %d bytes each way:\n%s", size, f.log())
		}
		time.Sleep(20 * time.Millisecond) // polling another process's output
	}
	waitNoChannels(t, d)
	f.stop()
}
