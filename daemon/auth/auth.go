// Package auth holds ahpd's credentials (PROTOCOL.md §2): the admin
// token, minted tokens and single-use tickets with their roles, scopes,
// expiry and revocation, and the state directory that keeps the admin
// token, with its trust checks and its lock.
//
// Secrets are kept only as SHA-256 digests and compared in constant time;
// no error carries a credential. Tokens is safe for concurrent use.
package auth

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Role is what a credential may do on its channels (PROTOCOL.md §2).
type Role int

const (
	// RoleView receives output only.
	RoleView Role = iota
	// RoleControl may also send input, resize and create.
	RoleControl
)

func (r Role) String() string {
	if r == RoleControl {
		return "control"
	}
	return "view"
}

// ParseRole parses "view" or "control".
func ParseRole(s string) (Role, error) {
	switch s {
	case "view":
		return RoleView, nil
	case "control":
		return RoleControl, nil
	}
	return 0, fmt.Errorf("role must be view or control, got %q", s)
}

// Grant is what a credential allows.
type Grant struct {
	// Channels the credential reaches; empty means every channel.
	Channels []string
	Role     Role
	// Expires is when the credential stops working; zero means never.
	Expires time.Time
	// SingleUse credentials work for one initialize.
	SingleUse bool
	// Admin marks the admin token.
	Admin bool
	// ID is the token's id, filled in by Authenticate ("" for admin).
	ID string
	// Parent is the id of the token this one was derived from (a
	// reconnect token from a ticket); revoking the parent revokes it.
	Parent string
	// Idle is set for a reconnect token: it does not expire while a
	// connection uses it, and expires Idle after the last one closed.
	// Zero: the token expires at Expires, connected or not.
	Idle time.Duration
}

// Allows reports whether the grant reaches channel.
func (g Grant) Allows(channel string) bool {
	return len(g.Channels) == 0 || slices.Contains(g.Channels, channel)
}

// TokenInfo describes a minted token without its secret.
type TokenInfo struct {
	ID      string
	Grant   Grant
	Used    bool
	Created time.Time
}

// Errors of authentication. They never carry the credential.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrTokenExpired = errors.New("token expired")
	ErrTokenRevoked = errors.New("token revoked")
	// ErrTokenBusy: the token has as many connections as
	// Config.MaxConnectionsPerToken allows.
	ErrTokenBusy = errors.New("too many connections with this token")
)

// Tokens holds the admin token and the minted tokens. Secrets are kept
// only as SHA-256 digests; lookups hash the presented credential and
// compare digests in constant time, so neither the map nor a timing
// difference reveals a prefix of a secret.
type Tokens struct {
	now   func() time.Time
	admin [32]byte

	mu     sync.Mutex // guards byHash, byID, nextID and persist's counters
	byHash map[[32]byte]*tokenEntry
	byID   map[string]*tokenEntry
	nextID int

	// persist keeps the minted tokens in the state directory (persist.go);
	// nil for a store NewTokens made. fileMu orders its writes.
	persist *persister
	fileMu  sync.Mutex
}

type tokenEntry struct {
	hash    [32]byte
	id      string
	grant   Grant
	used    bool
	created time.Time
	conns   int // open connections using it (see Attach)
}

// expired reports whether e no longer works at now. A reconnect token
// does not expire while a connection uses it.
func (e *tokenEntry) expired(now time.Time) bool {
	if e.grant.Idle > 0 && e.conns > 0 {
		return false
	}
	return !e.grant.Expires.IsZero() && !now.Before(e.grant.Expires)
}

func (t *Tokens) deleteLocked(e *tokenEntry) {
	delete(t.byHash, e.hash)
	delete(t.byID, e.id)
}

const tokenPrefix = "ahp_"

func newSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// LoadTokens reads stateDir/admin.token, creating it (0600, in a 0700
// directory) on first start, and the minted tokens kept in
// stateDir/tokens.json (persist.go), which it keeps up to date from then
// on.
func LoadTokens(stateDir string) (*Tokens, string, error) {
	return loadTokens(stateDir, time.Now)
}

func loadTokens(stateDir string, now func() time.Time) (*Tokens, string, error) {
	// Another user must not be able to plant or swap the token: the
	// directory and the file are checked first (statedir.go).
	if err := prepareStateDir(stateDir); err != nil {
		return nil, "", err
	}
	path := filepath.Join(stateDir, "admin.token")
	b, err := readOrCreateToken(path, newSecret)
	if err != nil {
		return nil, "", err
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < 16 {
		return nil, "", fmt.Errorf("admin token %s: too short", path)
	}
	t := NewTokens(secret)
	t.now = now
	if err := t.loadFile(filepath.Join(stateDir, tokensFileName)); err != nil {
		return nil, "", err
	}
	return t, path, nil
}

// NewTokens returns a store whose admin token is admin.
func NewTokens(admin string) *Tokens {
	return &Tokens{now: time.Now, admin: sha256.Sum256([]byte(admin)),
		byHash: map[[32]byte]*tokenEntry{}, byID: map[string]*tokenEntry{}}
}

// Mint creates a token with grant g and returns its secret and id.
//
// A grant with a Parent is a reconnect token derived from that ticket: its
// idle period (Grant.Idle) is the ticket's TTL, at most until g.Expires
// (the cap on a reconnect token's idle period), and it expires that long
// after minting unless a connection is attached (see Attach). If the
// parent was revoked meanwhile, the token is not stored: its secret
// authenticates nothing.
func (t *Tokens) Mint(g Grant) (secret, id string) {
	secret = newSecret()
	h := sha256.Sum256([]byte(secret))
	t.mu.Lock()
	now := t.now()
	t.nextID++
	id = fmt.Sprintf("tok-%d", t.nextID)
	g.Admin = false
	g.ID = ""
	g.Idle = 0
	g.Channels = slices.Clone(g.Channels)
	if g.Parent != "" {
		p, ok := t.byID[g.Parent]
		if !ok {
			t.mu.Unlock()
			return secret, id
		}
		idle := p.grant.Expires.Sub(p.created)
		if p.grant.Expires.IsZero() || idle > maxReconnectIdle {
			idle = maxReconnectIdle
		}
		if !g.Expires.IsZero() && g.Expires.Sub(now) < idle {
			idle = g.Expires.Sub(now)
		}
		if idle <= 0 {
			idle = time.Second
		}
		g.Idle = idle
		g.Expires = now.Add(idle)
	}
	e := &tokenEntry{hash: h, id: id, grant: g, created: now}
	t.byHash[h] = e
	t.byID[id] = e
	t.gcLocked()
	data, gen := t.changedLocked(true)
	t.mu.Unlock()
	t.write(data, gen)
	return secret, id
}

// maxReconnectIdle caps a reconnect token's idle period.
const maxReconnectIdle = 24 * time.Hour

// Attach records that a connection authenticated with id is open and
// returns the grant it holds from now on: for a ticket, the reconnect
// token derived from it (minted at initialize), whose expiry is then
// suspended while connections use it. Every successful Attach is paired
// with a Detach of the returned grant's ID. It fails with ErrTokenRevoked
// if the token was revoked since Authenticate, and with ErrTokenBusy if it
// has maxConns connections already (0: no bound).
func (t *Tokens) Attach(g Grant, maxConns int) (Grant, error) {
	t.mu.Lock()
	out, data, gen, err := t.attachLocked(g, maxConns)
	t.mu.Unlock()
	t.write(data, gen)
	return out, err
}

func (t *Tokens) attachLocked(g Grant, maxConns int) (_ Grant, data []byte, gen uint64, _ error) {
	e, ok := t.byID[g.ID]
	if g.SingleUse {
		// The reconnect token is the connection's credential now (the
		// ticket itself may have expired since Authenticate).
		var child *tokenEntry
		for _, c := range t.byID {
			if c.grant.Parent == g.ID && c.conns == 0 && (child == nil || c.created.After(child.created)) {
				child = c
			}
		}
		if child != nil {
			e, ok = child, true
		}
	}
	if !ok {
		if !g.Expires.IsZero() && !t.now().Before(g.Expires) {
			return Grant{}, nil, 0, ErrTokenExpired
		}
		return Grant{}, nil, 0, ErrTokenRevoked
	}
	if maxConns > 0 && e.conns >= maxConns {
		return Grant{}, nil, 0, ErrTokenBusy
	}
	e.conns++
	if e.conns == 1 && e.grant.Idle > 0 {
		data, gen = t.changedLocked(false)
	}
	out := e.grant
	out.ID = e.id
	return out, data, gen, nil
}

// Detach ends an Attach: once no connection uses a reconnect token, it
// expires after its idle period.
func (t *Tokens) Detach(id string) {
	t.mu.Lock()
	e, ok := t.byID[id]
	if !ok || e.conns == 0 {
		t.mu.Unlock()
		return
	}
	e.conns--
	var data []byte
	var gen uint64
	if e.conns == 0 && e.grant.Idle > 0 {
		e.grant.Expires = t.now().Add(e.grant.Idle)
		data, gen = t.changedLocked(false)
	}
	t.mu.Unlock()
	t.write(data, gen)
}

// Check reports whether the token id still works for a connection that
// holds g: nil, ErrTokenExpired or ErrTokenRevoked.
func (t *Tokens) Check(g Grant) error {
	if g.Admin {
		return nil
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byID[g.ID]
	switch {
	case ok && e.expired(now):
		t.deleteLocked(e)
		return ErrTokenExpired
	case ok:
		return nil
	case g.Idle == 0 && !g.Expires.IsZero() && !now.Before(g.Expires):
		return ErrTokenExpired // expired and dropped meanwhile
	}
	return ErrTokenRevoked
}

// Valid reports whether a presented credential would authenticate now,
// without consuming a single-use one (an upgrade's bearer token, checked
// before the connection counts as pending).
func (t *Tokens) Valid(secret string) bool {
	if secret == "" {
		return false
	}
	h := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(h[:], t.admin[:]) == 1 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byHash[h]
	return ok && !e.expired(t.now()) && !(e.grant.SingleUse && e.used)
}

// Authenticate checks a presented credential and returns its grant. A
// single-use token is consumed.
func (t *Tokens) Authenticate(secret string) (Grant, error) {
	if secret == "" {
		return Grant{}, ErrUnauthorized
	}
	h := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(h[:], t.admin[:]) == 1 {
		return Grant{Role: RoleControl, Admin: true}, nil
	}
	t.mu.Lock()
	e, ok := t.byHash[h]
	if !ok {
		t.mu.Unlock()
		return Grant{}, ErrUnauthorized
	}
	if e.expired(t.now()) {
		t.deleteLocked(e)
		t.mu.Unlock()
		return Grant{}, ErrTokenExpired
	}
	var data []byte
	var gen uint64
	if e.grant.SingleUse {
		if e.used {
			t.mu.Unlock()
			return Grant{}, ErrUnauthorized
		}
		e.used = true
		// Kept (marked used) until it expires, so that revoking it still
		// revokes the reconnect tokens derived from it. Written before
		// the grant is returned: a spent ticket stays spent after a
		// restart.
		data, gen = t.changedLocked(true)
	}
	g := e.grant
	g.ID = e.id
	t.mu.Unlock()
	t.write(data, gen)
	return g, nil
}

// Revoke removes the token with id and every token derived from it, also
// when the token itself expired already (a ticket's reconnect tokens
// outlive it); it reports whether anything was removed.
func (t *Tokens) Revoke(id string) bool {
	return len(t.RevokeAll(id)) > 0
}

// RevokeAll is Revoke returning the ids removed.
func (t *Tokens) RevokeAll(id string) []string {
	t.mu.Lock()
	out := t.revokeLocked(id)
	var data []byte
	var gen uint64
	if len(out) > 0 {
		// Written before the revoke returns: a revoked token stays
		// revoked after a restart.
		data, gen = t.changedLocked(true)
	}
	t.mu.Unlock()
	t.write(data, gen)
	return out
}

func (t *Tokens) revokeLocked(id string) []string {
	var out []string
	if e, ok := t.byID[id]; ok {
		t.deleteLocked(e)
		out = append(out, id)
	}
	// Descendants, transitively; the ancestor itself may be gone.
	parents := []string{id}
	for len(parents) > 0 {
		p := parents[0]
		parents = parents[1:]
		for _, e := range t.byID {
			if e.grant.Parent == p {
				t.deleteLocked(e)
				out = append(out, e.id)
				parents = append(parents, e.id)
			}
		}
	}
	return out
}

// List returns the live tokens, without secrets.
func (t *Tokens) List() []TokenInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gcLocked()
	out := make([]TokenInfo, 0, len(t.byHash))
	for _, e := range t.byHash {
		if e.used {
			continue // a spent ticket is no credential any more
		}
		g := e.grant
		if g.Idle > 0 && e.conns > 0 {
			g.Expires = t.now().Add(g.Idle) // renewed while connected
		}
		out = append(out, TokenInfo{ID: e.id, Grant: g, Used: e.used, Created: e.created})
	}
	// In creation order (ids count up, but "tok-10" sorts before "tok-9").
	slices.SortFunc(out, func(a, b TokenInfo) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(len(a.ID), len(b.ID))*2 + strings.Compare(a.ID, b.ID)
	})
	return out
}

// gcLocked drops expired tokens so the map stays bounded by live tokens.
func (t *Tokens) gcLocked() {
	now := t.now()
	for _, e := range t.byHash {
		if e.expired(now) {
			t.deleteLocked(e)
		}
	}
}
