package ctl

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// TestExplainConn: every way a connection of attach or forward fails or
// ends is said in words, with no library wording ("failed to get
// reader", "StatusPolicyViolation", "failed to WebSocket dial") and no
// bare JSON-RPC code, and is final exactly when a retry cannot fix it:
// a refused credential, Origin or Host, an operator's kick or
// revocation. An upgrade in place is named however deep its close error
// is wrapped.
func TestExplainConn(t *testing.T) {
	closeErr := func(code websocket.StatusCode, reason string) error {
		// As the client's reader returns it.
		return fmt.Errorf("failed to get reader: %w", websocket.CloseError{Code: code, Reason: reason})
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7681},
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	dialErr := fmt.Errorf("failed to WebSocket dial: failed to send handshake request: Get \"http://127.0.0.1:7681/v1/ws\": %w", refused)
	handshake := func(code int, body string) error {
		return &client.HandshakeError{StatusCode: code, Body: body, Err: fmt.Errorf("failed to WebSocket dial: expected handshake response status code 101 but got %d", code)}
	}
	for _, tc := range []struct {
		err    error
		remote bool
		want   string
		final  bool
	}{
		{closeErr(websocket.StatusServiceRestart, "host upgrading"), false, "ahpd is upgrading in place", false},
		{fmt.Errorf("subscription: %w", closeErr(websocket.StatusServiceRestart, "host upgrading")), true, "ahpd is upgrading in place", false},
		{closeErr(websocket.StatusGoingAway, "host shutting down"), true, "the daemon shut down", false},
		{closeErr(websocket.StatusPolicyViolation, "test kick"), false, "disconnected by the operator (viewers kick: test kick)", true},
		{closeErr(websocket.StatusPolicyViolation, "disconnected by operator"), true, "disconnected by the operator (viewers kick)", true},
		{closeErr(websocket.StatusPolicyViolation, "token revoked"), true, "the token was revoked: get a new one with 'ahpctl token create'", true},
		{closeErr(websocket.StatusPolicyViolation, "token revoked"), false, "revoked by the operator", true},
		{closeErr(websocket.StatusPolicyViolation, "token expired"), true, "the token expired: get a new one", true},
		{closeErr(websocket.StatusPolicyViolation, "token expired"), false, "the reconnect token expired", false}, // a fresh ticket
		{closeErr(websocket.StatusPolicyViolation, "output stalled for 1m0s (maxOutputStall)"), true, "the daemon closed the connection: output stalled for 1m0s", false},
		{closeErr(websocket.StatusPolicyViolation, "no pong or traffic for 45s"), true, "no pong or traffic", false},
		{closeErr(websocket.StatusPolicyViolation, "too many unread responses: the client is not reading"), true, "too many unread", false},
		{closeErr(websocket.StatusPolicyViolation, "daemon memory budget spent (maxBufferedBytesPerToken, maxTotalBufferedBytes); try again later"), true, "memory budget", false},
		{closeErr(websocket.StatusPolicyViolation, "unsupported protocol version"), true, "the daemon closed the connection: unsupported protocol version", true},
		{closeErr(websocket.StatusInternalError, "internal error"), true, "internal error", false},
		{closeErr(websocket.StatusMessageTooBig, ""), true, "larger than it takes", false},
		{&client.Error{Code: -32001, Message: "unauthorized: unknown, used or revoked token"}, true, "the token was refused (revoked, expired or wrong): get a new one with 'ahpctl token create' (or 'ahpctl open')", true},
		{&client.Error{Code: -32001, Message: "unauthorized: token expired"}, true, "the token expired", true},
		{&client.Error{Code: -32001, Message: "unauthorized: unknown, used or revoked token"}, false, "the daemon refused the ticket ahpctl minted", true},
		{&client.Error{Code: -32002, Message: `channel not found: "ahp-terminal:/x"`}, true, `channel not found: "ahp-terminal:/x"`, true},
		{&client.Error{Code: -32003, Message: "not allowed: tcp target 127.0.0.1:9 (allow it with: ahpctl tcp allow 127.0.0.1:9)"}, true, "not allowed: tcp target 127.0.0.1:9", true},
		{&client.Error{Code: -32008, Message: "connect failed: 127.0.0.1:9: connection refused"}, true, "connect failed: 127.0.0.1:9: connection refused", false},
		{&client.Error{Code: -32601, Message: "method not found"}, true, "does not understand this ahpctl", true},
		{handshake(403, "origin not allowed"), true, "refused the connection's Origin (HTTP 403: origin not allowed)", true},
		{handshake(403, `origin not allowed (see allowedOrigins): add "h:80" to allowedOrigins in ahpd's config file`), true, `refused the Origin a proxy in front of it adds (HTTP 403: origin not allowed (see allowedOrigins): add "h:80"`, true},
		{handshake(421, "misdirected"), true, "add it to allowedHosts", true},
		{handshake(421, `host not allowed (see allowedHosts): add "h" to allowedHosts in ahpd's config file`), true, `refused the host name in the URL (HTTP 421: host not allowed (see allowedHosts): add "h"`, true},
		{handshake(401, "<html>"), true, "(HTTP 401 Unauthorized)", true},
		{handshake(404, ""), true, "check --url", true},
		{handshake(502, "<html><head>"), true, "the daemon is unavailable (HTTP 502 Bad Gateway)", false},
		{handshake(503, "shutting down"), true, "the daemon is unavailable (HTTP 503: shutting down)", false},
		{dialErr, true, "nothing listens at 127.0.0.1:7681 (connection refused): is ahpd running?", false},
		{&client.ResetError{Code: "forbidden", Message: "token scope"}, true, "no longer lets", true},
		{errors.New("EOF"), true, "the connection failed (EOF)", false},
		{fmt.Errorf("failed to WebSocket dial: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), true,
			"the daemon's TLS certificate is not trusted (x509: certificate signed by unknown authority): for a self-signed one, give it with --ca-file FILE", true},
	} {
		got := explainConn(tc.err, tc.remote)
		if !strings.Contains(got.msg, tc.want) || got.final != tc.final {
			t.Errorf("explainConn(%v, remote %v) = %q, final %v; want %q, final %v", tc.err, tc.remote, got.msg, got.final, tc.want, tc.final)
		}
		for _, internal := range []string{"failed to", "Status", "code -3", "status = ", "handshake"} {
			if strings.Contains(got.msg, internal) {
				t.Errorf("explainConn(%v) = %q: says %q", tc.err, got.msg, internal)
			}
		}
	}
}
