package session

import (
	"sync"
	"time"
)

// rateLogInterval is the shortest gap between two lines of one rateLog.
const rateLogInterval = time.Second

// rateLog limits a log line to one per rateLogInterval and counts the
// lines it suppressed meanwhile. The zero value is ready to use.
type rateLog struct {
	mu         sync.Mutex // guards last and suppressed
	last       time.Time
	suppressed int64
}

// allow reports whether a line may be logged at now and, if so, how many
// were suppressed since the last one.
func (r *rateLog) allow(now time.Time) (suppressed int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.last.IsZero() && now.Sub(r.last) < rateLogInterval {
		r.suppressed++
		return 0, false
	}
	n := r.suppressed
	r.last, r.suppressed = now, 0
	return n, true
}
