package telemetry_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/ahp-dev/ahpd/telemetry"
)

// BenchmarkPublishFanout: Publish's cost per sample with n viewers that
// each pull (on a goroutine of their own, woken by the channel) as fast as
// they can, as a daemon's connections do. The producer must not slow
// down much with the viewers: they take what they can, the rest drops.
func BenchmarkPublishFanout(b *testing.B) {
	for _, n := range []int{0, 1, 100} {
		b.Run(fmt.Sprintf("viewers=%d", n), func(b *testing.B) {
			c := newChannel(b, telemetry.Config{Source: "push", History: -1})
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range n {
				wake := make(chan struct{}, 1)
				s := attach(b, c, func() {
					select {
					case wake <- struct{}{}:
					default:
					}
				})
				wg.Go(func() {
					for {
						for {
							if _, ok := s.Pull(true, 64<<10); !ok {
								break
							}
						}
						select {
						case <-stop:
							return
						case <-wake:
						}
					}
				})
			}
			buf := make([]telemetry.Sample, 1000)
			for i := range buf {
				buf[i] = telemetry.Sample{T: 1733290000000.5, Name: "node_cpu_seconds_total", Value: float64(i) * 0.25,
					Labels: []telemetry.Label{{Name: "cpu", Value: strconv.Itoa(i % 8)}}}
			}
			b.ResetTimer()
			for b.Loop() {
				if err := c.Publish(buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(buf))/b.Elapsed().Seconds(), "samples/s")
			close(stop)
			wg.Wait()
		})
	}
}
