package ctl

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"strings"
)

// maxCAFile bounds what --ca-file reads.
const maxCAFile = 1 << 20

// tlsConfig returns the TLS configuration for the WebSocket URL of --url:
// with --ca-file (or AHP_CA_FILE) the certificates in that PEM file are
// the only roots trusted — the explicit trust a daemon's self-signed
// certificate needs, as curl's --cacert; without it nil, the system's
// roots. A --ca-file with a ws:// URL is bad usage.
func (r remote) tlsConfig(wsURL string, getenv func(string) string) (*tls.Config, error) {
	file, flag := *r.caFile, true
	if file == "" {
		file, flag = getenv("AHP_CA_FILE"), false
	}
	if file == "" {
		return nil, nil
	}
	if !strings.HasPrefix(wsURL, "wss://") {
		if !flag {
			return nil, nil // the environment's, for https URLs only
		}
		return nil, usagef("--ca-file is for an https:// --url; %s is not", wsURL)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCAFile+1))
	if err != nil {
		return nil, fmt.Errorf("--ca-file %s: %w", file, err)
	}
	if len(b) > maxCAFile {
		return nil, fmt.Errorf("--ca-file %s: larger than %d bytes", file, maxCAFile)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// localTLS returns the TLS configuration for the WebSocket URL the daemon
// gave over the control socket (GetInfo's websocket_url): its own
// listener on this machine, reached without checking its certificate.
// Whoever can open the control socket has every right already, and the
// certificate, made for the name browsers use, rarely names the loopback
// address in that URL (docs/protocol-decisions.md, "Reverse proxies and
// TLS"). nil for a ws:// URL.
func localTLS(wsURL string) *tls.Config {
	if !strings.HasPrefix(wsURL, "wss://") {
		return nil
	}
	return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} // the daemon's own listener, found through the control socket
}
