package wire

import "strings"

// Close reasons of the daemon's 1008 closes (PROTOCOL.md §7). Each reason
// the daemon writes starts with one of these and may go on with detail
// ("output stalled for 30s (maxOutputStall)"); the client classifies a
// close by them (Transient), so the two cannot drift.
const (
	// The connection's own trouble: a client may come back at once.
	ReasonOutputStalled  = "output stalled"             // maxOutputStall, or a ping that could not be written
	ReasonNoPong         = "no pong or traffic"         // three heartbeat intervals of silence
	ReasonTooMany        = "too many"                   // a bound: inbound bytes waiting, unread responses, connections per token
	ReasonMemoryBudget   = "daemon memory budget spent" // maxTotalBufferedBytes; try again later
	ReasonTokenExpired   = "token expired"              // a client with a way to get a new credential uses it
	ReasonTokenRevoked   = "token revoked"              // an operator's decision
	ReasonUnauthorized   = "unauthorized"               // initialize with an unknown, used or revoked token
	ReasonKickedFallback = "disconnected by operator"   // a kick without a reason (an operator's decision)
)

// transientReasons are the reasons of closes that are not an operator's
// decision.
var transientReasons = []string{ReasonOutputStalled, ReasonNoPong, ReasonTooMany, ReasonMemoryBudget, ReasonTokenExpired}

// Transient reports whether a 1008 close reason is one the daemon gives
// for a connection's own trouble (a stall, a silent peer, a bound reached,
// an expired token) rather than for an operator's decision (a kick, whose
// reason is the operator's text, or a revocation).
func Transient(reason string) bool {
	for _, p := range transientReasons {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}
