package ctl

import (
	"errors"
	"fmt"
	"testing"

	"github.com/coder/websocket"
)

// TestLostHow: the status line of attach and forward names an upgrade in
// place (close 1012, however deep the close error is wrapped) and gives
// any other loss's error as it is.
func TestLostHow(t *testing.T) {
	upgrade := websocket.CloseError{Code: websocket.StatusServiceRestart, Reason: "host upgrading"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{upgrade, "ahpd is upgrading in place"},
		{fmt.Errorf("failed to get reader: %w", upgrade), "ahpd is upgrading in place"},
		{fmt.Errorf("subscription: %w", fmt.Errorf("failed to get reader: %w", upgrade)), "ahpd is upgrading in place"},
		{websocket.CloseError{Code: websocket.StatusGoingAway, Reason: "host shutting down"},
			`connection lost (status = StatusGoingAway and reason = "host shutting down")`},
		{errors.New("EOF"), "connection lost (EOF)"},
	} {
		if got := lostHow(tc.err); got != tc.want {
			t.Errorf("lostHow(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
