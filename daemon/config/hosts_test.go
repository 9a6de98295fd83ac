package config

import "testing"

func TestConfigAllowedHosts(t *testing.T) {
	s, err := loadText(t, "allowedHosts = [\"terminals.example.com\", 'b.example']\n", DefaultSettings(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.AllowedHosts; len(got) != 2 || got[0] != "terminals.example.com" || got[1] != "b.example" {
		t.Fatalf("allowedHosts = %q", got)
	}
	for _, bad := range []string{"https://a.example", "a.example:443", "[::1]", ""} {
		if _, err := loadText(t, "allowedHosts = [\""+bad+"\"]\n", DefaultSettings(), nil); err == nil {
			t.Errorf("allowedHosts %q accepted, want an error", bad)
		}
	}
}
