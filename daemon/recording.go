package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/ahp-dev/ahpd/daemon/events"
)

// dropCheck is how often the daemon looks for output its recordings
// dropped, to publish recording.dropped: at most one event a second
// however fast the drops come.
const dropCheck = time.Second

// watchDrops publishes recording.dropped once every interval in which the
// recordings' dropped-bytes counter (dropped) grew, until ctx is done.
func watchDrops(ctx context.Context, interval time.Duration, dropped func() int64, bus *events.Bus) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := dropped()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now := dropped(); now > last {
			bus.Publish(events.Event{Kind: "recording.dropped",
				Detail: fmt.Sprintf("%d bytes of output dropped from recordings: the disk fell behind or the recordings directory is full (ahpd_recording_dropped_bytes_total)", now-last)})
			last = now
		}
	}
}
