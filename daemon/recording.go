package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/ahp-dev/ahpd/daemon/events"
)

// recordingCheck is how often the daemon looks at what its recordings did
// on their own: output they dropped (recording.dropped: at most one event
// a second however fast the drops come), files continued or ended
// (sync: service.SyncRecordings).
const recordingCheck = time.Second

// watchRecordings calls sync and publishes recording.dropped once every
// interval in which the recordings' dropped-bytes counter (dropped) grew,
// until ctx is done.
func watchRecordings(ctx context.Context, interval time.Duration, dropped func() int64, sync func(), bus *events.Bus) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := dropped()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sync()
		if now := dropped(); now > last {
			bus.Publish(events.Event{Kind: "recording.dropped",
				Detail: fmt.Sprintf("%d bytes of output dropped from recordings: the disk fell behind or the recordings directory is full (ahpd_recording_dropped_bytes_total)", now-last)})
			last = now
		}
	}
}
