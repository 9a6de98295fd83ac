package daemon_test

import (
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/flow"
)

// TestRecordingsOfLongChannelIDs: a terminal id of 128 characters, the
// longest, names its recordings whole, so a token scoped to a terminal
// whose id is a prefix of it does not see them, and the terminal's own
// token does.
func TestRecordingsOfLongChannelIDs(t *testing.T) {
	h := start(t, false, nil)
	short := strings.Repeat("p", 100)
	long := short + strings.Repeat("q", 28)
	a := fakeRecording(t, h, long, 3, "screen of the long one")
	ctx := ctxT(t)
	viewShort, _ := h.srv.Tokens().Mint(auth.Grant{Channels: []string{"ahp-terminal:/" + short}, Role: auth.RoleView})
	viewLong, _ := h.srv.Tokens().Mint(auth.Grant{Channels: []string{"ahp-terminal:/" + long}, Role: auth.RoleView})

	cs := h.dial(viewShort)
	var l recList
	if err := cs.Call(ctx, "recordings/list", map[string]any{}, &l); err != nil || len(l.Recordings) != 0 {
		t.Fatalf("token of %s…: recordings/list = %+v, %v; want none", short[:8], l.Recordings, err)
	}
	var r recRead
	if err := cs.Call(ctx, "recordings/read", map[string]any{"id": a.ID}, &r); rpcCode(err) != flow.ErrCodeChannelNotFound {
		t.Fatalf("token of %s…: read of the other terminal's recording: %v, want -32002", short[:8], err)
	}

	if !strings.HasPrefix(a.ID, long+"-") {
		t.Fatalf("recording id %q does not start with the channel id %q", a.ID, long)
	}
	cl := h.dial(viewLong)
	l = recList{}
	if err := cl.Call(ctx, "recordings/list", map[string]any{"channel": "ahp-terminal:/" + long}, &l); err != nil ||
		len(l.Recordings) != 1 || l.Recordings[0].ID != a.ID || l.Recordings[0].Channel != "ahp-terminal:/"+long {
		t.Fatalf("token of the terminal: recordings/list = %+v, %v; want %s of ahp-terminal:/%s", l.Recordings, err, a.ID, long)
	}
	if err := cl.Call(ctx, "recordings/read", map[string]any{"id": a.ID}, &r); err != nil || !r.EOF || int64(len(r.Data)) != a.Bytes {
		t.Fatalf("token of the terminal: read = %d bytes, eof %v, %v; want %d bytes", len(r.Data), r.EOF, err, a.Bytes)
	}
}
