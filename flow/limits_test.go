package flow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

func TestValidate(t *testing.T) {
	const safe = flow.MaxSafeInteger
	tests := []struct {
		l         flow.ReceiveLimits
		wantField string // "" means valid
	}{
		{limits(1024, 1024, 1024), ""},
		{limits(256<<10, 16<<10, 1<<20), ""},
		{limits(safe, safe, safe), ""},
		{limits(0, 1024, 1024), "windowBytes"},
		{limits(-1, 1024, 1024), "windowBytes"},
		{limits(safe+1, 1024, 1024), "windowBytes"},
		{limits(4096, 0, 4096), "maximumFrameBytes"},
		{limits(4096, -5, 4096), "maximumFrameBytes"},
		{limits(safe, safe+1, safe), "maximumFrameBytes"},
		{limits(4096, 1023, 4096), "maximumFrameBytes"},
		{limits(4096, 1024, 0), "maximumMessageBytes"},
		{limits(4096, 1024, safe+1), "maximumMessageBytes"},
		{limits(2047, 2048, 4096), "windowBytes"},
		{limits(4096, 2048, 2047), "maximumMessageBytes"},
		{limits(1023, 1023, 1023), "maximumFrameBytes"},
	}
	for _, tt := range tests {
		err := tt.l.Validate()
		if tt.wantField == "" {
			if err != nil {
				t.Errorf("%+v.Validate() = %v, want nil", tt.l, err)
			}
			continue
		}
		var le *flow.LimitError
		if !errors.As(err, &le) || le.Field != tt.wantField {
			t.Errorf("%+v.Validate() = %v, want *LimitError for %s", tt.l, err, tt.wantField)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantField) {
			t.Errorf("%+v.Validate().Error() = %q, want it to name %s", tt.l, err, tt.wantField)
		}
	}
}

func TestNegotiate(t *testing.T) {
	max := limits(1<<20, 64<<10, 4<<20)
	tests := []struct {
		req, want flow.ReceiveLimits
		wantErr   string
	}{
		{req: limits(256<<10, 16<<10, 1<<20), want: limits(256<<10, 16<<10, 1<<20)},
		{req: limits(8<<20, 16<<10, 1<<20), want: limits(1<<20, 16<<10, 1<<20)},
		{req: limits(8<<20, 1<<20, 64<<20), want: limits(1<<20, 64<<10, 4<<20)},
		{req: limits(2048, 1024, 1<<30), want: limits(2048, 1024, 4<<20)},
		{req: limits(1<<20, 1024, 1024), want: limits(1<<20, 1024, 1024)},
		{req: limits(1024, 512, 1024), wantErr: "maximumFrameBytes"},
		{req: limits(1024, 2048, 4096), wantErr: "windowBytes"},
	}
	for _, tt := range tests {
		got, err := flow.Negotiate(tt.req, max)
		if tt.wantErr != "" {
			var le *flow.LimitError
			if !errors.As(err, &le) || le.Field != tt.wantErr {
				t.Errorf("Negotiate(%+v) = %+v, %v; want *LimitError for %s", tt.req, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Negotiate(%+v) = %+v, %v; want %+v", tt.req, got, err, tt.want)
			continue
		}
		// Lowers, never raises; the result is valid.
		if got.WindowBytes > tt.req.WindowBytes || got.MaximumFrameBytes > tt.req.MaximumFrameBytes ||
			got.MaximumMessageBytes > tt.req.MaximumMessageBytes {
			t.Errorf("Negotiate(%+v) = %+v raised a value", tt.req, got)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("Negotiate(%+v) = %+v, which is invalid: %v", tt.req, got, err)
		}
	}
}
