package daemon_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/internal/testcert"
)

// do sends method path to the daemon's socket with the given Host and
// headers, without following redirects, and returns the status, the
// Location header and the body (first 64 KiB).
func (h *harness) do(method, path, host string, header http.Header) (int, string, string) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctxT(h.t), method, "http://"+h.addr+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header[k] = v
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return res.StatusCode, res.Header.Get("Location"), string(b)
}

// TestPublicURLPrefix: with publicUrl's path /ahpd/ everything is served
// under it — the page, /v1/ws, /v1/check, /healthz, /metrics — and
// nothing at the root but a redirect to it; publicUrl's host is an
// allowed Host and its origin an allowed Origin (issue 39).
func TestPublicURLPrefix(t *testing.T) {
	h := start(t, false, func(c *config.Config) { c.PublicURL = "http://proxy.example:8080/ahpd" })
	for _, c := range []struct {
		method, path string
		status       int
		location     string
	}{
		{"GET", "/ahpd/healthz", 200, ""},
		{"GET", "/ahpd/", 200, ""},
		{"GET", "/ahpd/metrics", 401, ""}, // there, and asks for a token
		{"POST", "/ahpd/v1/check", 200, ""},
		{"GET", "/ahpd", 307, "/ahpd/"},
		{"GET", "/", 303, "/ahpd/"},
		{"GET", "/healthz", 404, ""},
		{"GET", "/metrics", 404, ""},
		{"GET", "/v1/ws", 404, ""},
		{"GET", "/index.html", 404, ""},
	} {
		for _, host := range []string{h.addr, "proxy.example:8080", "proxy.example"} {
			got, loc, body := h.do(c.method, c.path, host, nil)
			if got != c.status || loc != c.location {
				t.Errorf("%s %s Host %s: %d Location %q, want %d %q (%s)", c.method, c.path, host, got, loc, c.status, c.location, strings.TrimSpace(body))
			}
		}
	}
	if got, _, _ := h.do("GET", "/ahpd/healthz", "evil.example", nil); got != http.StatusMisdirectedRequest {
		t.Errorf("a foreign Host under the prefix: %d, want 421", got)
	}
	// The page's WebSocket, as the proxy passes it: under the prefix,
	// with the public origin.
	c, _, err := client.Dial(ctxT(t), "ws://"+h.addr+"/ahpd/v1/ws", client.Options{Token: adminToken,
		Header: http.Header{"Origin": {"http://proxy.example:8080"}}})
	if err != nil {
		t.Fatalf("upgrade under the prefix with the public origin: %v", err)
	}
	c.Close()
	if _, res, err := websocket.Dial(ctxT(t), "ws://"+h.addr+"/ahpd/v1/ws", &websocket.DialOptions{Subprotocols: []string{"ahp.v1"},
		HTTPHeader: http.Header{"Origin": {"https://proxy.example:8080"}}}); err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("the public host with another scheme: err=%v, want 403", err)
	}
}

// TestAllowedOriginsAddToOwn: allowedOrigins adds to the daemon's own
// origins, as the README says; the links it prints keep working after it
// is set (issue 39). A refused Origin's 403 names the setting.
func TestAllowedOriginsAddToOwn(t *testing.T) {
	h := start(t, false, func(c *config.Config) {
		c.AllowedOrigins = []string{"proxy.example:443"}
		c.PublicURL = "https://terminals.example/"
	})
	_, port, _ := net.SplitHostPort(h.addr)
	for _, o := range []string{"http://" + h.addr, "http://localhost:" + port, "http://[::1]:" + port, "https://proxy.example", "http://proxy.example:443", "https://terminals.example", "https://terminals.example:443"} {
		ws, _, err := h.raw(http.Header{"Origin": {o}})
		if err != nil {
			t.Errorf("Origin %s refused: %v", o, err)
			continue
		}
		ws.CloseNow()
	}
	_, res, err := h.raw(http.Header{"Origin": {"https://evil.example"}})
	if err == nil || res == nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign Origin: err=%v, want 403", err)
	}
	_, _, body := h.do("GET", "/v1/ws", "", http.Header{"Origin": {"https://evil.example"}, "Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		"Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}})
	if !strings.Contains(body, "allowedOrigins") || !strings.Contains(body, `"evil.example:443"`) {
		t.Errorf("403 body %q: want it to name allowedOrigins and the value to add", body)
	}
	if _, _, body := h.do("GET", "/healthz", "evil.example", nil); !strings.Contains(body, "allowedHosts") || !strings.Contains(body, `"evil.example"`) {
		t.Errorf("421 body %q: want it to name allowedHosts and the value to add", body)
	}
}

// TestAccessCheck: /v1/check says, for the request's own Host and Origin,
// whether an upgrade would be refused, with the status and the setting;
// it answers a foreign Host too (with 200), and holds no secret.
func TestAccessCheck(t *testing.T) {
	h := start(t, false, nil)
	_, port, _ := net.SplitHostPort(h.addr)
	check := func(host, origin string) session.CheckResult {
		t.Helper()
		hd := http.Header{}
		if origin != "" {
			hd.Set("Origin", origin)
		}
		status, _, body := h.do("POST", "/v1/check", host, hd)
		if status != http.StatusOK {
			t.Fatalf("POST /v1/check Host %s Origin %s: %d %s", host, origin, status, body)
		}
		var res session.CheckResult
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if strings.Contains(body, adminToken) {
			t.Fatalf("the check's answer holds the admin token: %s", body)
		}
		return res
	}
	if r := check(h.addr, "http://localhost:"+port); !r.OK || r.Refused != "" {
		t.Errorf("own Host and Origin: %+v, want ok", r)
	}
	if r := check(h.addr, ""); !r.OK {
		t.Errorf("no Origin (a CLI): %+v, want ok", r)
	}
	r := check(h.addr, "https://proxy.example")
	if r.OK || r.Refused != "origin" || r.Status != 403 || r.Setting != "allowedOrigins" || !strings.Contains(r.Fix, `"proxy.example:443"`) || r.Origin != "https://proxy.example" {
		t.Errorf("a foreign Origin: %+v", r)
	}
	r = check("proxy.example", "https://proxy.example")
	if r.OK || r.Refused != "host" || r.Status != 421 || r.Setting != "allowedHosts" || !strings.Contains(r.Fix, `"proxy.example"`) {
		t.Errorf("a foreign Host: %+v", r)
	}
}

// TestTLSListener: with a certificate the listener speaks HTTPS and WSS
// only; a client that trusts the certificate initializes, one that does
// not fails the handshake, and the daemon's own origins are https ones
// (issue 39).
func TestTLSListener(t *testing.T) {
	cert, err := testcert.Write(t.TempDir(), "ahpd")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert.CertFile, cert.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	h := startWith(t, false, func(c *config.Config) { c.TLSCert, c.TLSKey = cert.CertFile, cert.KeyFile },
		func(o *daemon.Options) { o.TLS = &tls.Config{Certificates: []tls.Certificate{pair}} })
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}}}
	c, _, err := client.Dial(ctxT(t), "wss://"+h.addr+"/v1/ws", client.Options{Token: adminToken, HTTPClient: trusting,
		Header: http.Header{"Origin": {"https://" + h.addr}}})
	if err != nil {
		t.Fatalf("wss with the certificate trusted: %v", err)
	}
	c.Close()
	if _, _, err := client.Dial(ctxT(t), "wss://"+h.addr+"/v1/ws", client.Options{Token: adminToken, HTTPClient: &http.Client{Transport: &http.Transport{}}}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("wss without trusting the certificate: %v, want a certificate error", err)
	}
	// Plain HTTP on the TLS port gets no page.
	res, err := http.Get("http://" + h.addr + "/healthz")
	if err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP on the TLS listener: %s, want a refusal", res.Status)
		}
	}
	// A page the daemon served has an https origin; http is refused.
	_, resp, err := websocket.Dial(ctxT(t), "wss://"+h.addr+"/v1/ws", &websocket.DialOptions{Subprotocols: []string{"ahp.v1"}, HTTPClient: trusting,
		HTTPHeader: http.Header{"Origin": {"http://" + h.addr}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("http Origin on the TLS listener: err=%v, want 403", err)
	}
	// HTTP/2 is not offered: the WebSocket needs HTTP/1.1.
	conn, err := tls.Dial("tcp", h.addr, &tls.Config{RootCAs: cert.Pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Errorf("ALPN chose %q, want http/1.1", p)
	}
}
