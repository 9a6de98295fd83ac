package auth

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/internal/atomicfile"
)

// Minted tokens, tickets and reconnect tokens outlive a restart: the store
// LoadTokens returns keeps them in stateDir/tokens.json, so that a browser
// tab or a saved token reconnects to the daemon started after a stop. The
// file holds what the memory holds — SHA-256 digests, never a secret —
// with each token's grant, expiry, use and whether a connection was using
// it. It is written whole to a temporary file in the same directory,
// synced and renamed over the old one (a reader sees the old file or the
// new, never a part), mode 0600.
//
// What a credential may do is written before the call that changed it
// returns: a mint, a ticket's use (a spent ticket must stay spent), a
// revocation (a revoked token must stay revoked). A connection's start and
// end only move a reconnect token's idle expiry; they are written at most
// once a second (a token holder reconnecting in a loop must not make the
// daemon write a file per connection), and Flush writes what is left at
// shutdown. After a crash, a reconnect token whose last connection's end
// was not written counts as connected when the daemon starts and expires
// its idle period (at most 24 h) later.
//
// A file that cannot be read or parsed is set aside as tokens.json.bad
// (the daemon starts with no minted tokens, and says why: every
// credential fails closed, and `ahpctl open` gives a new link); the admin
// token does not depend on it.

const (
	tokensFileName    = "tokens.json"
	tokensFileVersion = 1
	// maxTokensFile bounds what LoadTokens reads: a larger file is set
	// aside, not parsed.
	maxTokensFile = 64 << 20
	// idleWriteEvery is how often a connection's start or end is written.
	idleWriteEvery = time.Second
)

type tokensFile struct {
	Version int         `json:"version"`
	NextID  int         `json:"nextId"`
	Tokens  []fileToken `json:"tokens"`
}

type fileToken struct {
	ID        string    `json:"id"`
	SHA256    string    `json:"sha256"`
	Channels  []string  `json:"channels,omitempty"`
	Role      string    `json:"role"`
	Expires   time.Time `json:"expires,omitzero"`
	SingleUse bool      `json:"singleUse,omitempty"`
	Used      bool      `json:"used,omitempty"`
	Parent    string    `json:"parent,omitempty"`
	IdleNanos int64     `json:"idleNanos,omitempty"`
	Created   time.Time `json:"created"`
	// Connected: a connection used the (reconnect) token when the file
	// was written; it expires its idle period after the load.
	Connected bool `json:"connected,omitempty"`
}

// persister writes the store's file. gen counts the store's changes,
// written the last one written; both are guarded by the store's mu, the
// file by fileMu.
type persister struct {
	path    string
	gen     uint64
	written uint64
	lastAt  time.Time // when a change was last written
	warning error     // why the file was set aside at load, if it was
	err     error     // the last write's failure, nil after a success
	log     *slog.Logger
}

// snapshotLocked returns the file's contents for the store as it is.
func (t *Tokens) snapshotLocked() []byte {
	f := tokensFile{Version: tokensFileVersion, NextID: t.nextID, Tokens: make([]fileToken, 0, len(t.byID))}
	now := t.now()
	for _, e := range t.byID {
		if e.expired(now) {
			continue
		}
		f.Tokens = append(f.Tokens, fileToken{
			ID: e.id, SHA256: hex.EncodeToString(e.hash[:]), Channels: e.grant.Channels,
			Role: e.grant.Role.String(), Expires: e.grant.Expires, SingleUse: e.grant.SingleUse,
			Used: e.used, Parent: e.grant.Parent, IdleNanos: int64(e.grant.Idle), Created: e.created,
			Connected: e.conns > 0,
		})
	}
	slices.SortFunc(f.Tokens, func(a, b fileToken) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.Marshal(f)
	if err != nil {
		panic(err) // plain values only
	}
	return b
}

// changedLocked records a change of the store and returns what to write
// now, if anything: the change is written at once when it matters for
// what a credential may do (now), else when the last write is a second
// old. Call persist with the result after unlocking mu.
func (t *Tokens) changedLocked(now bool) (data []byte, gen uint64) {
	p := t.persist
	if p == nil {
		return nil, 0
	}
	p.gen++
	if !now && t.now().Sub(p.lastAt) < idleWriteEvery {
		return nil, 0
	}
	p.lastAt = t.now()
	return t.snapshotLocked(), p.gen
}

// write writes data, the store as of change gen, unless a later change was
// written already.
func (t *Tokens) write(data []byte, gen uint64) {
	if data == nil {
		return
	}
	t.fileMu.Lock()
	defer t.fileMu.Unlock()
	t.mu.Lock()
	stale := gen <= t.persist.written
	t.mu.Unlock()
	if stale {
		return
	}
	err := atomicfile.Write(t.persist.path, data)
	if err != nil {
		err = fmt.Errorf("tokens file %s: %w", t.persist.path, err)
	}
	t.mu.Lock()
	prev := t.persist.err
	t.persist.err = err
	if err == nil {
		t.persist.written = gen
	}
	log := t.persist.log
	t.mu.Unlock()
	// Said once when writing starts to fail and once when it works again,
	// not per change.
	switch {
	case log == nil:
	case err != nil && prev == nil:
		log.Error("minted tokens cannot be saved: they work until the daemon stops, then are forgotten", "err", err)
	case err == nil && prev != nil:
		log.Info("minted tokens are saved again", "path", t.persist.path)
	}
}

// SetLogger makes the store log when its file cannot be written (once
// until a write works again) and, now, why the file was set aside at
// load, if it was.
func (t *Tokens) SetLogger(log *slog.Logger) {
	t.mu.Lock()
	p := t.persist
	if p != nil {
		p.log = log
	}
	t.mu.Unlock()
	if p != nil && p.warning != nil {
		log.Warn(p.warning.Error())
	}
}

// Flush writes what the file does not have yet (a connection's start or
// end held back by the once-a-second rule) and returns the last write's
// error. The daemon calls it at shutdown. Without a state directory it
// does nothing.
func (t *Tokens) Flush() error {
	t.mu.Lock()
	p := t.persist
	if p == nil {
		t.mu.Unlock()
		return nil
	}
	var data []byte
	gen := p.gen
	if p.gen > p.written {
		data = t.snapshotLocked()
	}
	t.mu.Unlock()
	t.write(data, gen)
	t.mu.Lock()
	defer t.mu.Unlock()
	return p.err
}

// PersistError returns why the tokens file was set aside at start (nil if
// it was read or absent) and the last write's failure (nil after a
// success), for the daemon to log.
func (t *Tokens) PersistError() (load, write error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.persist == nil {
		return nil, nil
	}
	return t.persist.warning, t.persist.err
}

// loadFile enables persistence to path and reads what it holds. A file
// that is not ours to trust (a symlink, another owner, group or other
// access) is an error: the daemon refuses to start, as for admin.token.
// A file that is unreadable as tokens is renamed to path+".bad" and the
// store starts empty; the reason is kept for PersistError.
func (t *Tokens) loadFile(path string) error {
	t.persist = &persister{path: path}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("tokens file %s: is a symlink; refusing it: fix: remove it (minted tokens are then forgotten)", path)
	case err != nil:
		return fmt.Errorf("tokens file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	if err := checkPrivateFile("tokens file", path, fi); err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokensFile+1))
	if err == nil && len(b) > maxTokensFile {
		err = fmt.Errorf("larger than %d MiB", maxTokensFile>>20)
	}
	var tf tokensFile
	if err == nil {
		err = decodeTokensFile(b, &tf)
	}
	if err != nil {
		bad := path + ".bad"
		t.persist.warning = fmt.Errorf("tokens file %s: %v; set aside as %s: minted tokens, tickets and reconnect tokens are forgotten (the admin token still works; ahpctl open gives a new link)", path, err, bad)
		if rerr := os.Rename(path, bad); rerr != nil {
			return fmt.Errorf("tokens file %s: %v, and setting it aside failed: %w", path, err, rerr)
		}
		return nil
	}
	now := t.now()
	t.nextID = tf.NextID
	for _, ft := range tf.Tokens {
		e := &tokenEntry{id: ft.ID, used: ft.Used, created: ft.Created}
		hex.Decode(e.hash[:], []byte(ft.SHA256)) // checked by decodeTokensFile
		e.grant = Grant{Channels: ft.Channels, Expires: ft.Expires, SingleUse: ft.SingleUse,
			Parent: ft.Parent, Idle: time.Duration(ft.IdleNanos)}
		e.grant.Role, _ = ParseRole(ft.Role)
		if ft.Connected && e.grant.Idle > 0 {
			e.grant.Expires = now.Add(e.grant.Idle)
		}
		if e.expired(now) {
			continue
		}
		t.byHash[e.hash] = e
		t.byID[e.id] = e
	}
	t.persist.gen, t.persist.written = 1, 1
	return nil
}

// decodeTokensFile parses b strictly: a known version, no unknown member,
// every digest 32 bytes of hex, every role known, ids unique and below
// nextId's count.
func decodeTokensFile(b []byte, tf *tokensFile) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(tf); err != nil {
		return fmt.Errorf("not a tokens file: %v", err)
	}
	if dec.More() {
		return errors.New("not a tokens file: data after the object")
	}
	if tf.Version != tokensFileVersion {
		return fmt.Errorf("version %d, this ahpd reads version %d", tf.Version, tokensFileVersion)
	}
	if tf.NextID < 0 {
		return fmt.Errorf("nextId %d is negative", tf.NextID)
	}
	ids := make(map[string]bool, len(tf.Tokens))
	hashes := make(map[string]bool, len(tf.Tokens))
	for i, ft := range tf.Tokens {
		var n int
		if _, err := fmt.Sscanf(ft.ID, "tok-%d", &n); err != nil || ft.ID != fmt.Sprintf("tok-%d", n) || n <= 0 || n > tf.NextID {
			return fmt.Errorf("token %d: id %q is not tok-1 … tok-%d", i, ft.ID, tf.NextID)
		}
		if ids[ft.ID] {
			return fmt.Errorf("token %d: id %s twice", i, ft.ID)
		}
		ids[ft.ID] = true
		if h, err := hex.DecodeString(ft.SHA256); err != nil || len(h) != 32 {
			return fmt.Errorf("token %s: sha256 is not 64 hex digits", ft.ID)
		}
		if hashes[ft.SHA256] {
			return fmt.Errorf("token %s: the same digest as another token", ft.ID)
		}
		hashes[ft.SHA256] = true
		if _, err := ParseRole(ft.Role); err != nil {
			return fmt.Errorf("token %s: %v", ft.ID, err)
		}
		if ft.IdleNanos < 0 || time.Duration(ft.IdleNanos) > maxReconnectIdle {
			return fmt.Errorf("token %s: idle period out of range", ft.ID)
		}
	}
	return nil
}

// checkPrivateFile checks an opened state file (fstat of the open file): a
// regular file owned by this user, mode 0600 or narrower.
func checkPrivateFile(what, path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s %s: not a regular file (%v); fix: remove it", what, path, fi.Mode().Type())
	}
	uid := os.Geteuid()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return fmt.Errorf("%s %s: owned by uid %d, not by this user (uid %d), who may have planted it; fix: remove it",
			what, path, st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o177 != 0 {
		return fmt.Errorf("%s %s: mode %v is looser than 0600; fix: chmod 600 %s", what, path, perm, path)
	}
	return nil
}
