package daemon_test

import (
	"net"
	"net/http"
	"testing"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon/config"
)

// get sends a GET to the daemon's socket with the given Host header.
func (h *harness) getHost(path, host string, header http.Header) int {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctxT(h.t), http.MethodGet, "http://"+h.addr+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestHostHeaderCheck: a request whose Host is not ours (DNS rebinding)
// gets 421 on every path; IP literals, localhost, *.localhost and
// allowedHosts pass (issue 12 §5).
func TestHostHeaderCheck(t *testing.T) {
	h := start(t, false, func(c *config.Config) { c.AllowedHosts = []string{"Terminals.Example.com"} })
	_, port, _ := net.SplitHostPort(h.addr)
	for _, path := range []string{"/", "/healthz", "/metrics", "/v1/ws", "/index.html"} {
		for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port} {
			if got := h.getHost(path, host, nil); got != http.StatusMisdirectedRequest {
				t.Errorf("GET %s Host %s: %d, want 421", path, host, got)
			}
		}
	}
	for _, host := range []string{h.addr, "localhost:" + port, "LOCALHOST.:" + port, "[::1]:" + port, "app.localhost:" + port, "terminals.example.com", "terminals.example.com:443"} {
		if got := h.getHost("/healthz", host, nil); got != http.StatusOK {
			t.Errorf("GET /healthz Host %s: %d, want 200", host, got)
		}
	}
	// The WebSocket upgrade is refused before Origin or token are looked at.
	_, res, err := websocket.Dial(ctxT(t), h.url, &websocket.DialOptions{
		Subprotocols: []string{"ahp.v1"},
		Host:         "evil.example:" + port,
	})
	if err == nil || res == nil || res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("upgrade with a foreign Host: err=%v res=%v, want 421", err, res)
	}
	// ahpctl's and the page's Hosts keep working.
	for _, host := range []string{h.addr, "localhost:" + port} {
		ws, _, err := websocket.Dial(ctxT(t), h.url, &websocket.DialOptions{Subprotocols: []string{"ahp.v1"}, Host: host})
		if err != nil {
			t.Fatalf("upgrade with Host %s: %v", host, err)
		}
		ws.CloseNow()
	}
}

// TestOriginSchemeChecked: the default Origin list matches http only (the
// daemon serves plain HTTP); allowedOrigins match http or https; other
// schemes never.
func TestOriginSchemeChecked(t *testing.T) {
	h := start(t, false, nil)
	for _, o := range []string{"ftp://" + h.addr, "https://" + h.addr, "ws://" + h.addr, "null", "file://" + h.addr} {
		if _, res, err := h.raw(http.Header{"Origin": {o}}); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %s: err=%v res=%v, want 403", o, err, res)
		}
	}
	ws, _, err := h.raw(http.Header{"Origin": {"http://" + h.addr}})
	if err != nil {
		t.Fatalf("own Origin refused: %v", err)
	}
	ws.CloseNow()

	p := start(t, false, func(c *config.Config) { c.AllowedOrigins = []string{"proxy.example:443"} })
	for o, want := range map[string]bool{"https://proxy.example": true, "https://proxy.example:443": true, "ftp://proxy.example:443": false, "gopher://proxy.example:443": false} {
		ws, res, err := p.raw(http.Header{"Origin": {o}})
		if want && err != nil {
			t.Errorf("Origin %s: %v, want accepted", o, err)
		}
		if !want && (err == nil || res == nil || res.StatusCode != http.StatusForbidden) {
			t.Errorf("Origin %s: err=%v, want 403", o, err)
		}
		if ws != nil {
			ws.CloseNow()
		}
	}
}
