package linkemu

import "time"

// Schedule returns the delays, from the moment each was read, that a
// direction with params p on the connection numbered conn gives to
// chunks of size bytes read at the given moments.
func Schedule(p Params, conn uint64, size int, reads []time.Time) []time.Duration {
	d := newDir(&pair{done: make(chan struct{})}, p.withDefaults(), &dirCounters{}, conn, nil, nil)
	out := make([]time.Duration, len(reads))
	for i, t := range reads {
		out[i] = d.schedule(t, size).Sub(t)
	}
	return out
}
