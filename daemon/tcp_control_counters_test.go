package daemon_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestControlTCPCounters: a channel created over the control plane is
// served to a subscriber; its bytes each way show in its listing, and the
// daemon's totals keep them after the channel is closed.
func TestControlTCPCounters(t *testing.T) {
	tg := newTarget(t, echo)
	target := "127.0.0.1:" + strconv.Itoa(tg.port())
	h, tc, c := startTCPControl(t, "none", target)
	ctx := ctxT(t)
	if _, err := tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: uint32(tg.port()), Id: "echo"}); err != nil {
		t.Fatal(err)
	}
	cl := h.tcpClient(adminToken)
	cl.channel = "ahp-tcp:/echo"
	cl.subscribe(`{"channel":"ahp-tcp:/echo"}`)
	want := bytes.Repeat([]byte("counted "), 625) // 5000 bytes
	cl.input(want)
	var off int64
	if got := cl.readData(&off, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("echo differs: %d bytes back", len(got))
	}
	var info *ahpv1.TCPChannel
	waitFor(t, "the channel's counters", func() bool {
		res, err := c.channels.GetChannel(ctx, &ahpv1.GetChannelRequest{Channel: "ahp-tcp:/echo"})
		if err != nil {
			t.Fatal(err)
		}
		info = res.Channel.Tcp
		return info.GetBytesIn() == 5000 && info.GetBytesOut() == 5000
	})
	if !info.Consumer || info.Phase != "open" || info.Target != target || info.Remote != target {
		t.Fatalf("channel's TCP info = %v", info)
	}
	if _, err := c.channels.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: "ahp-tcp:/echo"}); err != nil {
		t.Fatal(err)
	}
	if st := h.srv.TCPStats(context.Background()); st.Channels != 0 || st.BytesIn != 5000 || st.BytesOut != 5000 {
		t.Fatalf("TCPStats after the close = %+v, want the channel's bytes kept", st)
	}
}

// TestControlTCPRetainUnconsumed: a channel created over the control plane
// that nobody takes is closed after tcpRetain, read from the limits in
// force (changed at run time here).
func TestControlTCPRetainUnconsumed(t *testing.T) {
	tg := newTarget(t, echo)
	h, tc, c := startTCPControl(t, "none", "127.0.0.1:"+strconv.Itoa(tg.port()))
	ctx := ctxT(t)
	if _, err := c.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Limits: &ahpv1.Limits{TcpRetain: durationpb.New(time.Second)}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"tcp_retain"}}}); err != nil {
		t.Fatal(err)
	}
	res, err := tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: uint32(tg.port())})
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Channel.Tcp.GetPhase(); p != "open, retained" {
		t.Fatalf("phase of an unconsumed channel = %q", p)
	}
	waitFor(t, "the unconsumed channel to close", func() bool {
		_, ok := h.srv.Registry().Get(res.Channel.Uri)
		return !ok
	})
}
