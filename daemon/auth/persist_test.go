package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// restart loads the store again from dir, as a daemon started after a stop
// does, with the clock at now.
func restart(t *testing.T, dir string, now time.Time) *Tokens {
	t.Helper()
	tk, _, err := loadTokens(dir, func() time.Time { return now })
	if err != nil {
		t.Fatalf("LoadTokens after restart: %v", err)
	}
	return tk
}

func stateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	return dir
}

// TestTokensSurviveRestart: a minted token, a ticket's reconnect token and
// their grants work after a restart; a revoked token, a spent ticket and
// an expired token do not; the file holds no secret and is 0600.
func TestTokensSurviveRestart(t *testing.T) {
	dir := stateDir(t)
	tk, _, err := LoadTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tk.now = func() time.Time { return now }

	view, viewID := tk.Mint(Grant{Channels: []string{"ahp-terminal:/a"}, Role: RoleView, Expires: now.Add(time.Hour)})
	ctl, _ := tk.Mint(Grant{Role: RoleControl})
	revoked, revokedID := tk.Mint(Grant{Role: RoleControl})
	short, _ := tk.Mint(Grant{Role: RoleView, Expires: now.Add(5 * time.Second)})
	ticket, ticketID := tk.Mint(Grant{Role: RoleControl, SingleUse: true, Expires: now.Add(time.Minute)})
	unused, _ := tk.Mint(Grant{Role: RoleView, SingleUse: true, Expires: now.Add(time.Minute)})
	stale, _ := tk.Mint(Grant{Role: RoleView, SingleUse: true, Expires: now.Add(20 * time.Second)})
	lastTicket, _ := tk.Mint(Grant{Role: RoleView, SingleUse: true, Expires: now.Add(time.Minute)})

	g, err := tk.Authenticate(ticket)
	if err != nil {
		t.Fatal(err)
	}
	reconnect, _ := tk.Mint(Grant{Role: g.Role, Channels: g.Channels, Parent: ticketID, Expires: now.Add(maxReconnectIdle)})
	if !tk.Revoke(revokedID) {
		t.Fatal("revoke found nothing")
	}
	// The last change before the stop: a ticket's use.
	if _, err := tk.Authenticate(lastTicket); err != nil {
		t.Fatal(err)
	}

	// The file: 0600, no secret in it.
	path := filepath.Join(dir, tokensFileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens file mode %v, want 0600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	for _, s := range []string{view, ctl, revoked, short, ticket, unused, stale, lastTicket, reconnect} {
		if strings.Contains(string(b), s) || strings.Contains(string(b), strings.TrimPrefix(s, tokenPrefix)) {
			t.Fatalf("tokens file holds a secret")
		}
	}

	// Restarted 30 s later: the ticket and the unused ticket have not
	// expired yet, the short token and the stale ticket have.
	later := now.Add(30 * time.Second)
	tk2 := restart(t, dir, later)
	if g, err := tk2.Authenticate(view); err != nil || g.Role != RoleView || !g.Allows("ahp-terminal:/a") || g.Allows("ahp-terminal:/b") || g.ID != viewID {
		t.Errorf("view token after restart: %+v, %v; want view on ahp-terminal:/a only, id %s", g, err, viewID)
	}
	if g, err := tk2.Authenticate(ctl); err != nil || g.Role != RoleControl {
		t.Errorf("control token after restart: %+v, %v", g, err)
	}
	if _, err := tk2.Authenticate(revoked); err == nil {
		t.Error("a revoked token works after a restart")
	}
	if _, err := tk2.Authenticate(short); err == nil {
		t.Error("a token that expired during the stop works after it")
	}
	if _, err := tk2.Authenticate(ticket); err == nil {
		t.Error("a spent ticket works again after a restart")
	}
	if _, err := tk2.Authenticate(lastTicket); err == nil {
		t.Error("a ticket spent just before the stop works again after it")
	}
	if _, err := tk2.Authenticate(stale); err == nil {
		t.Error("a ticket that expired during the stop works after it")
	}
	if g, err := tk2.Authenticate(unused); err != nil || !g.SingleUse {
		t.Errorf("an unused ticket after restart: %+v, %v", g, err)
	}
	if _, err := tk2.Authenticate(unused); err == nil {
		t.Error("a ticket worked twice")
	}
	if g, err := tk2.Authenticate(reconnect); err != nil || g.Parent != ticketID || g.Role != RoleControl {
		t.Errorf("reconnect token after restart: %+v, %v", g, err)
	}
	// Revoking the ticket after the restart still revokes what was
	// derived from it.
	tk2.Revoke(ticketID)
	if _, err := tk2.Authenticate(reconnect); err == nil {
		t.Error("the reconnect token survives its ticket's revocation after a restart")
	}
	// New ids do not reuse old ones.
	_, id := tk2.Mint(Grant{Role: RoleView})
	if id == viewID || id == revokedID || id == ticketID {
		t.Errorf("a new token after restart got the old id %s", id)
	}
}

// TestReconnectTokenIdleAcrossRestart: a reconnect token in use when the
// daemon stopped gets its idle period from the start; one that was idle
// keeps the expiry it had.
func TestReconnectTokenIdleAcrossRestart(t *testing.T) {
	dir := stateDir(t)
	tk, _, err := LoadTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tk.now = func() time.Time { return now }
	_, ticketID := tk.Mint(Grant{Role: RoleControl, SingleUse: true, Expires: now.Add(10 * time.Minute)})
	inUse, _ := tk.Mint(Grant{Role: RoleControl, Parent: ticketID})
	idle, _ := tk.Mint(Grant{Role: RoleControl, Parent: ticketID})
	g, err := tk.Authenticate(inUse)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Attach(g, 0); err != nil {
		t.Fatal(err)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	// An hour later (both idle periods, 10 minutes, are long over if
	// counted from the mint) the daemon starts again.
	tk2 := restart(t, dir, now.Add(time.Hour))
	if _, err := tk2.Authenticate(inUse); err != nil {
		t.Errorf("the reconnect token a tab was using when ahpd stopped: %v, want it to work for its idle period after the start", err)
	}
	if _, err := tk2.Authenticate(idle); err == nil {
		t.Error("an idle reconnect token outlived its idle period because the daemon restarted")
	}
}

// TestConnectionChurnWritesAtMostOncePerSecond: attaching and detaching a
// reconnect token in a loop does not write the file each time; Flush
// writes the last state.
func TestConnectionChurnWritesAtMostOncePerSecond(t *testing.T) {
	dir := stateDir(t)
	tk, _, err := LoadTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tk.now = func() time.Time { return now }
	_, ticketID := tk.Mint(Grant{Role: RoleControl, SingleUse: true, Expires: now.Add(10 * time.Minute)})
	rt, _ := tk.Mint(Grant{Role: RoleControl, Parent: ticketID})
	g, err := tk.Authenticate(rt)
	if err != nil {
		t.Fatal(err)
	}
	writtenBefore := tk.persist.written
	for range 1000 {
		a, err := tk.Attach(g, 0)
		if err != nil {
			t.Fatal(err)
		}
		tk.Detach(a.ID)
	}
	if w := tk.persist.written - writtenBefore; w > 1 {
		t.Errorf("1000 connections with a frozen clock wrote the file %d times, want at most 1", w)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if tk.persist.written != tk.persist.gen {
		t.Errorf("after Flush the file is at change %d of %d", tk.persist.written, tk.persist.gen)
	}
}

// TestBadTokensFileSetAside: a corrupt, truncated, unknown-version or
// oversized file is set aside and the daemon starts with no minted token
// (failing closed), saying why; a file another user could have written is
// refused.
func TestBadTokensFileSetAside(t *testing.T) {
	good := func(t *testing.T) (dir string, secret string) {
		dir = stateDir(t)
		tk, _, err := LoadTokens(dir)
		if err != nil {
			t.Fatal(err)
		}
		secret, _ = tk.Mint(Grant{Role: RoleControl})
		return dir, secret
	}
	cases := map[string]func(b []byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"not json":  func([]byte) []byte { return []byte("\x00\x01garbage") },
		"version":   func(b []byte) []byte { return []byte(strings.Replace(string(b), `"version":1`, `"version":2`, 1)) },
		"unknown field": func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"version":1`, `"version":1,"x":1`, 1))
		},
		"bad digest": func(b []byte) []byte { return []byte(strings.Replace(string(b), `"sha256":"`, `"sha256":"zz`, 1)) },
		"bad role": func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"role":"control"`, `"role":"root"`, 1))
		},
		"trailing data": func(b []byte) []byte { return append(b, []byte(" {}")...) },
		"oversized":     func(b []byte) []byte { return append(b, make([]byte, maxTokensFile)...) },
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			dir, secret := good(t)
			path := filepath.Join(dir, tokensFileName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, corrupt(b), 0o600); err != nil {
				t.Fatal(err)
			}
			tk, _, err := LoadTokens(dir)
			if err != nil {
				t.Fatalf("LoadTokens refused to start: %v; want it to set the file aside", err)
			}
			load, _ := tk.PersistError()
			if load == nil || !strings.Contains(load.Error(), "set aside") {
				t.Errorf("PersistError = %v, want the reason the file was set aside", load)
			}
			if _, err := tk.Authenticate(secret); err == nil {
				t.Error("a token from a file set aside works")
			}
			if _, err := os.Stat(path + ".bad"); err != nil {
				t.Errorf("the bad file was not kept as %s.bad: %v", tokensFileName, err)
			}
			// The store works and writes a good file again.
			s2, _ := tk.Mint(Grant{Role: RoleView})
			tk3, _, err := LoadTokens(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tk3.Authenticate(s2); err != nil {
				t.Errorf("a token minted after the file was set aside: %v", err)
			}
		})
	}
	t.Run("group readable", func(t *testing.T) {
		dir, _ := good(t)
		path := filepath.Join(dir, tokensFileName)
		if err := os.Chmod(path, 0o640); err != nil {
			t.Fatal(err)
		}
		_, _, err := LoadTokens(dir)
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("LoadTokens with a 0640 tokens file: %v, want a refusal naming chmod 600", err)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		dir, _ := good(t)
		path := filepath.Join(dir, tokensFileName)
		other := filepath.Join(t.TempDir(), "planted")
		b, _ := os.ReadFile(path)
		os.WriteFile(other, b, 0o600)
		os.Remove(path)
		if err := os.Symlink(other, path); err != nil {
			t.Fatal(err)
		}
		_, _, err := LoadTokens(dir)
		if err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("LoadTokens with a symlinked tokens file: %v, want a refusal", err)
		}
	})
}

// TestTokensWriteFailureReported: when the file cannot be written the
// store keeps working in memory and PersistError says why.
func TestTokensWriteFailureReported(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a read-only directory")
	}
	dir := stateDir(t)
	tk, _, err := LoadTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	secret, _ := tk.Mint(Grant{Role: RoleView})
	if _, err := tk.Authenticate(secret); err != nil {
		t.Errorf("minted token in memory: %v", err)
	}
	if _, werr := tk.PersistError(); werr == nil || !errors.Is(werr, os.ErrPermission) {
		t.Errorf("PersistError write = %v, want a permission error", werr)
	}
}

// FuzzTokensFile: no file content makes loading panic, and what loads is
// what decodeTokensFile accepted.
func FuzzTokensFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"nextId":2,"tokens":[{"id":"tok-1","sha256":"` + strings.Repeat("ab", 32) + `","role":"view","created":"2026-12-07T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"nextId":0,"tokens":[]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tf tokensFile
		if decodeTokensFile(b, &tf) != nil {
			return
		}
		dir := t.TempDir()
		os.Chmod(dir, 0o700)
		if err := os.WriteFile(filepath.Join(dir, tokensFileName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		tk := NewTokens("admin-secret-for-the-fuzzer")
		if err := tk.loadFile(filepath.Join(dir, tokensFileName)); err != nil {
			t.Fatal(err)
		}
		if w, _ := tk.PersistError(); w != nil {
			t.Fatalf("a file decodeTokensFile accepts was set aside: %v", w)
		}
		if len(tk.byID) > len(tf.Tokens) {
			t.Fatalf("%d tokens loaded from %d", len(tk.byID), len(tf.Tokens))
		}
	})
}

// TestChangesWrittenBeforeReturn: a mint, a revocation and a ticket's use
// are in the file when the call returns, with no Flush (a crash right
// after loses none of them).
func TestChangesWrittenBeforeReturn(t *testing.T) {
	dir := stateDir(t)
	tk, _, err := LoadTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	reload := func() *Tokens {
		t.Helper()
		r, _, err := LoadTokens(dir)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, aID := tk.Mint(Grant{Role: RoleControl})
	if _, err := reload().Authenticate(a); err != nil {
		t.Errorf("minted token not in the file when Mint returned: %v", err)
	}
	tk.Revoke(aID)
	if _, err := reload().Authenticate(a); err == nil {
		t.Error("revocation not in the file when Revoke returned")
	}
	ticket, _ := tk.Mint(Grant{Role: RoleView, SingleUse: true, Expires: time.Now().Add(time.Minute)})
	if _, err := tk.Authenticate(ticket); err != nil {
		t.Fatal(err)
	}
	if _, err := reload().Authenticate(ticket); err == nil {
		t.Error("a ticket's use not in the file when Authenticate returned")
	}
}
