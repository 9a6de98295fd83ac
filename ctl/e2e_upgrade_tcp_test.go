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
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestE2EUpgradeForwardResumes: `ahpctl forward` carries a transferSize
// stream each way through an echo target while ahpd upgrades in place
// three times, each started (SIGUSR2) while the stream is under way, with
// bytes in flight both ways: the TCP channel crosses each upgrade with
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
	go func() {
		r := io.TeeReader(io.LimitReader(rand.Reader, int64(size)), sent)
		_, err := io.CopyBuffer(c, r, make([]byte, 64<<10))
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()

	// The reader paces itself (the whole stream in about 6 s) so that the
	// transfer spans the upgrades, and starts the n-th upgrade once it has
	// read n quarters, after the one before it finished.
	got := sha256.New()
	var read atomic.Int64
	upgraded := make(chan int, 3)
	var during []int64 // bytes read when each upgrade finished
	n := 0
	pace := time.Duration(float64(6*time.Second) / float64(size) * float64(64<<10))
	buf := make([]byte, 64<<10)
	readDone := make(chan error, 1)
	go func() {
		for {
			k, err := c.Read(buf)
			got.Write(buf[:k])
			read.Add(int64(k))
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				readDone <- err
				return
			}
			time.Sleep(pace)
		}
	}()
	guard := time.After(3 * time.Minute)
	for done := false; !done; {
		select {
		case err := <-readDone:
			if err != nil {
				t.Fatalf("reading the echo after %d bytes: %v", read.Load(), err)
			}
			done = true
		case k := <-upgraded:
			during = append(during, read.Load())
			_ = k
		case <-time.After(5 * time.Millisecond):
		case <-guard:
			t.Fatalf("the transfer did not end within 3 minutes: %d of %d bytes back, %d upgrades", read.Load(), size, n)
		}
		if n < 3 && len(during) == n && read.Load() >= int64(n+1)*int64(size)/4 {
			n++
			if err := d.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
				t.Fatal(err)
			}
			go func(k int) {
				deadline := time.Now().Add(60 * time.Second)
				for d.upgrades() < k && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond) // polling another process's log
				}
				upgraded <- k
			}(n)
		}
	}
	if err := <-werr; err != nil {
		t.Fatalf("writing: %v", err)
	}
	if read.Load() != int64(size) {
		t.Fatalf("read %d bytes back, want %d", read.Load(), size)
	}
	if !bytes.Equal(sent.Sum(nil), got.Sum(nil)) {
		t.Fatal("the bytes read back differ from those sent (sha256)")
	}
	if n != 3 || d.upgrades() != 3 {
		t.Fatalf("%d upgrades started, %d done; want 3", n, d.upgrades())
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
