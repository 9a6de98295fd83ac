package auth

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The state directory holds admin.token, the credential that grants
// everything (terminals run commands as the daemon's user). A directory or
// token that another user can write, replace or own would let that user
// choose the daemon's admin token, so the daemon refuses to start on one.

// stateLockName is the file in the state directory that a running ahpd
// holds locked (flock) and that names its pid.
const stateLockName = "ahpd.lock"

// prepareStateDir creates dir (mode 0700) if it is missing and otherwise
// checks that it is a real directory (not a symlink) owned by this user
// and not writable by group or others.
func prepareStateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		if fi, err = os.Lstat(dir); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	return checkStateDir(dir, fi)
}

func checkStateDir(dir string, fi os.FileInfo) error {
	if fi.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(dir)
		return fmt.Errorf("state dir %s: is a symlink (to %s); refusing it: give the real directory with --state-dir", dir, target)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state dir %s: not a directory", dir)
	}
	uid := os.Geteuid()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return fmt.Errorf("state dir %s: owned by uid %d, not by this user (uid %d): another user could plant its admin.token; fix: check its contents, then chown -R %d %s && chmod 700 %s, or give another --state-dir",
			dir, st.Uid, uid, uid, dir, dir)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("state dir %s: mode %v is writable by group or others, who could plant its admin.token; fix: chmod 700 %s",
			dir, perm, dir)
	}
	return nil
}

// checkTokenFile checks the opened admin token (fstat of the open file, so
// it is the file that is read): a regular file owned by this user, mode
// 0600 or narrower.
func checkTokenFile(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("admin token %s: not a regular file (%v); remove it and ahpd creates a new token", path, fi.Mode().Type())
	}
	uid := os.Geteuid()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return fmt.Errorf("admin token %s: owned by uid %d, not by this user (uid %d), who may have planted it; fix: remove it (ahpd creates a new token)",
			path, st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o177 != 0 {
		return fmt.Errorf("admin token %s: mode %v is looser than 0600; fix: chmod 600 %s", path, perm, path)
	}
	return nil
}

// openTokenFile opens path for reading without following a symlink.
func openTokenFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("admin token %s: is a symlink; refusing it: fix: remove it (ahpd creates a new token) or put the real file there", path)
	}
	return f, err
}

// LockStateDir checks dir (as prepareStateDir) and locks its ahpd.lock
// exclusively, writing this process's pid into it. The lock is held until
// the returned file is closed (or the process ends); a second daemon on
// the same directory gets an error naming the directory and the holder's
// pid.
func LockStateDir(dir string) (*os.File, error) {
	if err := prepareStateDir(dir); err != nil {
		return nil, err
	}
	name := filepath.Join(dir, stateLockName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("state dir lock %s: is a symlink; fix: remove it", name)
	}
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			f.Close()
			return nil, fmt.Errorf("state dir lock %s: owned by uid %d, not by this user (uid %d); fix: remove it", name, st.Uid, os.Geteuid())
		}
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			holder := "another ahpd"
			if b, _ := io.ReadAll(io.LimitReader(f, 32)); len(b) > 0 {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					holder = fmt.Sprintf("another ahpd (pid %d)", pid)
				}
			}
			return nil, fmt.Errorf("state dir %s: %s holds it (%s is locked); stop that daemon or give this one another --state-dir", dir, holder, name)
		}
		return nil, fmt.Errorf("state dir lock %s: %w", name, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// readOrCreateToken returns the contents of the admin token at path,
// checked by checkTokenFile, or creates it (mode 0600) holding a secret
// from newSecret if it does not exist.
func readOrCreateToken(path string, newSecret func() string) ([]byte, error) {
	f, err := openTokenFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		secret := newSecret()
		// O_EXCL: a file or symlink planted meanwhile makes this fail.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("admin token: %w", err)
		}
		_, werr := f.WriteString(secret + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("admin token: %w", werr)
		}
		return []byte(secret), nil
	case err != nil:
		return nil, fmt.Errorf("admin token: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("admin token: %w", err)
	}
	if err := checkTokenFile(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("admin token %s: %w", path, err)
	}
	return b, nil
}
