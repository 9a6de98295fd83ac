package client

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ahp-dev/ahpd/internal/cork"
	"github.com/ahp-dev/ahpd/internal/unsent"
)

// dialSocket dials the socket under a Conn's cork (tests wrap it).
var dialSocket = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext

// corkingClient returns an HTTP client like http.DefaultClient whose
// connection is a cork.Conn, and the function that returns that
// connection once the client dialled it (nil before). The WebSocket
// library masks a client's frames (RFC 6455 §5.3) through its 4 KiB write
// buffer and so writes a frame in 4 KiB pieces: an upload's 24–96 KiB
// messages cost 6–24 writes each, and as many wake-ups of the daemon.
// Conn corks the socket around each message it sends. tlsConf, when not
// nil, is the TLS configuration of a wss:// URL (nil: the system's roots).
func corkingClient(tlsConf *tls.Config) (*http.Client, func() *cork.Conn) {
	var (
		mu   sync.Mutex
		last *cork.Conn
	)
	t := http.DefaultTransport.(*http.Transport).Clone()
	if tlsConf != nil {
		// TLS over the cork: what it holds are records.
		t.TLSClientConfig = tlsConf.Clone()
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialSocket(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// What the kernel holds unsent waits ahead of the next keystroke
		// or credit this client writes (internal/unsent).
		unsent.Limit(c, unsent.Bytes)
		cc := cork.New(c)
		mu.Lock()
		last = cc
		mu.Unlock()
		return cc, nil
	}
	return &http.Client{Transport: t}, func() *cork.Conn {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}
