package ctl_test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tcp verbs against the real binaries: the allow-list, its config
// and state files across restarts and reloads, and channels dialed to
// 127.0.0.1.

type tcpListJSON struct {
	Rules      []string `json:"rules"`
	Sources    []string `json:"sources"`
	ConfigFile string   `json:"configFile"`
	StateFile  string   `json:"stateFile"`
}

func (d *daemonProc) tcpRules() tcpListJSON {
	d.t.Helper()
	var l tcpListJSON
	if err := json.Unmarshal([]byte(d.mustCtl("tcp", "list", "-o", "json")), &l); err != nil {
		d.t.Fatal(err)
	}
	return l
}

// waitLog waits until the daemon's log has n lines containing s.
func (d *daemonProc) waitLog(s string, n int) {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(d.logs(), s) < n {
		if time.Now().After(deadline) {
			d.t.Fatalf("the daemon did not log %q %d times:\n%s", s, n, d.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2ETCPRulesKeptAndReload: tcp allow keeps its rules in the state
// directory and never writes the config file; tcp deny removes a rule from
// the file that holds it and says which; a restart and a reload put both
// files' rules in force.
func TestE2ETCPRulesKeptAndReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "config.toml")
	orig := "# operator's notes\nmaxSubscriptions = 9\ntcpAllow = [\"[::1]:22\"]\n"
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state", "tcp-allow.json")
	d := startDaemonIn(t, dir, []string{"--config", path}, nil)

	if out := d.mustCtl("tcp", "allow", "127.0.0.1:3000"); out != "allowed 127.0.0.1:3000 (saved in "+state+")\n" {
		t.Fatalf("tcp allow printed %q", out)
	}
	if out, errOut, code := d.ctl("tcp", "allow", "127.0.0.1:3000"); code != 0 || out != "127.0.0.1:3000 was allowed already (saved in "+state+")\n" || errOut != "" {
		t.Fatalf("tcp allow again: exit %d, %q, %q", code, out, errOut)
	}
	if out := d.mustCtl("tcp", "allow", "[::1]:22"); out != "[::1]:22 was allowed already (in the config file "+path+")\n" {
		t.Fatalf("tcp allow of the config file's rule printed %q", out)
	}
	d.mustCtl("tcp", "allow", "10.9.9.9/8:80-443")
	if l := d.tcpRules(); !slices.Equal(l.Rules, []string{"[::1]:22", "127.0.0.1:3000", "10.0.0.0/8:80-443"}) ||
		!slices.Equal(l.Sources, []string{"config", "state", "state"}) || l.ConfigFile != path || l.StateFile != state {
		t.Fatalf("tcp list = %+v", l)
	}
	table := d.mustCtl("tcp", "list")
	if !regexp.MustCompile(`(?m)^RULE +FROM +MATCHES$`).MatchString(table) || !regexp.MustCompile(`(?m)^\[::1\]:22 +config +addresses$`).MatchString(table) ||
		!regexp.MustCompile(`(?m)^10\.0\.0\.0/8:80-443 +state +addresses$`).MatchString(table) ||
		!strings.Contains(table, "config: "+path) || !strings.Contains(table, "state:  "+state) {
		t.Fatalf("tcp list table:\n%s", table)
	}
	// A bad rule is bad usage, and the message names it.
	for _, bad := range []string{"nope", "localhost:1-9", "127.0.0.1:0"} {
		if _, errOut, code := d.ctl("tcp", "allow", bad); code != 2 || !strings.Contains(errOut, strconv.Quote(bad)) {
			t.Fatalf("tcp allow %s: exit %d, stderr %q; want 2 naming the rule", bad, code, errOut)
		}
	}
	if _, errOut, code := d.ctl("tcp", "deny", "x:y"); code != 2 || !strings.Contains(errOut, `"x:y"`) {
		t.Fatalf("tcp deny x:y: exit %d, stderr %q", code, errOut)
	}
	if out := d.mustCtl("tcp", "deny", "10.0.0.0/8:80-443"); out != "denied 10.0.0.0/8:80-443 (removed from "+state+")\n" {
		t.Fatalf("tcp deny printed %q", out)
	}
	// A rule that is not allowed is an error, as kubectl's "not found".
	for _, rule := range []string{"10.0.0.0/8:80-443", "192.0.2.7:99"} {
		if out, errOut, code := d.ctl("tcp", "deny", rule); code != 1 || out != "" || !strings.Contains(errOut, rule+" is not allowed") {
			t.Fatalf("tcp deny %s (never allowed): exit %d, %q, %q; want exit 1 saying it is not allowed", rule, code, out, errOut)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Fatalf("tcp allow|deny wrote the config file:\n%s", b)
	}

	// A restart puts both files' rules in force.
	d.stop()
	d = startDaemonIn(t, dir, []string{"--config", path}, nil)
	if l := d.tcpRules(); !slices.Equal(l.Rules, []string{"[::1]:22", "127.0.0.1:3000"}) {
		t.Fatalf("after restart: tcp list = %+v", l)
	}
	// SIGHUP reads both again: the config file's, edited meanwhile, then
	// the state file's.
	edited := strings.Replace(orig, `tcpAllow = ["[::1]:22"]`, "tcpAllow = [\n  \"[::1]:22\",\n  \"localhost:5432\",\n]", 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLog("config reloaded", 1)
	if l := d.tcpRules(); !slices.Equal(l.Rules, []string{"[::1]:22", "localhost:5432", "127.0.0.1:3000"}) {
		t.Fatalf("after SIGHUP: tcp list = %+v", l)
	}
	if !strings.Contains(d.logs(), "tcpAllowChanged=true") {
		t.Errorf("the reload did not log the change:\n%s", d.logs())
	}
	// Denying a rule of the operator's file edits that file, and says so.
	if out := d.mustCtl("tcp", "deny", "[::1]:22"); out != "denied [::1]:22 (removed from the config file "+path+")\n" {
		t.Fatalf("tcp deny of a config rule printed %q", out)
	}
	b, _ := os.ReadFile(path)
	if want := "# operator's notes\nmaxSubscriptions = 9\ntcpAllow = [\"localhost:5432\"]\n"; string(b) != want {
		t.Fatalf("config file after deny:\n%s\nwant:\n%s", b, want)
	}
	// A bad entry in the file: the reload changes nothing.
	os.WriteFile(path, []byte("tcpAllow = [\"127.0.0.1:1\", \"bad\"]\n"), 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	d.waitLog("reload failed", 1)
	if l := d.tcpRules(); len(l.Rules) != 2 {
		t.Fatalf("after a bad reload: tcp list = %+v", l)
	}
}

// TestE2ETCPBadConfigRefused: a bad tcpAllow entry stops ahpd at start,
// naming the file, the line and the rule.
func TestE2ETCPBadConfigRefused(t *testing.T) {
	ahpd, _ := binaries(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.toml")
	os.WriteFile(path, []byte("# x\ntcpAllow = [\"127.0.0.1:3000\",\n  \"10.0.0.0/33:80\"]\n"), 0o600)
	cmd := exec.Command(ahpd, "--config", path, "--state-dir", filepath.Join(dir, "state"), "--listen", "127.0.0.1:0", "--control", "none", "--no-default-terminal")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("ahpd with a bad tcpAllow: %v\n%s", err, out)
	}
	if want := path + `:2: tcpAllow: tcp rule "10.0.0.0/33:80"`; !strings.Contains(string(out), want) {
		t.Fatalf("ahpd said:\n%s\nwant %q", out, want)
	}
	check, err := exec.Command(ahpd, "--check-config", "--config", path).CombinedOutput()
	if err == nil || !strings.Contains(string(check), path+":2: tcpAllow:") {
		t.Fatalf("--check-config: %v\n%s", err, check)
	}
}

// TestE2ENothingWrittenToHome: a daemon that loaded no config file keeps
// the rules tcp allow adds in its state directory, and nothing it does
// writes to the user's home (HOME, with the XDG variables unset).
func TestE2ENothingWrittenToHome(t *testing.T) {
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", "XDG_STATE_HOME=", "XDG_CACHE_HOME=", "XDG_RUNTIME_DIR=", "CONFIGURATION_DIRECTORY="}
	dir := t.TempDir()
	d := startDaemonIn(t, dir, nil, env)
	state := filepath.Join(dir, "state", "tcp-allow.json")
	if out := d.mustCtl("tcp", "allow", "127.0.0.1:4000"); out != "allowed 127.0.0.1:4000 (saved in "+state+")\n" {
		t.Fatalf("tcp allow printed %q", out)
	}
	d.mustCtl("tcp", "allow", "127.0.0.1:4001")
	d.mustCtl("tcp", "deny", "127.0.0.1:4001")
	if l := d.tcpRules(); l.ConfigFile != "" || l.StateFile != state {
		t.Fatalf("tcp list = %+v, want no config file, the state file %s", l, state)
	}
	d.mustCtl("terminal", "create", "--id", "t", "--", "/bin/true")
	d.mustCtl("token", "create")
	d.stop()
	d = startDaemonIn(t, dir, nil, env)
	if l := d.tcpRules(); !slices.Equal(l.Rules, []string{"127.0.0.1:4000"}) {
		t.Fatalf("after restart: tcp list = %+v", l)
	}
	d.stop()
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		var names []string
		filepath.WalkDir(home, func(p string, _ os.DirEntry, _ error) error { names = append(names, p); return nil })
		t.Fatalf("the daemon wrote into HOME: %v", names)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v; want mode 0600", fi, err)
	}
}

func TestE2ETCPCreate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})
	target := ln.Addr().String()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedTarget := closed.Addr().String()
	closed.Close()

	d := startDaemonWith(t, []string{"--config", "none"}, nil)
	// tcpRetain is a limit like the others.
	if out := d.mustCtl("limits", "set", "tcpRetain=30s"); out != "tcpRetain=30s (was 1m0s)\n" {
		t.Fatalf("limits set tcpRetain=30s printed %q", out)
	}
	if out := d.mustCtl("limits", "get"); !regexp.MustCompile(`(?m)^tcpRetain\s+30s\s+1m0s$`).MatchString(out) {
		t.Fatalf("limits get:\n%s", out)
	}
	if _, errOut, code := d.ctl("limits", "set", "tcpRetain=500ms"); code != 2 || !strings.Contains(errOut, "tcpRetain: must be at least 1s") {
		t.Fatalf("limits set tcpRetain=500ms: exit %d, %q", code, errOut)
	}
	// Not allowed: the message names the target.
	if _, errOut, code := d.ctl("tcp", "create", target); code == 0 || !strings.Contains(errOut, "tcp target "+target) {
		t.Fatalf("tcp create (not allowed): exit %d, stderr %q", code, errOut)
	}
	// --config none: no config file, but the rule is kept with the state.
	out, errOut, code := d.ctl("tcp", "allow", target)
	if code != 0 || !strings.HasPrefix(out, "allowed "+target+" (saved in ") || !strings.HasSuffix(out, "/state/tcp-allow.json)\n") || errOut != "" {
		t.Fatalf("tcp allow with --config none: exit %d, %q, %q", code, out, errOut)
	}
	d.mustCtl("tcp", "allow", closedTarget)

	if out := d.mustCtl("tcp", "create", "--id", "web", target); out != "ahp-tcp:/web\n" {
		t.Fatalf("tcp create printed %q, want the URI alone", out)
	}
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the target accepted no connection")
	}
	var list []struct {
		channelJSON
		TCP *struct {
			Target string `json:"target"`
			Remote string `json:"remote"`
			Phase  string `json:"phase"`
		} `json:"tcp"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "list", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Channel != "ahp-tcp:/web" || list[0].Type != "tcp" || list[0].TCP == nil || list[0].TCP.Target != target || list[0].TCP.Remote != target {
		t.Fatalf("channels list -o json = %+v", list)
	}
	if table := d.mustCtl("channels", "list"); !strings.Contains(table, "TARGET") || !strings.Contains(table, target) {
		t.Fatalf("channels list table:\n%s", table)
	}
	if got := d.mustCtl("channels", "get", "ahp-tcp:/web", "-o", "json"); !strings.Contains(got, `"target": "`+target+`"`) {
		t.Fatalf("channels get -o json:\n%s", got)
	}

	// Refused: the message says so.
	if _, errOut, code := d.ctl("tcp", "create", closedTarget); code != 1 || !strings.Contains(errOut, "connection refused") || strings.Contains(errOut, "cannot reach ahpd") {
		t.Fatalf("tcp create (closed port): exit %d, stderr %q", code, errOut)
	}
	// Bad usage.
	for _, bad := range [][]string{{"tcp", "create", "127.0.0.1"}, {"tcp", "create", "127.0.0.1:0"}, {"tcp", "create", "--id", "a/b", target}, {"tcp", "create"}} {
		if _, errOut, code := d.ctl(bad...); code != 2 {
			t.Fatalf("ahpctl %v: exit %d (%q), want 2", bad, code, errOut)
		}
	}
	if n := strings.Count(d.mustCtl("channels", "list", "--type", "tcp"), "ahp-tcp:/"); n != 1 { // the TCP table alone
		t.Fatalf("channels after failed creates: %d mentions, want the one channel", n)
	}
}
