package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/internal/linkemu"
)

// TestTransfer moves bytes both ways through the target over a link
// with a rate, and cuts one that cannot end in time.
func TestTransfer(t *testing.T) {
	target, err := startTarget()
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	p := linkemu.Params{Rate: 4 << 20, Queue: 64 << 10}
	l, err := linkemu.Start(target.Addr().String(), p, p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, up := range []bool{false, true} {
		s, err := transfer(l.Addr(), up, 2<<20, 10*time.Second)
		if err != nil || s.cut || s.bytes != 2<<20 {
			t.Fatalf("%s: %+v, %v", dirName(up), s, err)
		}
		// 2 MiB at 4 MiB/s: about half a second, and never faster.
		if s.elapsed < 400*time.Millisecond || s.mbps() > 4.5 {
			t.Errorf("%s: %v, %.2f MB/s through a 4 MiB/s link", dirName(up), s.elapsed, s.mbps())
		}
		if h := s.secondHalf(); h <= 0 || h > 4.5 {
			t.Errorf("%s: second half %.2f MB/s", dirName(up), h)
		}
		// Cut: 64 MiB cannot cross in 1 s; the rate is still the link's.
		s, err = transfer(l.Addr(), up, 64<<20, time.Second)
		if err != nil || !s.cut || s.bytes <= 0 || s.bytes >= 64<<20 || s.mbps() > 4.5 {
			t.Fatalf("%s, cut: %+v (%.2f MB/s), %v", dirName(up), s, s.mbps(), err)
		}
	}
}

// TestTypeKeys types into an echo server through a link with a 40 ms
// round trip: every echo is timed, in order, at about the round trip.
func TestTypeKeys(t *testing.T) {
	target, err := startTarget()
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	p := linkemu.Params{Delay: 20 * time.Millisecond}
	l, err := linkemu.Start(target.Addr().String(), p, p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(header(opEcho, 0)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	d, err := typeKeys(context.Background(), 40, 5*time.Millisecond,
		func(_ context.Context, b byte) error { _, err := c.Write([]byte{b}); return err },
		func(context.Context) ([]byte, error) { k, err := c.Read(buf); return buf[:k], err })
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 40 {
		t.Fatalf("%d echoes, want 40", len(d))
	}
	for i, x := range d {
		if x < 40*time.Millisecond || x > 2*time.Second {
			t.Errorf("echo %d after %v, want about 40 ms", i, x)
		}
	}
	// An echo out of order is an error, not a sample.
	_, err = typeKeys(context.Background(), 2, time.Millisecond,
		func(context.Context, byte) error { return nil },
		func(context.Context) ([]byte, error) { return []byte("b"), nil })
	if err == nil {
		t.Error("an echo of the wrong key was taken")
	}
}
