package session

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// CheckPath is the access check, under the prefix beside v1/ws: GET or
// POST answers, for the request's own Host and Origin headers, whether an
// upgrade of /v1/ws would be refused and which setting admits them
// (CheckResult). The page asks it when its WebSocket fails before it
// opened: a browser reports a refused upgrade (403, 421) only as a close
// 1006, like a daemon that is down. It is POSTed so that the browser
// sends Origin, which it leaves out of a same-origin GET.
const CheckPath = "v1/check"

// CheckResult is /v1/check's answer. It echoes the request's own headers
// and names settings, nothing else: no list of what is allowed, no
// secret.
type CheckResult struct {
	// OK: an upgrade with these headers passes the Host and Origin
	// checks (a token is still needed).
	OK bool `json:"ok"`
	// Refused is "host" or "origin" (the first check that fails, in the
	// order the daemon makes them), "" when OK; Status is the HTTP status
	// of that refusal (421, 403), Setting the config key that admits the
	// value, and Fix says what to do in a sentence.
	Refused string `json:"refused,omitempty"`
	Status  int    `json:"status,omitempty"`
	Setting string `json:"setting,omitempty"`
	Fix     string `json:"fix,omitempty"`
	Host    string `json:"host"`
	Origin  string `json:"origin,omitempty"`
}

func (s *Server) serveCheck(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodHead {
		h.Set("Allow", "GET, POST, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	res := s.check(r.Host, r.Header.Get("Origin"))
	h.Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

// check answers /v1/check for a Host and an Origin header value.
func (s *Server) check(host, origin string) CheckResult {
	res := CheckResult{OK: true, Host: Truncate(host, 256), Origin: Truncate(origin, 256)}
	switch {
	case !s.hostAllowed(host):
		res = CheckResult{Refused: "host", Status: http.StatusMisdirectedRequest, Setting: "allowedHosts", Fix: hostFix(host), Host: res.Host, Origin: res.Origin}
	case !s.originValueAllowed(origin):
		res = CheckResult{Refused: "origin", Status: http.StatusForbidden, Setting: "allowedOrigins", Fix: originFix(origin), Host: res.Host, Origin: res.Origin}
	}
	return res
}

// hostRefusal is the body of a 421: the Host and the setting to change.
func hostRefusal(host string) string {
	return "host not allowed (see allowedHosts): " + hostFix(host)
}

func hostFix(host string) string {
	name := hostName(host)
	if name == "" {
		return "the request has no Host header"
	}
	return fmt.Sprintf("add %q to allowedHosts in ahpd's config file, or set publicUrl (--public-url) to the URL you open (https://%s/…); a proxy may also pass the listen address as Host",
		Truncate(name, 128), Truncate(name, 128))
}

// originRefusal is the body of a 403: the Origin and the setting to change.
func originRefusal(origin string) string {
	return "origin not allowed (see allowedOrigins): " + originFix(origin)
}

func originFix(origin string) string {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Sprintf("Origin %q is not an http or https origin", Truncate(origin, 128))
	}
	hp := originHostPort(u.Scheme, u.Host)
	return fmt.Sprintf("add %q to allowedOrigins in ahpd's config file, or set publicUrl (--public-url) to the URL you open (%s://%s/…)",
		Truncate(hp, 128), u.Scheme, Truncate(u.Host, 128))
}
