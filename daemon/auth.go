package daemon

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
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
}

// Allows reports whether the grant reaches channel.
func (g Grant) Allows(channel string) bool {
	return len(g.Channels) == 0 || slices.Contains(g.Channels, channel)
}

// TokenInfo describes a minted token without its secret.
type TokenInfo struct {
	ID    string
	Grant Grant
	Used  bool
}

// Errors of authentication. They never carry the credential.
var (
	ErrUnauthorized = errors.New("unauthorized")
	ErrTokenExpired = errors.New("token expired")
)

// Tokens holds the admin token and the minted tokens. Secrets are kept
// only as SHA-256 digests; lookups hash the presented credential and
// compare digests in constant time, so neither the map nor a timing
// difference reveals a prefix of a secret.
type Tokens struct {
	now   func() time.Time
	admin [32]byte

	mu     sync.Mutex // guards byHash and nextID
	byHash map[[32]byte]*tokenEntry
	nextID int
}

type tokenEntry struct {
	id    string
	grant Grant
	used  bool
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
// directory) on first start.
func LoadTokens(stateDir string) (*Tokens, string, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("state dir: %w", err)
	}
	path := filepath.Join(stateDir, "admin.token")
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		secret := newSecret()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, "", fmt.Errorf("admin token: %w", err)
		}
		_, werr := f.WriteString(secret + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, "", fmt.Errorf("admin token: %w", werr)
		}
		b = []byte(secret)
	case err != nil:
		return nil, "", fmt.Errorf("admin token: %w", err)
	default:
		fi, err := os.Stat(path)
		if err == nil && fi.Mode().Perm()&0o077 != 0 {
			return nil, "", fmt.Errorf("admin token %s: mode %v is readable by others; chmod 600 it", path, fi.Mode().Perm())
		}
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < 16 {
		return nil, "", fmt.Errorf("admin token %s: too short", path)
	}
	t := NewTokens(secret)
	return t, path, nil
}

// NewTokens returns a store whose admin token is admin.
func NewTokens(admin string) *Tokens {
	return &Tokens{now: time.Now, admin: sha256.Sum256([]byte(admin)), byHash: map[[32]byte]*tokenEntry{}}
}

// Mint creates a token with grant g and returns its secret and id.
func (t *Tokens) Mint(g Grant) (secret, id string) {
	secret = newSecret()
	h := sha256.Sum256([]byte(secret))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextID++
	id = fmt.Sprintf("tok-%d", t.nextID)
	g.Admin = false
	g.ID = ""
	g.Channels = slices.Clone(g.Channels)
	t.byHash[h] = &tokenEntry{id: id, grant: g}
	t.gcLocked()
	return secret, id
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
	defer t.mu.Unlock()
	e, ok := t.byHash[h]
	if !ok {
		return Grant{}, ErrUnauthorized
	}
	if !e.grant.Expires.IsZero() && !t.now().Before(e.grant.Expires) {
		delete(t.byHash, h)
		return Grant{}, ErrTokenExpired
	}
	if e.grant.SingleUse {
		if e.used {
			return Grant{}, ErrUnauthorized
		}
		e.used = true
		// Kept (marked used) until it expires, so that revoking it still
		// revokes the reconnect tokens derived from it.
	}
	g := e.grant
	g.ID = e.id
	return g, nil
}

// Revoke removes the token with id and every token derived from it; it
// reports whether it existed.
func (t *Tokens) Revoke(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := false
	for h, e := range t.byHash {
		if e.id == id {
			delete(t.byHash, h)
			found = true
		}
	}
	if found {
		for h, e := range t.byHash {
			if e.grant.Parent == id {
				delete(t.byHash, h)
			}
		}
	}
	return found
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
		out = append(out, TokenInfo{ID: e.id, Grant: e.grant, Used: e.used})
	}
	slices.SortFunc(out, func(a, b TokenInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// gcLocked drops expired tokens so the map stays bounded by live tokens.
func (t *Tokens) gcLocked() {
	now := t.now()
	for h, e := range t.byHash {
		if !e.grant.Expires.IsZero() && !now.Before(e.grant.Expires) {
			delete(t.byHash, h)
		}
	}
}
