package main

import (
	"net"
	"sync"
	"time"
)

// rtt (-rtt) is the round trip a delay line adds between ahpctl forward
// and the daemon (0: none): a tunnel's latency on loopback.
var rtt time.Duration

// runDelay serves a delay line to target on a loopback port, printed on
// stdout, until stdin closes: every byte is passed on oneWay after it
// arrived, each direction.
func runDelay(target string, oneWay time.Duration) error {
	return serveChild(func(c *net.TCPConn) {
		defer c.Close()
		t, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer t.Close()
		var wg sync.WaitGroup
		wg.Go(func() { delayCopy(t.(*net.TCPConn), c, oneWay) })
		wg.Go(func() { delayCopy(c, t, oneWay) })
		wg.Wait()
	})
}

// delayCopy copies src to dst, each read written oneWay after it was
// read. At most 1024 reads of 64 KiB are in the line (64 MiB); a full
// line stops reading, as a full link would.
func delayCopy(dst *net.TCPConn, src net.Conn, oneWay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	line := make(chan chunk, 1024)
	go func() {
		defer close(line)
		for {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				line <- chunk{b[:n], time.Now().Add(oneWay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range line {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			src.Close() // the reader's next Read fails: it ends
			break
		}
	}
	_ = dst.CloseWrite()
	for range line { // let the reader end
	}
}
