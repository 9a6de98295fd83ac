package handover

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// seals are what a state's memfd carries: nobody, the writer included,
// may change it any more.
const seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

// Sealed returns an anonymous in-memory file (memfd, close-on-exec) that
// holds b and is sealed against any change: the old daemon writes the
// state into it once, and the check run and the new binary read the very
// bytes that were checked.
func Sealed(name string, b []byte) (*os.File, error) {
	return seal(name, [][]byte{b})
}

// seal writes parts, one after the other, into a new memfd and seals it.
func seal(name string, parts [][]byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("handover: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	// os.File.Write writes all of p or fails.
	for _, p := range parts {
		if _, err := f.Write(p); err != nil {
			f.Close()
			return nil, fmt.Errorf("handover: writing the state: %w", err)
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("handover: sealing the state: %w", err)
	}
	return f, nil
}

// Seal returns a sealed memfd holding the state w makes up, as
// Sealed(name, w.Bytes()) does, without building it in memory first: the
// header, then each piece written straight from where it is.
func (w *Writer) Seal(name string) (*os.File, error) {
	return seal(name, append([][]byte{w.header()}, w.parts...))
}

// Inherited opens the state at descriptor fd, which must be a sealed
// memfd (Sealed), and marks it close-on-exec again so that no terminal
// started from now on inherits it.
func Inherited(fd int) (*os.File, error) {
	if fd < 3 {
		return nil, fmt.Errorf("handover: state descriptor %d: not a state (0, 1 and 2 are the standard streams)", fd)
	}
	got, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("handover: state descriptor %d: not a sealed memfd: %w", fd, err)
	}
	if got&seals != seals {
		return nil, fmt.Errorf("handover: state descriptor %d: seals %#x, want %#x (a state that could still change)", fd, got, seals)
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "ahpd-state"), nil
}
