package pty

// Skipping output the scrollback will not keep.
//
// During a flood most of what the emulator applies is scrolled out of the
// scrollback again before anyone could see it: with 10,000 lines of
// scrollback, 64 MiB of `cat` leaves the last 10,024 rows, and the rest
// was written cell by cell only to be pushed into the scrollback ring and
// overwritten there. When the emulator has a long run of plain text to
// apply (printable ASCII, CR and LF only: no escape sequence, no other
// control, no query, no resize), and the end of that run is known to
// scroll at least rows + scrollback times, every cell written before a
// point far enough back leaves the scrollback before the run ends. Those
// bytes change nothing else: plain text moves the cursor and writes cells,
// and after a CR preceded by at least `rows` LFs the cursor is at column 0
// of the bottom row, with no pending wrap and no character to repeat
// (lastChar is reset by every control). So the emulator sets that cursor
// state and applies only the rest. Cells and scrollback lines left from
// before (stale, where the full run would have written new ones) are all
// scrolled out by the rest before it ends, which is why a caller must not
// let anyone read the emulator between skipTo and the end of the run.
//
// The run has to begin with the parser in its ground state, on the
// normal screen with the scroll region the whole screen: then every LF
// at the bottom row scrolls a line into the scrollback, and so does every
// wrap when autowrap is on. The count of those scrolls in the rest is a
// lower bound (a line split between two items counts its wraps in each
// part): skipping is only ever less than it could be, never wrong.

// plainRows reports whether s is plain text (bytes 0x20–0x7E, CR, LF)
// and, if so, how many times it scrolls at least when applied at the
// bottom row of a full-screen scroll region with cols columns: once per
// LF and, with autowrap, once per cols printable characters after the
// first of a run between controls. lfs is its count of LFs.
func plainRows(s string, cols int, autowrap bool) (rows, lfs int, ok bool) {
	for i := 0; i < len(s); {
		j := printableEnd(s, i)
		if autowrap && j-i > 1 {
			rows += (j - i - 1) / cols
		}
		if j == len(s) {
			break
		}
		switch s[j] {
		case '\n':
			rows++
			lfs++
		case '\r':
		default:
			return 0, 0, false
		}
		i = j + 1
	}
	return rows, lfs, true
}

// skippable returns where in texts (applied one after another from the
// emulator's present state) the emulator may jump with skipTo: item k, at
// byte off (just after a CR), so that texts[k][off:] and the texts after
// it are all that must be written; ok is false when nothing can be
// skipped. texts must hold no queries and no resize (the caller stops a
// run at them).
func (e *emulator) skippable(texts []string) (k, off int, ok bool) {
	scr := e.cur()
	if e.st != stGround || e.alt || scr.top != 0 || scr.bot != e.rows-1 || len(texts) < 2 {
		return 0, 0, false
	}
	need := e.rows + max(e.sb.max, 0)
	// Wraps count only where printASCII wraps plain text itself.
	cs := e.charsets[e.gl]
	wraps := e.autowrap && !e.insert && (cs == 0 || cs == 'B')
	// From the end: the items whose scrolls, all of them after the skip
	// point, push every stale row out of the screen and the scrollback.
	rows, k := 0, len(texts)
	for rows < need {
		if k == 0 {
			return 0, 0, false
		}
		k--
		r, _, plain := plainRows(texts[k], e.cols, wraps)
		if !plain {
			return 0, 0, false
		}
		rows += r
	}
	// Item k and those after it are written. Before it: plain text with
	// at least e.rows LFs before the skip point, which is the last CR of
	// the items before k (written from there on).
	lfs := 0
	for i := 0; i < k; i++ {
		_, n, plain := plainRows(texts[i], e.cols, wraps)
		if !plain {
			return 0, 0, false
		}
		lfs += n
	}
	for i := k - 1; i >= 0; i-- {
		t := texts[i]
		for j := len(t) - 1; j >= 0; j-- {
			switch t[j] {
			case '\r':
				if lfs >= e.rows {
					return i, j + 1, true
				}
				return 0, 0, false
			case '\n':
				lfs--
			}
		}
	}
	return 0, 0, false
}

// skipTo sets the state that plain text leaves just after a CR that
// follows at least e.rows LFs: column 0 of the bottom row, no pending
// wrap, nothing to repeat. The cells are left as they are (see above).
func (e *emulator) skipTo() {
	e.x, e.y = 0, e.rows-1
	e.pending = false
	e.lastChar = 0
}
