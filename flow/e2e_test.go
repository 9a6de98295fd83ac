package flow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// randomText returns text of UTF-16 size at most max (and at least 2),
// mixing ASCII, escapes, CJK, emoji and invalid bytes.
func randomText(rng *rand.Rand, max int64) string {
	target := 2 + rng.Int64N(max-1)
	units := []string{"a", "hello ", "\x1b[0m", "\"", "\\", "<&>", "日本", "😀", "\u2028", "\xff", "\n", "é"}
	var b strings.Builder
	var size int64
	for {
		u := units[rng.IntN(len(units))]
		if n := flow.UTF16Len(u); size+n <= target {
			b.WriteString(u)
			size += n
			continue
		}
		if size > 0 {
			return b.String()
		}
	}
}

// peer is one end of a connection: its Sender and, per subscription, the
// Stream and the consumer's state for the opposite direction.
type peer struct {
	name    string
	s       *flow.Sender
	streams map[string]*flow.Stream
	srcs    map[string]*fakeSource
	// expected messages still to arrive at this peer, per subscription
	want map[string][]string
	// completed but not yet released, per subscription
	unreleased map[string][]flow.Position
	delivered  int
}

func newPeer(t *testing.T, name string) *peer {
	return &peer{name: name, s: newSender(t, flow.SenderConfig{}), streams: map[string]*flow.Stream{},
		srcs: map[string]*fakeSource{}, want: map[string][]string{}, unreleased: map[string][]flow.Position{}}
}

// TestEndToEnd runs both directions of several subscriptions through
// Sender → frame text → DecodeFrame → Receiver → release → channel/credit
// → Sender.Credit, with random limits, message sizes and release timing.
// Every message arrives intact and in order, every frame fits the
// receiver's limit, and nothing is left stuck.
func TestEndToEnd(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { endToEnd(t, seed) })
	}
}

func endToEnd(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2024))
	host, client := newPeer(t, "host"), newPeer(t, "client")
	randomLimits := func() flow.ReceiveLimits {
		frame := 1024 + rng.Int64N(8*KiB)
		return limits(frame+rng.Int64N(64*KiB), frame, frame+rng.Int64N(32*KiB))
	}
	nsubs := 2 + rng.IntN(4)
	for i := range nsubs {
		sub := fmt.Sprintf("sub-%d", i)
		toClient, toHost := randomLimits(), randomLimits()
		for _, side := range []struct {
			p          *peer
			send, recv flow.ReceiveLimits
		}{{host, toClient, toHost}, {client, toHost, toClient}} {
			src := &fakeSource{}
			st, err := side.p.s.Open(flow.StreamConfig{Channel: "ahp-tcp:/" + sub, SubscriptionID: sub, Source: src, Send: side.send, Receive: side.recv})
			if err != nil {
				t.Fatal(err)
			}
			side.p.streams[sub], side.p.srcs[sub] = st, src
		}
		// Queue messages in both directions, then a lifecycle message.
		for _, dir := range []struct{ from, to *peer }{{host, client}, {client, host}} {
			max := dir.from.streams[sub].Window().Limits().MaximumMessageBytes
			for range 20 + rng.IntN(40) {
				text := randomText(rng, max)
				dir.from.srcs[sub].push(dataMsg(text))
				dir.to.want[sub] = append(dir.to.want[sub], replaceInvalid(text))
			}
			eof := `{"jsonrpc":"2.0","method":"tcp/eof","params":{}}`
			dir.from.srcs[sub].push(lifecycleMsg(eof))
			dir.to.want[sub] = append(dir.to.want[sub], eof)
			dir.from.s.Wake(dir.from.streams[sub])
		}
	}
	total := 0
	for _, p := range []*peer{host, client} {
		for _, w := range p.want {
			total += len(w)
		}
	}
	// deliverItem hands one item from `from` to `to`.
	deliverItem := func(from, to *peer, b []byte) {
		var f flow.Frame
		err := flow.DecodeFrame(b, &f)
		if errors.Is(err, flow.ErrNotFrame) {
			var c struct {
				Method string `json:"method"`
				Params struct {
					SubscriptionID string `json:"subscriptionId"`
					ConsumedBytes  int64  `json:"consumedBytes"`
				} `json:"params"`
			}
			if err := json.Unmarshal(b, &c); err != nil || c.Method != "channel/credit" {
				t.Fatalf("%s sent %s (%v)", from.name, b, err)
			}
			if err := to.s.Credit(to.streams[c.Params.SubscriptionID], c.Params.ConsumedBytes); err != nil {
				t.Fatalf("%s: Credit(%d) = %v", to.name, c.Params.ConsumedBytes, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("DecodeFrame(%s) = %v", b, err)
		}
		// to's Stream for this subscription holds the Receiver for the
		// direction from → to.
		r := to.streams[f.SubscriptionID].Receiver()
		size := flow.UTF16Len(string(b))
		if size > r.Limits().MaximumFrameBytes {
			t.Fatalf("frame of %d bytes over the limit %d", size, r.Limits().MaximumFrameBytes)
		}
		msg, end, err := r.Frame(size, &f)
		if err != nil {
			t.Fatalf("%s: Receiver.Frame = %v", to.name, err)
		}
		if msg == nil {
			return
		}
		want := to.want[f.SubscriptionID]
		if len(want) == 0 || string(msg) != want[0] {
			t.Fatalf("%s %s message %d: got %.60q, want %.60q", to.name, f.SubscriptionID, end.MessageID, msg, want)
		}
		to.want[f.SubscriptionID] = want[1:]
		to.unreleased[f.SubscriptionID] = append(to.unreleased[f.SubscriptionID], end)
		to.delivered++
	}
	release := func(p *peer, all bool) {
		for sub, ends := range p.unreleased {
			if len(ends) == 0 || (!all && rng.IntN(3) != 0) {
				continue
			}
			k := len(ends)
			if !all {
				k = 1 + rng.IntN(len(ends))
			}
			_, send, err := p.streams[sub].Receiver().Release(ends[k-1])
			if err != nil {
				t.Fatal(err)
			}
			p.unreleased[sub] = ends[k:]
			if send {
				p.s.QueueCredit(p.streams[sub])
			}
		}
	}
	for step := 0; host.delivered+client.delivered < total; step++ {
		if step > 1_000_000 {
			t.Fatalf("stuck: delivered %d of %d", host.delivered+client.delivered, total)
		}
		progress := false
		for _, dir := range []struct{ from, to *peer }{{host, client}, {client, host}} {
			b, err := dir.from.s.Next(nil)
			if err != nil {
				t.Fatalf("%s: Next = %v", dir.from.name, err)
			}
			if b != nil {
				progress = true
				deliverItem(dir.from, dir.to, b)
				dir.from.s.Written(len(b))
			}
		}
		release(host, !progress)
		release(client, !progress)
	}
	for _, p := range []*peer{host, client} {
		for sub, w := range p.want {
			if len(w) != 0 {
				t.Errorf("%s %s: %d messages never arrived", p.name, sub, len(w))
			}
		}
	}
}
