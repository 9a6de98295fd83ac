package client

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// smallWritesSlow delays the writes shorter than 32 bytes (a WebSocket
// ping's frame; the upgrade request and initialize are longer) by
// slowWrite: far longer than any round trip of initialize, even on a
// loaded machine under the race detector.
type smallWritesSlow struct{ net.Conn }

const slowWrite = 2 * time.Second

func (c smallWritesSlow) Write(b []byte) (int, error) {
	if len(b) < 32 {
		time.Sleep(slowWrite)
	}
	return c.Conn.Write(b)
}

// TestSlowPingKeepsConnection: Dial's round-trip ping outlasting its wait
// (its frame's write alone takes slowWrite, initialize a fraction of
// that) leaves the connection open and usable, with initialize's round
// trip. coder/websocket closes a connection whose write's context ends
// mid-write, so the ping must not carry Dial's wait as its deadline.
func TestSlowPingKeepsConnection(t *testing.T) {
	url := fakeHost(t, func(hostRequest) string { return `"result":{"protocolVersion":"ahp/1"}` })
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return smallWritesSlow{c}, nil
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := Dial(ctx, url, Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if rtt := conn.RTT(); rtt >= slowWrite {
		t.Fatalf("round trip %v: the slow ping's, want initialize's", rtt)
	}
	time.Sleep(slowWrite + 100*time.Millisecond) // the ping's write is over
	var res map[string]any
	if err := conn.Call(ctx, "channels/list", map[string]any{}, &res); err != nil {
		t.Fatalf("a request after a slow ping: %v", err)
	}
}
