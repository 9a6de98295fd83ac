package ctl

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// remote is how a viewer command (attach) reaches a daemon without its
// control socket: the daemon's URL and a token, from flags or the
// environment. The token is never taken from the command line, where
// other users see it (ps, shell history).
type remote struct {
	url, tokenFile *string
}

func remoteFlags(fs *flag.FlagSet) remote {
	return remote{
		url:       fs.String("url", "", "the daemon's `URL` (http://HOST:PORT or ws://HOST:PORT/v1/ws; default $AHP_URL): connect without the control socket"),
		tokenFile: fs.String("token-file", "", "read the token for --url from `FILE` (default: $AHP_TOKEN)"),
	}
}

// maxTokenFile bounds what --token-file reads.
const maxTokenFile = 4096

// resolve returns the WebSocket URL and the token, and whether a URL was
// given at all (false: use the control socket).
func (r remote) resolve(getenv func(string) string) (wsURL, token string, ok bool, err error) {
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
		b, err := readTokenFile(*r.tokenFile)
		if err != nil {
			return "", "", false, err
		}
		token = b
	case getenv("AHP_TOKEN") != "":
		token = strings.TrimSpace(getenv("AHP_TOKEN"))
	default:
		return "", "", false, usagef("--url needs a token: --token-file FILE or AHP_TOKEN (never on the command line); mint one with 'ahpctl tokens create'")
	}
	return wsURL, token, true, nil
}

// websocketURL turns http://HOST:PORT (or https, ws, wss; a path other
// than / is kept) into the daemon's WebSocket URL.
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
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/ws"
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", usagef("--url %q: no user, query or fragment (the token goes in --token-file or AHP_TOKEN)", raw)
	}
	return u.String(), nil
}

func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
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
