package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
)

// TestViewerManagesChannels: channels/create (a login shell, for role
// control over all channels), channels/restart (an exited terminal reruns
// its command under its URI) and channels/close (role control over the
// channel), with their refusals, over real PTYs.
func TestViewerManagesChannels(t *testing.T) {
	h := start(t, true, nil)
	ctx := ctxT(t)
	dial := func(tok string) *client.Conn {
		t.Helper()
		c, _, err := client.Dial(ctx, h.url, client.Options{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	call := func(c *client.Conn, method string, params any) (map[string]any, int) {
		t.Helper()
		var res map[string]any
		err := c.Call(ctx, method, params, &res)
		return res, rpcCode(err)
	}
	channels := func(c *client.Conn) []string { return listedChannels(t, c) }

	admin := dial(adminToken)
	res, code := call(admin, "channels/create", map[string]any{"type": "terminal", "id": "new", "title": "New"})
	if code != 0 || res["channel"] != "ahp-terminal:/new" {
		t.Fatalf("channels/create = %v, code %d", res, code)
	}
	if got := channels(admin); !slices.Equal(got, []string{"ahp-terminal:/new"}) {
		t.Fatalf("channels/list = %v", got)
	}
	if _, code := call(admin, "channels/create", map[string]any{"type": "terminal", "id": "new"}); code == 0 {
		t.Fatal("a second ahp-terminal:/new was created")
	}
	if _, code := call(admin, "channels/create", map[string]any{"type": "tcp"}); code != flow.ErrCodeInvalidParams {
		t.Fatalf("channels/create tcp: code %d, want -32602", code)
	}
	scoped, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleControl, Channels: []string{"ahp-terminal:/new"}})
	view, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleView})
	for _, tok := range []string{scoped, view} {
		if _, code := call(dial(tok), "channels/create", map[string]any{"type": "terminal"}); code != flow.ErrCodeForbidden {
			t.Fatalf("channels/create without control over all: code %d, want -32003", code)
		}
	}

	// A terminal that appends a line to a file and exits 5: a restart
	// runs it again under the same URI.
	file := filepath.Join(t.TempDir(), "runs")
	if _, err := h.srv.CreateTerminal(service.TerminalSpec{ID: "job", Command: []string{"/bin/sh", "-c", "echo run >> " + file + "; exit 5"}}); err != nil {
		t.Fatal(err)
	}
	waitRuns := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			b, _ := os.ReadFile(file)
			ch, ok := h.srv.Registry().Get("ahp-terminal:/job")
			if strings.Count(string(b), "run\n") == n && ok && ch.State() == "exited" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("want %d runs and the terminal exited: %q", n, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitRuns(1)
	if _, code := call(dial(view), "channels/restart", map[string]any{"channel": "ahp-terminal:/job"}); code != flow.ErrCodeForbidden {
		t.Fatalf("restart by a view token: code %d, want -32003", code)
	}
	if _, code := call(dial(scoped), "channels/restart", map[string]any{"channel": "ahp-terminal:/job"}); code != flow.ErrCodeForbidden {
		t.Fatalf("restart by a token of another channel: code %d, want -32003", code)
	}
	if res, code := call(admin, "channels/restart", map[string]any{"channel": "ahp-terminal:/job"}); code != 0 || res["channel"] != "ahp-terminal:/job" {
		t.Fatalf("channels/restart = %v, code %d", res, code)
	}
	waitRuns(2)
	if _, code := call(admin, "channels/restart", map[string]any{"channel": "ahp-terminal:/new"}); code != flow.ErrCodeInvalidParams {
		t.Fatalf("restart of a running terminal: code %d, want -32602", code)
	}
	if _, code := call(admin, "channels/restart", map[string]any{"channel": "ahp-terminal:/gone"}); code != flow.ErrCodeChannelNotFound {
		t.Fatalf("restart of a missing channel: code %d, want -32002", code)
	}

	// Close: the scoped control token closes its channel.
	if _, code := call(dial(view), "channels/close", map[string]any{"channel": "ahp-terminal:/new"}); code != flow.ErrCodeForbidden {
		t.Fatalf("close by a view token: code %d, want -32003", code)
	}
	if _, code := call(dial(scoped), "channels/close", map[string]any{"channel": "ahp-terminal:/new"}); code != 0 {
		t.Fatalf("close by its control token: code %d", code)
	}
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(channels(admin), []string{"ahp-terminal:/job"}); {
		if time.Now().After(deadline) {
			t.Fatalf("after channels/close: %v", channels(admin))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listedChannels returns the URIs channels/list gives c, sorted.
func listedChannels(t *testing.T, c *client.Conn) []string {
	t.Helper()
	var l struct {
		Channels []struct {
			Channel string `json:"channel"`
		} `json:"channels"`
	}
	if err := c.Call(ctxT(t), "channels/list", map[string]any{}, &l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ch := range l.Channels {
		out = append(out, ch.Channel)
	}
	slices.Sort(out)
	return out
}

// TestChannelsWatch: after channels/watch a connection gets
// channels/changed when a channel is created or closed, at most about
// every 250 ms however many changes there are; one that did not ask gets
// none.
func TestChannelsWatch(t *testing.T) {
	h := start(t, false, nil)
	ws := h.rawInit(adminToken)
	quiet := h.rawInit(adminToken)
	if err := ws.Write(ctxT(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"channels/watch","params":{}}`)); err != nil {
		t.Fatal(err)
	}
	if got := readJSON(t, ws); !strings.Contains(got, `"id":1`) || !strings.Contains(got, `"result":{}`) {
		t.Fatalf("channels/watch: %s", got)
	}
	if _, err := h.srv.CreateTerminal(service.TerminalSpec{ID: "w"}); err != nil {
		t.Fatal(err)
	}
	if got := readJSON(t, ws); got != `{"jsonrpc":"2.0","method":"channels/changed","params":{}}` {
		t.Fatalf("after a create: %s", got)
	}
	// A burst of 20 changes within ~0.1 s comes as one or two.
	began := time.Now()
	for i := range 10 {
		id := "b" + strconv.Itoa(i)
		if _, err := h.srv.CreateTerminal(service.TerminalSpec{ID: id}); err != nil {
			t.Fatal(err)
		}
		if err := h.srv.CloseChannel("ahp-terminal:/" + id); err != nil {
			t.Fatal(err)
		}
	}
	burst := time.Since(began)
	// The first comes within 10 s however loaded the machine; the short
	// window only ends the count of any more.
	n := 0
	for {
		wait := 600 * time.Millisecond
		if n == 0 {
			wait = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		_, b, err := ws.Read(ctx)
		cancel()
		if err != nil {
			break
		}
		if !strings.Contains(string(b), "channels/changed") {
			t.Fatalf("unexpected %s", b)
		}
		n++
	}
	if max := 2 + int(burst/(250*time.Millisecond)); n < 1 || n > max {
		t.Fatalf("%d channels/changed for 20 changes in %v, want 1 to %d", n, burst, max)
	}
	// The connection that did not watch got nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, b, err := quiet.Read(ctx); err == nil {
		t.Fatalf("a connection that did not watch got %s", b)
	}
}
