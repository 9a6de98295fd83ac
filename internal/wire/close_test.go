package wire

import "testing"

func TestTransient(t *testing.T) {
	for reason, want := range map[string]bool{
		ReasonOutputStalled + " for 30s (maxOutputStall)":    true,
		ReasonNoPong + " for 45s":                            true,
		ReasonTooMany + " unread responses":                  true,
		ReasonMemoryBudget + " (maxTotalBufferedBytes)":      true,
		ReasonTokenExpired:                                   true,
		ReasonTokenRevoked:                                   false,
		ReasonUnauthorized:                                   false,
		ReasonKickedFallback:                                 false,
		"maintenance at 10:00":                               false, // an operator's kick reason
		"token revoked, then " + ReasonOutputStalled + "...": false, // only a prefix counts
	} {
		if got := Transient(reason); got != want {
			t.Errorf("Transient(%q) = %v, want %v", reason, got, want)
		}
	}
}
