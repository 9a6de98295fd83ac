package daemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/metrics"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
	"github.com/ahp-dev/ahpd/tcp"
)

// The TCP control plane over the real control socket: the allow-list and
// its persistence, and TCP channels dialed to real sockets on 127.0.0.1.

// startTCPControl runs a daemon whose config file is configFile (see
// daemon.Options.ConfigFile) and whose allow-list starts as rules.
func startTCPControl(t *testing.T, configFile string, rules ...string) (*harness, ahpv1.TCPServiceClient, *ctl) {
	t.Helper()
	var rs []tcp.Rule
	for _, s := range rules {
		r, err := tcp.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	h := startWith(t, false, func(c *config.Config) { c.TCPAllow = rs }, func(o *daemon.Options) { o.ConfigFile = configFile })
	c := h.control()
	return h, ahpv1.NewTCPServiceClient(c.cc), c
}

// listen127 is a TCP listener on 127.0.0.1 that accepts and holds
// connections until the test ends.
func listen127(t *testing.T) (port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().(*net.TCPAddr).Port
}

// closedPort is a port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// stateRules returns the rules of the daemon's TCP rules file in
// stateDir, and checks that its mode is 0600.
func stateRules(t *testing.T, stateDir string) []string {
	t.Helper()
	path := filepath.Join(stateDir, "tcp-allow.json")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	var f struct {
		Version int      `json:"version"`
		Rules   []string `json:"rules"`
	}
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	return f.Rules
}

// TestControlTCPRulesKept: AllowTCP keeps a rule in the state directory
// and never writes the config file; DenyTCP removes a rule from the file
// that holds it, the config file's tcpAllow key included, and a rule
// never allowed is NOT_FOUND.
func TestControlTCPRulesKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	orig := "# my settings\nmaxSubscriptions = 7  # keep\ntcpAllow = [\"10.0.0.0/8:22\"]\n"
	if err := os.WriteFile(path, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	h, tc, _ := startTCPControl(t, path, "10.0.0.0/8:22")
	state := h.srv.Config().StateDir
	stateFile := filepath.Join(state, "tcp-allow.json")
	ctx := ctxT(t)

	res, err := tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "127.0.0.1:3000"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Added || !res.Persisted || res.PersistError != "" || res.StateFile != stateFile || res.ConfigFile != "" || res.Rule != "127.0.0.1:3000" || res.Hint != "" {
		t.Fatalf("AllowTCP = %v", res)
	}
	res, err = tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "10.1.2.3/8:443-80"})
	if err == nil || status.Code(err) != codes.InvalidArgument || badField(err) != "rule" || !strings.Contains(err.Error(), `"10.1.2.3/8:443-80"`) {
		t.Fatalf("AllowTCP(empty range) = %v, %v; want INVALID_ARGUMENT naming the rule", res, err)
	}
	if res, err = tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "10.1.2.3/8:80-443"}); err != nil || res.Rule != "10.0.0.0/8:80-443" || !res.Added {
		t.Fatalf("AllowTCP(prefix) = %v, %v; want it masked", res, err)
	}
	if res, err = tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "127.0.0.1:3000"}); err != nil || res.Added || !res.Persisted || res.StateFile != stateFile {
		t.Fatalf("AllowTCP again = %v, %v; want added false, persisted", res, err)
	}
	// A rule the config file holds is not written anywhere.
	if res, err = tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "10.0.0.0/8:22"}); err != nil || res.Added || !res.Persisted || res.ConfigFile != path || res.StateFile != "" {
		t.Fatalf("AllowTCP(a config rule) = %v, %v", res, err)
	}
	list, err := tc.ListTCPRules(ctx, &ahpv1.ListTCPRulesRequest{})
	if err != nil || !slices.Equal(list.Rules, []string{"10.0.0.0/8:22", "127.0.0.1:3000", "10.0.0.0/8:80-443"}) ||
		!slices.Equal(list.Sources, []string{"config", "state", "state"}) || list.ConfigFile != path || list.StateFile != stateFile {
		t.Fatalf("ListTCPRules = %v, %v", list, err)
	}
	if got := stateRules(t, state); !slices.Equal(got, []string{"127.0.0.1:3000", "10.0.0.0/8:80-443"}) {
		t.Fatalf("state file rules = %v", got)
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Fatalf("tcp allow wrote the config file:\n%s", b)
	}

	dres, err := tc.DenyTCP(ctx, &ahpv1.DenyTCPRequest{Rule: "127.0.0.1:3000"})
	if err != nil || !dres.Removed || !dres.Persisted || dres.StateFile != stateFile || dres.ConfigFile != "" {
		t.Fatalf("DenyTCP = %v, %v", dres, err)
	}
	if got := stateRules(t, state); !slices.Equal(got, []string{"10.0.0.0/8:80-443"}) {
		t.Fatalf("state file rules after deny = %v", got)
	}
	_, err = tc.DenyTCP(ctx, &ahpv1.DenyTCPRequest{Rule: "127.0.0.1:3000"})
	wantCode(t, err, codes.NotFound, "127.0.0.1:3000 is not allowed")
	_, err = tc.DenyTCP(ctx, &ahpv1.DenyTCPRequest{Rule: "192.0.2.1:1"})
	wantCode(t, err, codes.NotFound, "192.0.2.1:1 is not allowed")
	if _, err := tc.DenyTCP(ctx, &ahpv1.DenyTCPRequest{Rule: "nope"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("DenyTCP(nope) = %v", err)
	}
	// A config rule: the operator's file loses that rule and nothing else.
	dres, err = tc.DenyTCP(ctx, &ahpv1.DenyTCPRequest{Rule: "10.0.0.0/8:22"})
	if err != nil || !dres.Removed || !dres.Persisted || dres.ConfigFile != path || dres.StateFile != "" {
		t.Fatalf("DenyTCP(a config rule) = %v, %v", dres, err)
	}
	b, _ := os.ReadFile(path)
	if want := "# my settings\nmaxSubscriptions = 7  # keep\ntcpAllow = []\n"; string(b) != want {
		t.Fatalf("config file after deny:\n%s\nwant:\n%s", b, want)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Fatalf("config file mode %v, want 0640", fi.Mode().Perm())
	}

	// The next daemon with this state directory has the rule kept there.
	h2 := startWith(t, false, func(c *config.Config) { c.StateDir = state }, func(o *daemon.Options) { o.ConfigFile = "none" })
	tc2 := ahpv1.NewTCPServiceClient(h2.control().cc)
	if list, err := tc2.ListTCPRules(ctx, &ahpv1.ListTCPRulesRequest{}); err != nil || !slices.Equal(list.Rules, []string{"10.0.0.0/8:80-443"}) || !slices.Equal(list.Sources, []string{"state"}) {
		t.Fatalf("the next daemon's rules = %v, %v", list, err)
	}
}

// TestControlTCPStateFileUntrusted: a rules file that is not private to
// the daemon's user, or does not parse, is not used and is set aside.
func TestControlTCPStateFileUntrusted(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		mode os.FileMode
	}{
		{"group-readable", `{"version":1,"rules":["127.0.0.1:1"]}`, 0o640},
		{"bad rule", `{"version":1,"rules":["127.0.0.1:0"]}`, 0o600},
		{"unknown version", `{"version":2,"rules":["127.0.0.1:1"]}`, 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			path := filepath.Join(state, "tcp-allow.json")
			if err := os.WriteFile(path, []byte(tc.data), tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tc.mode)
			h := startWith(t, false, func(c *config.Config) { c.StateDir = state }, func(o *daemon.Options) { o.ConfigFile = "none" })
			if rules, _ := h.srv.TCPRules(ctxT(t)); len(rules) != 0 {
				t.Fatalf("rules in force = %v, want none", rules)
			}
			if b, err := os.ReadFile(path + ".bad"); err != nil || string(b) != tc.data {
				t.Fatalf("not set aside: %v", err)
			}
		})
	}
}

// TestControlTCPNameRuleHint: a name rule's response says which address
// rule a dial needs too.
func TestControlTCPNameRuleHint(t *testing.T) {
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", "localhost")
	if err != nil || !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.String() == "127.0.0.1" }) {
		t.Skipf("localhost does not resolve to 127.0.0.1 here: %v %v", addrs, err)
	}
	_, tc, _ := startTCPControl(t, filepath.Join(t.TempDir(), "c.toml"))
	ctx := ctxT(t)
	res, err := tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "LocalHost:3000"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rule != "localhost:3000" || !strings.Contains(res.Hint, "localhost:3000 resolves to 127.0.0.1") || !strings.Contains(res.Hint, "dials need an address rule too: ahpctl tcp allow 127.0.0.1:3000") {
		t.Fatalf("AllowTCP(name) = %v", res)
	}
	if _, err := tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "127.0.0.0/8:3000"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "[::1]:3000"}); err != nil {
		t.Fatal(err)
	}
	if res, _ = tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "localhost:3000"}); res.Hint != "" {
		t.Fatalf("hint with the addresses allowed = %q, want none", res.Hint)
	}
}

// TestControlTCPNotPersisted: a state file that cannot be written leaves
// the change in force and says why.
func TestControlTCPNotPersisted(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	h := startWith(t, false, func(c *config.Config) { c.StateDir = gone }, func(o *daemon.Options) { o.ConfigFile = "none" })
	tc := ahpv1.NewTCPServiceClient(h.control().cc)
	ctx := ctxT(t)
	res, err := tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: "127.0.0.1:1"})
	if err != nil || !res.Added || res.Persisted || !strings.Contains(res.PersistError, gone) {
		t.Fatalf("AllowTCP = %v, %v; want added, not persisted, naming the file", res, err)
	}
	if list, _ := tc.ListTCPRules(ctx, &ahpv1.ListTCPRulesRequest{}); !slices.Equal(list.Rules, []string{"127.0.0.1:1"}) || !slices.Equal(list.Sources, []string{""}) {
		t.Fatalf("rules = %v", list)
	}
}

// TestControlTCPNoConfigFileWritten: a daemon that loaded no config file
// writes none, in the user's config directory or elsewhere.
func TestControlTCPNoConfigFileWritten(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("CONFIGURATION_DIRECTORY", "")
	h, tc, _ := startTCPControl(t, "")
	res, err := tc.AllowTCP(ctxT(t), &ahpv1.AllowTCPRequest{Rule: "127.0.0.1:8080"})
	if want := filepath.Join(h.srv.Config().StateDir, "tcp-allow.json"); err != nil || !res.Persisted || res.StateFile != want || res.ConfigFile != "" {
		t.Fatalf("AllowTCP = %v, %v; want kept in %s", res, err, want)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Fatalf("the home directory got %v", entries)
	}
	if got := config.FindFile(""); got != "" && strings.HasPrefix(got, home) {
		t.Fatalf("FindFile = %q", got)
	}
}

func TestControlCreateTCP(t *testing.T) {
	port := listen127(t)
	closed := closedPort(t)
	h, tc, c := startTCPControl(t, "none", "127.0.0.1:"+strconv.Itoa(closed))
	ctx := ctxT(t)

	_, err := tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: uint32(port)})
	target := "127.0.0.1:" + strconv.Itoa(port)
	wantCode(t, err, codes.PermissionDenied, "tcp target "+target)
	if _, err := tc.AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: target}); err != nil {
		t.Fatal(err)
	}
	res, err := tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: uint32(port), Id: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Channel.Uri != "ahp-tcp:/web" || res.Channel.Type != "tcp" || res.Channel.Tcp.GetTarget() != target || res.Channel.Tcp.GetRemote() != target {
		t.Fatalf("CreateTCP = %v", res.Channel)
	}
	_, err = tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: uint32(port), Id: "web"})
	wantCode(t, err, codes.AlreadyExists, "ahp-tcp:/web")
	_, err = tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: uint32(port), Id: "a/b"})
	wantCode(t, err, codes.InvalidArgument, "invalid channel id")
	for _, p := range []uint32{0, 70000} {
		_, err = tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: p})
		wantCode(t, err, codes.InvalidArgument, "port")
	}
	// A generated id; both are listed with their targets.
	if res, err = tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: uint32(port)}); err != nil || !strings.HasPrefix(res.Channel.Uri, "ahp-tcp:/") {
		t.Fatalf("CreateTCP without id = %v, %v", res, err)
	}
	list, err := c.channels.ListChannels(ctx, &ahpv1.ListChannelsRequest{Type: "tcp"})
	if err != nil || len(list.Channels) != 2 || list.Channels[0].Uri != "ahp-tcp:/web" || list.Channels[0].Tcp.GetTarget() != target || list.Channels[0].Tcp.GetPhase() == "" {
		t.Fatalf("ListChannels = %v, %v", list, err)
	}
	got, err := c.channels.GetChannel(ctx, &ahpv1.GetChannelRequest{Channel: "ahp-tcp:/web"})
	if err != nil || got.Channel.Tcp.GetTarget() != target {
		t.Fatalf("GetChannel = %v, %v", got, err)
	}

	// A refused dial: UNAVAILABLE with CONNECT_FAILED, and no channel.
	_, err = tc.CreateTCP(ctx, &ahpv1.CreateTCPRequest{Host: "127.0.0.1", Port: uint32(closed), Id: "refused"})
	wantCode(t, err, codes.Unavailable, "connection refused")
	st, _ := status.FromError(err)
	if !slices.ContainsFunc(st.Details(), func(d any) bool {
		ei, ok := d.(*errdetails.ErrorInfo)
		return ok && ei.Reason == "CONNECT_FAILED"
	}) {
		t.Fatalf("refused dial: details %v, want ErrorInfo CONNECT_FAILED", st.Details())
	}
	if _, err := c.channels.GetChannel(ctx, &ahpv1.GetChannelRequest{Channel: "ahp-tcp:/refused"}); status.Code(err) != codes.NotFound {
		t.Fatalf("the refused channel is listed: %v", err)
	}

	// /metrics counts the TCP channels.
	body := scrapeMetrics(t, h)
	for _, want := range []string{"ahpd_tcp_channels 2", `ahpd_tcp_bytes_total{direction="in"} 0`, `ahpd_tcp_bytes_total{direction="out"} 0`, "ahpd_tcp_resumes_total 0"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
	if _, err := c.channels.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: "ahp-tcp:/web"}); err != nil {
		t.Fatal(err)
	}
	if st := h.srv.TCPStats(ctx); st.Channels != 1 {
		t.Fatalf("TCPStats after a close = %+v, want 1 channel", st)
	}
}

// scrapeMetrics reads the daemon's /metrics once.
func scrapeMetrics(t *testing.T, h *harness) []byte {
	t.Helper()
	srv := httptest.NewServer(metrics.Handler(h.srv.Service, metrics.Options{Public: true}))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return body
}
