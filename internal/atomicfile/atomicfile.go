// Package atomicfile replaces a file whole: a reader sees the old file or
// the new one, never a part. The state files of the daemon (tokens.json,
// tcp-allow.json) are written with it, and ahpctl's recordings export.
package atomicfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file (mode 0600, from
// os.CreateTemp) in the same directory is written, synced and renamed
// over path, and the directory is synced so that the rename is durable
// (a failure of that last sync leaves the new file in place and is not
// reported). On error the temporary file is removed and path is as it
// was.
func Write(path string, data []byte) error {
	return WriteFrom(path, bytes.NewReader(data))
}

// WriteFrom is Write of what r holds up to its end (ahpctl recordings
// export streams a recording so).
func WriteFrom(path string, r io.Reader) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
