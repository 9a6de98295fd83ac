package config

import (
	"strings"
	"testing"
)

func TestPublicURL(t *testing.T) {
	for _, c := range []struct {
		in, base, path string
	}{
		{"", "http://127.0.0.1:7681/", "/"},
		{"https://example.com", "https://example.com/", "/"},
		{"https://example.com/ahpd", "https://example.com/ahpd/", "/ahpd/"},
		{"http://127.0.0.1:8080/a/b/", "http://127.0.0.1:8080/a/b/", "/a/b/"},
	} {
		cfg := Config{Listen: "127.0.0.1:7681", PublicURL: c.in}
		if err := cfg.WithDefaults().Validate(); err != nil {
			t.Errorf("publicUrl %q: %v", c.in, err)
			continue
		}
		if got := cfg.BaseURL("127.0.0.1:7681"); got != c.base {
			t.Errorf("publicUrl %q: BaseURL = %q, want %q", c.in, got, c.base)
		}
		if got := cfg.BasePath(); got != c.path {
			t.Errorf("publicUrl %q: BasePath = %q, want %q", c.in, got, c.path)
		}
	}
	for _, bad := range []string{"example.com/ahpd", "ftp://example.com/", "https://", "https://u:p@example.com/", "https://example.com/?a=1", "https://example.com/#x", "https://example.com/a/../b/", "https://example.com//a/"} {
		if _, err := ParsePublicURL(bad); err == nil {
			t.Errorf("publicUrl %q accepted, want an error", bad)
		}
		if _, err := loadText(t, "publicUrl = \""+bad+"\"\n", DefaultSettings(), nil); err == nil || !strings.Contains(err.Error(), "publicUrl") {
			t.Errorf("config publicUrl %q: %v, want an error naming the key", bad, err)
		}
	}
	// The local URL names the listener (loopback for an unspecified
	// address), with https under TLS and the prefix.
	cfg := Config{PublicURL: "https://example.com/ahpd/", TLSCert: "c", TLSKey: "k"}
	if got := cfg.LocalBaseURL("0.0.0.0:7681"); got != "https://127.0.0.1:7681/ahpd/" {
		t.Errorf("LocalBaseURL = %q", got)
	}
	if got := (Config{}).LocalBaseURL("[::]:80"); got != "http://[::1]:80/" {
		t.Errorf("LocalBaseURL = %q", got)
	}
}

func TestTLSKeysBothOrNeither(t *testing.T) {
	for _, c := range []struct{ cert, key, want string }{
		{"c.pem", "", "tlsCert: needs tlsKey"},
		{"", "k.pem", "tlsKey: needs tlsCert"},
	} {
		err := Config{TLSCert: c.cert, TLSKey: c.key}.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tlsCert %q tlsKey %q: %v, want %q", c.cert, c.key, err, c.want)
		}
	}
	s, err := loadText(t, "tlsCert = \"/x/c.pem\"\ntlsKey = '/x/k.pem'\ninsecureListen = true\n", DefaultSettings(), nil)
	if err != nil || !s.TLS() || !s.InsecureListen {
		t.Fatalf("%+v, %v", s.Config, err)
	}
}
