package ctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// remote is how a viewer command (attach) reaches a daemon without its
// control socket: the daemon's URL and a token, from flags or the
// environment. The token is never taken from the command line, where
// other users see it (ps, shell history).
type remote struct {
	url, tokenFile *string
	caFile         *string // --ca-file (remote_tls.go)
}

func remoteFlags(fs *flag.FlagSet) remote {
	return remote{
		url:       fs.String("url", "", "the daemon's `URL` (http(s)://HOST:PORT, behind a proxy its publicUrl such as https://HOST/ahpd/, or ws(s)://HOST:PORT/v1/ws; default $AHP_URL): connect without the control socket"),
		tokenFile: fs.String("token-file", "", "read the token for --url from `FILE` (default: $AHP_TOKEN)"),
		caFile:    fs.String("ca-file", "", "trust only the certificates in PEM `FILE` for an https:// --url (a self-signed daemon's certificate; default $AHP_CA_FILE, else the system's roots)"),
	}
}

// maxTokenFile bounds what --token-file reads.
const maxTokenFile = 4096

// resolve returns the WebSocket URL and the token, and whether a URL was
// given at all (false: use the control socket). A token file that others
// may read gets a warning on stderr.
func (r remote) resolve(getenv func(string) string, stderr io.Writer) (wsURL, token string, ok bool, err error) {
	raw := *r.url
	if raw == "" {
		raw = getenv("AHP_URL")
	}
	if raw == "" {
		if *r.tokenFile != "" {
			return "", "", false, usagef("--token-file needs --url (or AHP_URL)")
		}
		return "", "", false, nil
	}
	if wsURL, err = websocketURL(raw); err != nil {
		return "", "", false, err
	}
	switch {
	case *r.tokenFile != "":
		b, err := readTokenFile(*r.tokenFile, stderr)
		if err != nil {
			return "", "", false, err
		}
		token = b
	case getenv("AHP_TOKEN") != "":
		token = strings.TrimSpace(getenv("AHP_TOKEN"))
	default:
		return "", "", false, usagef("--url needs a token: --token-file FILE or AHP_TOKEN (never on the command line); mint one with 'ahpctl token create'")
	}
	return wsURL, token, true, nil
}

// websocketURL turns http://HOST:PORT (or https, ws, wss) into the
// daemon's WebSocket URL: a path ending in /v1/ws is kept, any other is
// the prefix the daemon serves under (its publicUrl behind a proxy,
// http://HOST/ahpd/), which v1/ws is under.
func websocketURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", usagef("--url %q: want http://HOST:PORT", raw)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", usagef("--url %q: the scheme must be http, https, ws or wss", raw)
	}
	if !strings.HasSuffix(u.Path, "/v1/ws") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/ws"
		u.RawPath = ""
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", usagef("--url %q: no user, query or fragment (the token goes in --token-file or AHP_TOKEN)", raw)
	}
	return u.String(), nil
}

// readTokenFile reads the token in path. Like ssh with a private key, it
// warns when the file's mode lets its group or others at it (anyone who
// can read it can use the token), but reads it.
func readTokenFile(path string, stderr io.Writer) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(stderr, "ahpctl: warning: --token-file %s is open to others (mode %04o): whoever can read it can use the token; run chmod 600 %s\n",
			path, fi.Mode().Perm(), path)
	}
	b := make([]byte, maxTokenFile+1)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	if n > maxTokenFile {
		return "", fmt.Errorf("--token-file %s: longer than %d bytes: not a token", path, maxTokenFile)
	}
	tok := strings.TrimSpace(string(b[:n]))
	if tok == "" {
		return "", errors.New("--token-file " + path + ": empty")
	}
	return tok, nil
}

// connError is why a connection of attach or forward to the daemon
// failed or ended, in words: the close codes (PROTOCOL.md §1, and 1012
// for an upgrade in place), the 1008 reasons (internal/wire), the
// JSON-RPC error codes (§7) and the HTTP statuses of a refused upgrade
// each become a sentence, without the WebSocket library's wording or a
// bare code. Final ones are those a retry cannot fix: a refused
// credential, a refused Origin or Host, an operator's kick or
// revocation; attach and forward stop at once on them, as ssh and kubectl
// do.
type connError struct {
	msg   string
	final bool
	err   error
}

func (e *connError) Error() string { return e.msg }
func (e *connError) Unwrap() error { return e.err }

// renewHint says where a new token comes from.
const renewHint = "get a new one with 'ahpctl token create' (or 'ahpctl open') on the daemon's host"

// explainConn returns err, an error of a connection to the daemon (its
// dial, initialize, a subscribe, or its end), in words. remote is true
// when the credential is the token given with --url (which ahpctl cannot
// renew), false when ahpctl mints tickets over the control socket.
func explainConn(err error, remote bool) *connError {
	var ce *connError
	if errors.As(err, &ce) {
		return ce
	}
	final := func(format string, args ...any) *connError {
		return &connError{msg: fmt.Sprintf(format, args...), final: true, err: err}
	}
	transient := func(format string, args ...any) *connError {
		return &connError{msg: fmt.Sprintf(format, args...), err: err}
	}
	refused := func(detail string) *connError {
		if !remote {
			return final("the daemon refused the ticket ahpctl minted (%s)", detail)
		}
		if strings.Contains(detail, "expired") {
			return final("the token expired: %s", renewHint)
		}
		return final("the token was refused (revoked, expired or wrong): %s", renewHint)
	}

	var rt *client.ResumeTimeoutError
	if errors.As(err, &rt) {
		p := explainConn(rt.Err, remote)
		return &connError{msg: fmt.Sprintf("could not resume within %v: %s", rt.Budget, p.msg), final: true, err: err}
	}
	var he *client.HandshakeError
	var rpc *client.Error
	var closeErr websocket.CloseError
	var reset *client.ResetError
	switch {
	case errors.As(err, &he):
		return explainHandshake(he, err)
	case errors.As(err, &rpc):
		switch rpc.Code {
		case flow.ErrCodeUnauthorized:
			return refused(rpc.Message)
		case flow.ErrCodeForbidden, flow.ErrCodeChannelNotFound, flow.ErrCodeResumeFailed:
			return final("%s", rpc.Message)
		case flow.ErrCodeMethodNotFound, flow.ErrCodeInvalidParams, flow.ErrCodeInvalidRequest, flow.ErrCodeParse:
			return final("the daemon does not understand this ahpctl (%s; an older or newer ahpd?)", rpc.Message)
		}
		return transient("%s", rpc.Message) // limit exceeded, channel busy, connect failed: the daemon's words
	case errors.As(err, &closeErr):
		return explainClose(closeErr, remote, err)
	case errors.As(err, &reset):
		switch reset.Code {
		case flow.CodeForbidden:
			return final("the daemon no longer lets this credential see the channel (%s)", reset.Message)
		case flow.CodeTCPReset:
			return final("the target reset the connection (%s)", reset.Message)
		case flow.CodeSuperseded:
			return final("another client resumed this channel")
		case flow.CodeChannelClosed:
			return final("the channel was closed (%s)", reset.Message)
		}
		return transient("the daemon reset the subscription (%s: %s)", reset.Code, reset.Message)
	case errors.Is(err, context.DeadlineExceeded):
		return transient("no answer from the daemon in time (--timeout)")
	}
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	switch {
	case errors.As(err, &certErr), errors.As(err, &unknownCA), errors.As(err, &hostErr):
		return final("the daemon's TLS certificate is not trusted (%v): for a self-signed one, give it with --ca-file FILE", innermost(err))
	case errors.As(err, &recordErr):
		return final("the daemon does not speak TLS there (use an http:// or ws:// URL)")
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return transient("cannot resolve %s (%s)", dnsErr.Name, dnsErr.Err)
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		addr := ""
		if opErr.Addr != nil {
			addr = " at " + opErr.Addr.String()
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return transient("nothing listens%s (connection refused): is ahpd running?", addr)
		}
		return transient("cannot reach the daemon%s (%v)", addr, innermost(err))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		return transient("the connection was lost")
	}
	return transient("the connection failed (%v)", innermost(err))
}

// explainHandshake is explainConn for an upgrade the daemon or a proxy
// refused with an HTTP status: ahpd answers 403 for an Origin its
// allowedOrigins does not hold and 421 for a Host its allowedHosts does
// not (docs/security.md); a proxy may answer 401, 404 or 5xx.
func explainHandshake(he *client.HandshakeError, err error) *connError {
	status := fmt.Sprintf("HTTP %d", he.StatusCode)
	if he.Body != "" && !strings.HasPrefix(he.Body, "<") {
		status += ": " + he.Body
	} else if t := http.StatusText(he.StatusCode); t != "" {
		status += " " + t
	}
	final := func(format string, args ...any) *connError {
		return &connError{msg: fmt.Sprintf(format, args...), final: true, err: err}
	}
	switch he.StatusCode {
	case http.StatusUnauthorized, http.StatusProxyAuthRequired:
		return final("a proxy in front of the daemon wants credentials (%s): ahpctl cannot give them; reach the daemon without it, or let the proxy pass /v1/ws through", status)
	case http.StatusForbidden:
		if strings.Contains(he.Body, "allowedOrigins") { // the daemon's body names the fix
			return final("the daemon refused the Origin a proxy in front of it adds (HTTP 403: %s)", he.Body)
		}
		return final("the daemon refused the connection's Origin (%s): a proxy in front of it adds an Origin header; add that origin to allowedOrigins in the daemon's config, or have the proxy pass the request without it", status)
	case http.StatusMisdirectedRequest:
		if strings.Contains(he.Body, "allowedHosts") {
			return final("the daemon refused the host name in the URL (HTTP 421: %s)", he.Body)
		}
		return final("the daemon does not serve the host name in the URL (%s): add it to allowedHosts in the daemon's config, or use its IP address", status)
	case http.StatusNotFound:
		return final("no AHP/1 endpoint at this URL (%s): check --url (the daemon's http://HOST:PORT)", status)
	}
	if he.StatusCode >= 500 || he.StatusCode == http.StatusTooManyRequests || he.StatusCode == http.StatusRequestTimeout {
		return &connError{msg: fmt.Sprintf("the daemon is unavailable (%s)", status), err: err}
	}
	return final("the daemon refused the connection (%s)", status)
}

// protocolCloses are the 1008 reasons of the daemon's closes for a
// client that broke the protocol (daemon/session): not an operator's
// decision, and a retry would break it again.
var protocolCloses = []string{"bad initialize", "unsupported protocol version", "message before initialize", "initialize not received", "subprotocol "}

// explainClose is explainConn for a close frame from the daemon.
func explainClose(ce websocket.CloseError, remote bool, err error) *connError {
	final := func(format string, args ...any) *connError {
		return &connError{msg: fmt.Sprintf(format, args...), final: true, err: err}
	}
	transient := func(format string, args ...any) *connError {
		return &connError{msg: fmt.Sprintf(format, args...), err: err}
	}
	switch ce.Code {
	case websocket.StatusNormalClosure:
		return transient("the daemon closed the connection")
	case websocket.StatusGoingAway:
		return transient("the daemon shut down")
	case websocket.StatusServiceRestart:
		return transient("ahpd is upgrading in place")
	case websocket.StatusUnsupportedData:
		return final("the daemon refused a binary message (%s)", ce.Reason)
	case websocket.StatusMessageTooBig:
		return transient("the daemon closed the connection: a message was larger than it takes")
	case websocket.StatusInternalError:
		return transient("the daemon closed the connection after an internal error")
	case websocket.StatusPolicyViolation:
	default:
		return transient("the daemon closed the connection (close code %d%s)", ce.Code, withReason(ce.Reason))
	}
	r := ce.Reason
	switch {
	case strings.HasPrefix(r, wire.ReasonTokenRevoked):
		if remote {
			return final("the token was revoked: %s", renewHint)
		}
		return final("the credential was revoked by the operator (token revoke)")
	case strings.HasPrefix(r, wire.ReasonTokenExpired):
		if remote {
			return final("the token expired: %s", renewHint)
		}
		return transient("the reconnect token expired")
	case strings.HasPrefix(r, wire.ReasonUnauthorized):
		if remote {
			return final("the token was refused (revoked, expired or wrong): %s", renewHint)
		}
		return final("the daemon refused the ticket ahpctl minted")
	case wire.Transient(r):
		return transient("the daemon closed the connection: %s", r)
	case r == wire.ReasonKickedFallback || r == "":
		return final("disconnected by the operator (viewers kick)")
	}
	for _, p := range protocolCloses {
		if strings.HasPrefix(r, p) {
			return final("the daemon closed the connection: %s", r)
		}
	}
	return final("disconnected by the operator (viewers kick: %s)", r)
}

func withReason(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

// innermost returns the error at the end of err's chain: the cause
// without the layers' wording ("failed to WebSocket dial: failed to send
// handshake request: Get …: dial tcp …: connect: connection refused").
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
