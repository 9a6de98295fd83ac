package client

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestClientVersion: initialize carries Options.ClientVersion (ahpctl's
// build version), "dev" when unset.
func TestClientVersion(t *testing.T) {
	got := make(chan map[string]string, 2)
	url := fakeHost(t, func(req hostRequest) string {
		var p struct {
			Client map[string]string `json:"client"`
		}
		_ = json.Unmarshal(req.Params, &p)
		got <- p.Client
		return `"error":{"code":-32001,"message":"unauthorized"}`
	})
	for _, tc := range []struct{ version, want string }{{"1.2.3", "1.2.3"}, {"", "dev"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, err := Dial(ctx, url, Options{ClientName: "ahpctl attach", ClientVersion: tc.version})
		cancel()
		if err == nil {
			t.Fatal("Dial succeeded against a host that refuses")
		}
		c := <-got
		if c["name"] != "ahpctl attach" || c["version"] != tc.want {
			t.Errorf("ClientVersion %q: initialize sent client %v, want version %q", tc.version, c, tc.want)
		}
	}
}
