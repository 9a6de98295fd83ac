package ctl

import (
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// TestAttachReceiveLimits: attach asks for AttachWindow (8 MiB), never
// below the host's default unless --window says so, and the host's
// defaults (nil) when it stated none; the clamps to the host's maximum and
// to a frame are client.WithWindow's (client.TestWithWindow).
func TestAttachReceiveLimits(t *testing.T) {
	def := flow.ReceiveLimits{WindowBytes: 1 << 20, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 1 << 20}
	maxi := flow.ReceiveLimits{WindowBytes: 64 << 20, MaximumFrameBytes: 1 << 20, MaximumMessageBytes: 16 << 20}
	for _, tc := range []struct {
		name         string
		def, max     flow.ReceiveLimits
		want, window int64
		nilLimits    bool
	}{
		{"default", def, maxi, 0, 8 << 20, false},
		{"host maximum below", def, flow.ReceiveLimits{WindowBytes: 4 << 20}, 0, 4 << 20, false},
		{"host default above", flow.ReceiveLimits{WindowBytes: 48 << 20, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 1 << 20}, maxi, 0, 48 << 20, false},
		{"--window below the default", def, maxi, 256 << 10, 256 << 10, false},
		{"no host defaults", flow.ReceiveLimits{}, maxi, 0, 0, true},
	} {
		got := receiveLimits(tc.def, tc.max, tc.want)
		if tc.nilLimits {
			if got != nil {
				t.Errorf("%s: %+v, want nil (the host's defaults)", tc.name, *got)
			}
			continue
		}
		if got == nil {
			t.Fatalf("%s: nil", tc.name)
		}
		if got.WindowBytes != tc.window || got.MaximumFrameBytes != tc.def.MaximumFrameBytes || got.MaximumMessageBytes != tc.def.MaximumMessageBytes {
			t.Errorf("%s: %+v, want window %d with the default frame and message sizes", tc.name, *got, tc.window)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s: %+v: %v", tc.name, *got, err)
		}
	}
}
