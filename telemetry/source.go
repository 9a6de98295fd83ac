package telemetry

import (
	"context"
	"fmt"
	"time"
)

// MinInterval is the shortest sampling interval (PROTOCOL.md §10: down to
// 10 ms); DefaultInterval the default.
const (
	MinInterval     = 10 * time.Millisecond
	DefaultInterval = time.Second
)

// CheckInterval applies the default to 0 and refuses an interval below
// MinInterval.
func CheckInterval(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return DefaultInterval, nil
	case d < MinInterval:
		return 0, fmt.Errorf("interval %v: must be at least %v", d, MinInterval)
	}
	return d, nil
}

// nowMilli is the current time as Sample.T.
func nowMilli(t time.Time) float64 { return UnixMilli(t.Unix(), int64(t.Nanosecond())) }

// tick calls collect every interval until ctx is done, publishing what it
// returns; a collect error ends the source.
func tick(ctx context.Context, interval time.Duration, p Publisher, collect func(now time.Time) ([]Sample, error)) error {
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		samples, err := collect(time.Now())
		if err != nil {
			return err
		}
		if len(samples) > 0 {
			if err := p.Publish(samples); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
		}
	}
}

// Func is a source that calls Collect every Interval (default 1 s) and
// publishes what it returns: the daemon's own figures.
type Func struct {
	Interval time.Duration
	Collect  func(now time.Time) []Sample
}

// Run implements Source.
func (f Func) Run(ctx context.Context, p Publisher) error {
	iv, err := CheckInterval(f.Interval)
	if err != nil {
		return err
	}
	return tick(ctx, iv, p, func(now time.Time) ([]Sample, error) { return f.Collect(now), nil })
}
