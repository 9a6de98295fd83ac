package ctl

import (
	"io"
	"time"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/pty"
)

// Predictive local echo for attach (issue 40), after mosh: while the round
// trip is long, a printable key, backspace and the left and right arrows
// are shown at once at the cursor, underlined, before the host echoes
// them. attach passes the host's output through to this terminal, so the
// predictor keeps a model of the host's screen (the daemon's own emulator,
// pty.Screen) fed with the same output: it says where the host's cursor
// is and what a cell really holds.
//
// The terminal is only ever drawn on between host output chunks that end
// outside any escape sequence (Screen.Ground), and before each chunk
// everything drawn is taken back: the predicted cells get what the model
// says they hold, the cursor and the pen go back to the host's. The host's
// bytes therefore always land on the screen the host thinks this terminal
// shows (a scroll cannot carry a predicted glyph away), and a resolved
// prediction is simply not drawn again. The cursor is put back by
// position (Screen.AppendRestore, which also makes a pending wrap and the
// character REP repeats again), not with DECSC/DECRC: those would
// overwrite the one cursor the program itself may have saved.
//
// A prediction is confirmed when the host's screen shows the predicted
// text in its cell (and, when that text was there already, when the
// host's cursor is where the prediction leaves it); confirming one
// confirms those before it. It is contradicted when the cell shows
// anything else, and it expires when neither happens within two round
// trips and predictMargin. A contradiction or an expiry drops every
// pending prediction and makes prediction tentative: predictions of a new
// epoch are kept but not shown until one of them is confirmed. Enter,
// control keys and escape sequences other than the arrows start a new
// epoch too, and nothing is predicted after them until the pending
// predictions are resolved and the host has written something. Nothing is
// predicted on the alternate screen (vim, less, htop), outside plain
// modes (insert mode, origin mode, another charset), nor when the host's
// screen is not this terminal's size (its lines wrap elsewhere). In the
// middle of a line's text a key is predicted as line editors handle it: a
// character is inserted and a backspace deletes, moving the rest of the
// text (not when it would reach the last column). A snapshot
// (terminal/reset) drops every prediction.
//
// A predictor is not safe for concurrent use: attach guards it, and every
// write to the terminal, with attacher.pmu.

// predictMode is --predict.
type predictMode int

const (
	predictNever  predictMode = iota // no prediction, no model of the screen
	predictAuto                      // while the round trip is above predictHigh
	predictAlways                    // whatever the round trip
)

// parsePredict parses --predict.
func parsePredict(s string) (predictMode, error) {
	switch s {
	case "auto", "":
		return predictAuto, nil
	case "always":
		return predictAlways, nil
	case "never":
		return predictNever, nil
	}
	return 0, usagef("attach: --predict %q: want auto, always or never", s)
}

// Thresholds and bounds (mosh's SRTT_TRIGGER_HIGH and _LOW).
const (
	predictHigh    = 30 * time.Millisecond  // auto starts predicting above this smoothed round trip
	predictLow     = 20 * time.Millisecond  // and stops below this one
	predictMargin  = 150 * time.Millisecond // added to two round trips before a prediction expires
	predictNoRTT   = time.Second            // the expiry while no round trip was measured (always)
	maxPredictions = 64                     // pending predictions; keys beyond are not predicted
)

// cursorPos is a cursor position; pending: a wrap is pending (a character
// was printed in the last column).
type cursorPos struct {
	x, y    int
	pending bool
}

// prediction is one predicted key: the cells it changes, all on row y
// (none for an arrow), and where it leaves the cursor.
type prediction struct {
	epoch   int
	y       int
	cells   []predCell
	after   cursorPos // the cursor after the key
	expires time.Time
}

// predCell is one cell a prediction changes.
type predCell struct {
	x     int
	text  string // what the cell shows, "" for blank (a space too)
	orig  string // what the host's screen held there when predicted
	drawn bool   // drawn on the terminal
}

type predictor struct {
	mode predictMode
	scr  *pty.Screen
	srtt time.Duration // smoothed round trip, 0: none measured yet
	on   bool          // auto: srtt went above predictHigh and not yet below predictLow

	pending []prediction
	epoch   int // the epoch of new predictions
	shown   int // predictions of epochs up to this one are drawn
	// hold: a key could not be predicted (or was a control key); none
	// is until the pending ones are resolved and the host wrote since.
	hold    bool
	wrote   bool // host output arrived since hold was set
	drawn   bool // the terminal shows predictions, or the cursor where they leave it
	locRows int  // this terminal's size (0: unknown)
	locCols int
	buf     []byte
}

func newPredictor(mode predictMode) *predictor {
	return &predictor{mode: mode, scr: pty.NewScreen(24, 80), epoch: 1}
}

// setRTT takes the smoothed round trip (attacher.probe's).
func (p *predictor) setRTT(srtt time.Duration) {
	p.srtt = srtt
	switch {
	case srtt > predictHigh:
		p.on = true
	case srtt < predictLow && p.on:
		p.on = false
		p.newEpoch() // keys go unpredicted now: start tentative when on again
	}
}

// missed notes a key sent without being predicted: the cursor of what
// is pending is no longer known.
func (p *predictor) missed() { p.newEpoch() }

// active reports whether new keys are predicted.
func (p *predictor) active() bool {
	return p.mode == predictAlways || p.mode == predictAuto && p.on
}

// busy reports whether predictions wait for the host (the RTT is then
// sampled more often).
func (p *predictor) busy() bool { return len(p.pending) > 0 }

// timeout is how long a prediction waits for its confirmation.
func (p *predictor) timeout() time.Duration {
	if p.srtt == 0 {
		return predictNoRTT
	}
	return 2*p.srtt + predictMargin
}

// deadline returns when the first pending prediction expires.
func (p *predictor) deadline() (time.Time, bool) {
	if len(p.pending) == 0 {
		return time.Time{}, false
	}
	d := p.pending[0].expires
	for _, q := range p.pending[1:] {
		if q.expires.Before(d) {
			d = q.expires
		}
	}
	return d, true
}

// setLocalSize records this terminal's size.
func (p *predictor) setLocalSize(rows, cols int) {
	p.locRows, p.locCols = rows, cols
}

// fits reports whether the host's screen has this terminal's size.
func (p *predictor) fits() bool {
	rows, cols := p.scr.Size()
	return p.locRows > 0 && rows == p.locRows && cols == p.locCols
}

// reset starts over for a snapshot of rows×cols (terminal/reset): the
// terminal is reset with it, so nothing drawn needs taking back.
func (p *predictor) reset(rows, cols int) {
	p.pending, p.drawn = p.pending[:0], false
	p.newEpoch()
	p.scr.Reset(rows, cols)
}

// resize applies terminal/resize: predictions are taken back and dropped.
func (p *predictor) resize(rows, cols int, w io.Writer) error {
	err := p.flush(w)
	p.scr.Resize(rows, cols)
	return err
}

// flush takes back what is drawn and drops every prediction (the session
// ends, or the screen changes size).
func (p *predictor) flush(w io.Writer) error {
	p.buf = p.undraw(p.buf[:0])
	p.pending = p.pending[:0]
	p.newEpoch()
	return p.write(w)
}

func (p *predictor) newEpoch() {
	p.epoch++
	p.hold, p.wrote = true, false
}

// host writes a chunk of the host's output to w: what is drawn is taken
// back first, the chunk updates the model, the predictions are judged
// against it, and those still pending and shown are drawn again.
func (p *predictor) host(data []byte, now time.Time, w io.Writer) error {
	b := p.undraw(p.buf[:0])
	if len(b) > 0 && len(data) <= 4096 {
		b = append(b, data...) // one write: no frame shows the chunk without the undraw
	} else {
		p.buf = b
		if err := p.write(w); err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		b = p.buf[:0]
	}
	p.scr.WriteBytes(data)
	p.wrote = true
	p.judge(now)
	p.buf = p.draw(b)
	return p.write(w)
}

// key predicts the effect of data (keys about to be sent to the host:
// predicted before they are sent, so that no echo can come back before
// its prediction). What is shown is drawn by redraw, or after the next
// chunk of output.
func (p *predictor) key(data []byte, now time.Time) {
	if !p.active() && len(p.pending) == 0 {
		return
	}
	p.predict(data, now)
}

// redraw draws the shown predictions again, new ones included.
func (p *predictor) redraw(w io.Writer) error {
	b := p.undraw(p.buf[:0])
	p.buf = p.draw(b)
	return p.write(w)
}

// tick expires what waited too long.
func (p *predictor) tick(now time.Time, w io.Writer) error {
	if len(p.pending) == 0 {
		return nil
	}
	b := p.undraw(p.buf[:0])
	p.judge(now)
	p.buf = p.draw(b)
	return p.write(w)
}

func (p *predictor) write(w io.Writer) error {
	if len(p.buf) == 0 {
		return nil
	}
	_, err := w.Write(p.buf)
	p.buf = p.buf[:0]
	return err
}

// blank makes a space and an erased cell the same.
func blank(s string) string {
	if s == " " {
		return ""
	}
	return s
}

// cursor is where the next key's effect is predicted: after the last
// pending prediction, else the host's cursor.
func (p *predictor) cursor() cursorPos {
	if n := len(p.pending); n > 0 {
		return p.pending[n-1].after
	}
	x, y, pending := p.scr.Cursor()
	return cursorPos{x, y, pending}
}

// predict adds predictions for data.
func (p *predictor) predict(data []byte, now time.Time) {
	for i := 0; i < len(data); {
		if p.hold {
			if len(p.pending) > 0 || !p.wrote {
				return
			}
			p.hold = false
		}
		c := data[i]
		switch {
		case c == 0x1b && i+2 < len(data) && (data[i+1] == '[' || data[i+1] == 'O') && (data[i+2] == 'C' || data[i+2] == 'D'):
			if !p.arrow(data[i+2] == 'C', now) {
				return
			}
			i += 3
		case c == 0x7f || c == 0x08:
			if !p.backspace(now) {
				return
			}
			i++
		case c < 0x20 || c == 0x1b:
			p.newEpoch() // Enter, a control key, an escape sequence
			return
		default:
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 || r < 0xa0 && r >= 0x7f || pty.RuneWidth(r) != 1 {
				p.newEpoch()
				return
			}
			if !p.char(string(data[i:i+n]), now) {
				return
			}
			i += n
		}
	}
}

// usable reports whether a key may be predicted now; when not, prediction
// holds until the pending ones are resolved.
func (p *predictor) usable() bool {
	if !p.active() || p.scr.Alt() || !p.scr.Plain() || !p.fits() || len(p.pending) >= maxPredictions {
		p.newEpoch()
		return false
	}
	return true
}

// text returns what cell (x, y) shows once the pending predictions are
// applied.
func (p *predictor) text(x, y int) string {
	for i := len(p.pending) - 1; i >= 0; i-- {
		if q := &p.pending[i]; q.y == y {
			for _, c := range q.cells {
				if c.x == x {
					return c.text
				}
			}
		}
	}
	return blank(p.scr.Text(x, y))
}

// lineEnd returns the column after the last predicted text on row y
// (0 for a blank row).
func (p *predictor) lineEnd(y int) int {
	_, cols := p.scr.Size()
	for x := cols - 1; x >= 0; x-- {
		if p.text(x, y) != "" {
			return x + 1
		}
	}
	return 0
}

// anyWide reports whether a cell of row y in [from, to) is part of a wide
// character.
func (p *predictor) anyWide(from, to, y int) bool {
	for x := from; x < to; x++ {
		if p.scr.Wide(x, y) {
			return true
		}
	}
	return false
}

// cell returns a predCell for (x, y) that will show text.
func (p *predictor) cell(x, y int, text string) predCell {
	return predCell{x: x, text: text, orig: blank(p.scr.Text(x, y))}
}

func (p *predictor) add(q prediction, now time.Time) {
	q.epoch = p.epoch
	q.expires = now.Add(p.timeout())
	p.pending = append(p.pending, q)
}

// char predicts a printable character at the cursor: written there at
// the end of a line's text; inserted before the rest of it, as line
// editors do, in the middle (not when that would push text into the last
// column, where line editors wrap in their own ways).
func (p *predictor) char(s string, now time.Time) bool {
	if !p.usable() {
		return false
	}
	c := p.cursor()
	_, cols := p.scr.Size()
	end := p.lineEnd(c.y)
	if c.pending || end > c.x && (end >= cols-1 || p.anyWide(c.x, end, c.y)) || p.scr.Wide(c.x, c.y) {
		p.newEpoch()
		return false
	}
	cells := []predCell{p.cell(c.x, c.y, blank(s))}
	for x := c.x; x < end; x++ {
		cells = append(cells, p.cell(x+1, c.y, p.text(x, c.y)))
	}
	after := cursorPos{x: c.x + 1, y: c.y}
	if after.x >= cols {
		after = cursorPos{x: cols - 1, y: c.y, pending: true}
	}
	p.add(prediction{y: c.y, cells: cells, after: after}, now)
	return true
}

// backspace predicts the character before the cursor deleted, and the
// rest of the line's text moved left over it.
func (p *predictor) backspace(now time.Time) bool {
	if !p.usable() {
		return false
	}
	c := p.cursor()
	end := max(p.lineEnd(c.y), c.x)
	if c.pending || c.x == 0 || p.anyWide(c.x-1, end, c.y) {
		p.newEpoch()
		return false
	}
	var cells []predCell
	for x := c.x - 1; x < end-1; x++ {
		cells = append(cells, p.cell(x, c.y, p.text(x+1, c.y)))
	}
	cells = append(cells, p.cell(end-1, c.y, ""))
	p.add(prediction{y: c.y, cells: cells, after: cursorPos{x: c.x - 1, y: c.y}}, now)
	return true
}

// arrow predicts the cursor moving over text: left when it is not in the
// first column, right when there is text under it.
func (p *predictor) arrow(right bool, now time.Time) bool {
	if !p.usable() {
		return false
	}
	c := p.cursor()
	x := c.x - 1
	if right {
		x = c.x + 1
		if p.text(c.x, c.y) == "" {
			p.newEpoch()
			return false
		}
	}
	_, cols := p.scr.Size()
	if c.pending || x < 0 || x >= cols || p.scr.Wide(x, c.y) || p.scr.Wide(c.x, c.y) {
		p.newEpoch()
		return false
	}
	p.add(prediction{after: cursorPos{x: x, y: c.y}}, now)
	return true
}

// verdicts of judge.
const (
	waiting = iota
	confirmed
	contradicted
)

// verdict judges pending prediction i against the host's screen and
// cursor. It is confirmed when every cell shows its text and the host
// shows a change (or its cursor is where the key leaves it). A cell that
// shows what it held before the key, or what an earlier pending
// prediction put there or found there, is still waiting; anything else
// contradicts it.
func (p *predictor) verdict(i int, host cursorPos) int {
	q := &p.pending[i]
	all, changed := true, false
	for _, c := range q.cells {
		t := blank(p.scr.Text(c.x, q.y))
		if t == c.text {
			changed = changed || t != c.orig
			continue
		}
		all = false
		if t != c.orig && !p.earlier(i, c.x, t) {
			return contradicted
		}
	}
	// A character typed at the end of a line is also confirmed by the
	// host's cursor past it: a space typed over a blank shows no change,
	// and its echo may come with the next key's.
	passed := len(q.cells) == 1 && q.after.x > q.cells[0].x && host.y == q.y && host.x >= q.after.x
	if all && (changed || host == q.after || passed) {
		return confirmed
	}
	return waiting
}

// earlier reports whether a pending prediction before i put t in cell
// (x, its row) or found it there.
func (p *predictor) earlier(i, x int, t string) bool {
	y := p.pending[i].y
	for _, r := range p.pending[:i] {
		if r.y != y {
			continue
		}
		for _, c := range r.cells {
			if c.x == x && (t == c.text || t == c.orig) {
				return true
			}
		}
	}
	return false
}

// judge resolves the pending predictions against the model of the host's
// screen. Nothing may be drawn when it is called.
func (p *predictor) judge(now time.Time) {
	if len(p.pending) == 0 {
		return
	}
	if p.scr.Alt() {
		p.drop()
		return
	}
	x, y, pend := p.scr.Cursor()
	host := cursorPos{x, y, pend}
	last := -1
	for i := range p.pending {
		switch p.verdict(i, host) {
		case contradicted:
			p.drop()
			return
		case confirmed:
			last = i
		}
	}
	for _, q := range p.pending[:last+1] {
		p.shown = max(p.shown, q.epoch)
	}
	p.pending = append(p.pending[:0], p.pending[last+1:]...)
	for _, q := range p.pending {
		if !now.Before(q.expires) {
			p.drop()
			return
		}
	}
}

// drop forgets every pending prediction and makes prediction tentative.
func (p *predictor) drop() {
	p.pending = p.pending[:0]
	p.newEpoch()
}

// undraw appends what takes back everything drawn: the true cells, the
// host's cursor and pen.
func (p *predictor) undraw(b []byte) []byte {
	if !p.drawn {
		return b
	}
	p.drawn = false
	for i := range p.pending {
		q := &p.pending[i]
		for k := range q.cells {
			if c := &q.cells[k]; c.drawn {
				b = p.trueCell(b, c.x, q.y)
				c.drawn = false
			}
		}
	}
	return p.restore(b)
}

// trueCell appends what redraws cell (x, y) as the host's screen holds it.
func (p *predictor) trueCell(b []byte, x, y int) []byte {
	if x > 0 && p.scr.Wide(x, y) && p.scr.Text(x, y) == "" {
		x-- // the second half of a wide character: redraw the first
	}
	b = pty.AppendCUP(b, x, y)
	return p.scr.AppendCell(b, x, y)
}

// restore appends what puts the terminal's cursor, pen and last printed
// character back as the host has them.
func (p *predictor) restore(b []byte) []byte { return p.scr.AppendRestore(b) }

// draw appends the shown pending predictions and puts the cursor after
// the last of them, when the host's output so far ended outside any
// sequence.
func (p *predictor) draw(b []byte) []byte {
	if !p.scr.Ground() || p.scr.Alt() {
		return b
	}
	var at cursorPos
	nx, ny := -1, -1 // where the terminal's cursor is after the last cell written
	for i := range p.pending {
		q := &p.pending[i]
		if q.epoch > p.shown {
			break
		}
		if !p.drawn {
			b = p.scr.AppendPen(b)
			b = append(b, "\x1b[4m"...)
			p.drawn = true
		}
		at = q.after
		for k := range q.cells {
			c := &q.cells[k]
			if c.x != nx || q.y != ny {
				b = pty.AppendCUP(b, c.x, q.y)
			}
			nx, ny = c.x+1, q.y
			if c.text == "" {
				b = append(b, ' ')
			} else {
				b = append(b, c.text...)
			}
			c.drawn = true
		}
	}
	if p.drawn {
		b = pty.AppendCUP(b, at.x, at.y)
	}
	return b
}
