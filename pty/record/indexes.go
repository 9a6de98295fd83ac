package record

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// An index summary is what Index answers for one recording (its
// keyframes without their screens, its audit, its drops) and where each
// keyframe's line is, as of Size bytes of the index file. An index only
// grows (a recording continues in a new file, with a new id), so a
// summary is brought up to date by parsing what was appended since.
type indexSummary struct {
	id   string
	size int64 // index bytes summarized: up to the last whole line
	ix   Index
	kfAt []int64 // offset of keyframe k's line in the index
}

// Bounds of the summaries kept (Store.idxCache): the latest
// indexCacheEntries read, each of at most indexCacheLines keyframes and
// audit lines (about 100 bytes each kept, so at most some 25 MiB in all);
// a larger index is summarized anew at each request, one at a time.
const (
	indexCacheEntries = 8
	indexCacheLines   = 1 << 15
)

// summary returns id's index summary, parsing only what was appended
// since the one kept, if any. Summaries are made one at a time (idxMu),
// so the CPU and memory index requests cost are one parse's whatever the
// number of viewers asking.
func (s *Store) summary(id string) (*indexSummary, error) {
	if _, err := s.Info(id); err != nil {
		return nil, err
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	f, err := os.Open(filepath.Join(s.dir, id+IndexSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	var sum *indexSummary
	for i, c := range s.idxCache {
		if c.id == id {
			sum = c
			s.idxCache = append(s.idxCache[:i], s.idxCache[i+1:]...)
			break
		}
	}
	if sum != nil && sum.size == fi.Size() {
		s.idxCache = append([]*indexSummary{sum}, s.idxCache...)
		return sum, nil
	}
	if sum == nil || sum.size > fi.Size() {
		// First read, or a file that is not the one summarized.
		sum = &indexSummary{id: id, ix: Index{Keyframes: []Keyframe{}, Audit: []Audit{}}}
	} else {
		// Appended to since: copies, so that an Index handed out keeps
		// what it had.
		sum = &indexSummary{id: id, size: sum.size, ix: Index{
			Keyframes: append([]Keyframe(nil), sum.ix.Keyframes...), Audit: append([]Audit(nil), sum.ix.Audit...), Dropped: sum.ix.Dropped, DroppedAudit: sum.ix.DroppedAudit,
		}, kfAt: append([]int64(nil), sum.kfAt...)}
	}
	if _, err := f.Seek(sum.size, io.SeekStart); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	base := sum.size
	end, err := scanIndex(f, func(off int64, l IndexLine) bool {
		switch l.Type {
		case "keyframe":
			k := l.Keyframe
			k.Screen = ""
			sum.ix.Keyframes = append(sum.ix.Keyframes, k)
			sum.kfAt = append(sum.kfAt, base+off)
		case "audit":
			sum.ix.Audit = append(sum.ix.Audit, l.Audit)
		case "dropped":
			sum.ix.Dropped += l.Dropped
			sum.ix.DroppedAudit += l.DroppedAudit
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	sum.size = base + end
	s.idxParsed.Add(end)
	if len(sum.ix.Keyframes)+len(sum.ix.Audit) <= indexCacheLines {
		s.idxCache = append([]*indexSummary{sum}, s.idxCache...)
		if len(s.idxCache) > indexCacheEntries {
			s.idxCache = s.idxCache[:indexCacheEntries]
		}
	}
	return sum, nil
}
