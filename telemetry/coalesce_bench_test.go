package telemetry_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/telemetry"
)

// BenchmarkPublishCoalescing (issue 36): ingest of a coalescing channel
// with 0 viewers and with 32 connections of 128 viewers (each connection
// with the daemon's default queue budget, 16 MiB), over 10,000 distinct
// series (DefaultMaxSeries), 1,000 samples a Publish. The viewers are
// stalled (they pulled channel/ready and nothing since, as a client that
// grants no credit) or pulling: after each Publish the loop pulls one
// message from 256 of them, round robin, so each pulls once per 16
// publishes, and their Pulls (catch-ups included) are in the figure.
// Before the loop, each viewer has fallen behind and, if pulling, pulled
// once.
func BenchmarkPublishCoalescing(b *testing.B) {
	const (
		series  = 10_000
		perConn = 128
	)
	for _, tc := range []struct {
		viewers int
		pulling bool
	}{{0, false}, {4096, false}, {4096, true}} {
		name := fmt.Sprintf("viewers=%d", tc.viewers)
		if tc.pulling {
			name += ",pulling"
		}
		b.Run(name, func(b *testing.B) {
			c := newChannel(b, telemetry.Config{Source: "push", History: -1, Policy: telemetry.CoalesceLatest})
			subs := make([]flow.Subscriber, tc.viewers)
			var budget *flow.Budget
			for i := range subs {
				if i%perConn == 0 {
					budget = flow.NewBudget(16 << 20)
				}
				s, err := c.Attach(flow.AttachRequest{Window: 1 << 20, Role: flow.RoleView, Queue: budget})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(s.Close)
				s.Pull(true, 64<<10) // channel/ready
				subs[i] = s
			}
			buf := make([]telemetry.Sample, 1000)
			labels := make([][]telemetry.Label, series)
			for i := range labels {
				labels[i] = []telemetry.Label{{Name: "host", Value: "h" + strconv.Itoa(i%100)}, {Name: "id", Value: strconv.Itoa(i)}}
			}
			n, next := 0, 0
			publish := func() {
				for i := range buf {
					buf[i] = telemetry.Sample{T: 1733290000000.5, Name: "requests_total", Value: float64(n), Labels: labels[n%series]}
					n++
				}
				if err := c.Publish(buf); err != nil {
					b.Fatal(err)
				}
				if tc.pulling {
					for range len(subs) / 16 {
						subs[next%len(subs)].Pull(true, 64<<10)
						next++
					}
				}
			}
			for range 64 {
				publish()
			}
			n = 0
			for b.Loop() {
				publish()
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
