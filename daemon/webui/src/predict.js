// predict.js — predictive local echo (issue 40), after mosh's
// (Winstein & Balakrishnan, "Mosh: An Interactive Remote Shell for Mobile
// Clients", 2012, and mosh's terminaloverlay.cc): while the round trip is
// long, printable keys and simple edits appear at once at the cursor,
// marked, and the host's output confirms or repairs them.
//
// DOM-free: the terminal is read through a small screen adapter and the
// clock and timers are injected, so node tests drive it. The predictions
// are never written into the terminal's buffer: the view (terminal.js)
// draws what overlay() returns in a layer above it, so the buffer is
// always the host's, and a wrong prediction vanishes when it is removed.
//
// What is predicted, on the cursor's row only:
//   - a printable character (U+0020–U+007E, U+00A0–U+024F: one cell wide)
//     is inserted at the cursor, the rest of the row shifted right (as
//     readline does), and the cursor moves right;
//   - backspace (DEL or BS) deletes the cell left of the cursor, the rest
//     shifted left;
//   - left and right arrows move the cursor (right only with text under or
//     after the cursor: readline does not move past the end of the line).
// Anything else (Enter, control keys, other escape sequences, wide
// characters, a paste) is not predicted and makes the predictions that
// follow tentative.
//
// Judging (each time the host's output has been parsed, and at deadlines).
// AHP/1 has no echo acknowledgements (mosh has them), so which keys the
// host has handled is inferred from the screen:
//   - each predicted cell keeps its versions, one per key that changed it,
//     oldest first (with keys in flight a cell may be set, cleared and set
//     again); a cell that changes to one of its versions confirms the
//     oldest such and drops the ones before it, and that key's epoch is
//     confirmed. A change sooner than 0.8 × the smallest round trip after
//     the key cannot be its echo (an older key's output that happens to
//     match) and confirms nothing; a cell that already shows its version
//     settles, unconfirmed, once the host is past its key;
//   - the predicted cursor is where the screen's is once its key is old
//     enough to have been echoed (the cursor passes through columns on its
//     way through arrow keys);
//   - predicted cells of keys older than a confirmed one that the screen
//     does not show were contradicted: the host handled the later key, so
//     it handled them differently;
//   - a prediction not confirmed by its deadline (2 × srtt + a margin) has
//     expired: echo is off (a password prompt, `read -s`) or the program
//     does something else;
//   - a contradiction or an expiry removes every prediction and makes
//     prediction tentative: new predictions are made (so they can be
//     confirmed) but not shown until one of them is confirmed (mosh's
//     epochs). After a tentative key (Enter, a control key) the same holds.
//   - the cursor leaving the predicted row (Enter, output, a scroll), the
//     alternate screen (full-screen programs: vim, less, tmux), a snapshot
//     or a resize (reset()) removes every prediction; nothing is predicted
//     on the alternate screen.
// Prediction starts tentative, so the first key shown is one whose echo
// has been seen on this row: a prompt that does not echo never shows one.
//
// Modes: 'auto' predicts while the smoothed round trip is above
// AUTO_ON_MS (30 ms) and stops below AUTO_OFF_MS (20 ms; mosh's trigger
// and its hysteresis), 'always', 'never'.

export const MODES = ['auto', 'always', 'never'];
export const MODE_DEFAULT = 'auto';
export const AUTO_ON_MS = 30;
export const AUTO_OFF_MS = 20;
/** TIMEOUT_MARGIN_MS is added to 2 × srtt for a prediction's deadline. */
export const TIMEOUT_MARGIN_MS = 100;
/** TIMEOUT_MIN_MS is the shortest deadline (no srtt yet, a tiny one under 'always'). */
export const TIMEOUT_MIN_MS = 250;
/** MAX_PENDING bounds the predictions kept (cells of one row plus the cursor). */
export const MAX_PENDING = 512;

const PRINTABLE = /^[\x20-\x7e\u00a0-\u024f]$/;
const LEFT = new Set(['\x1b[D', '\x1bOD']);
const RIGHT = new Set(['\x1b[C', '\x1bOC']);
const BACKSPACE = new Set(['\x7f', '\b']);

/** tokens splits input data into keys: one escape sequence (CSI/SS3) or one code point each. */
export function tokens(data) {
  const out = [];
  const re = /\x1b\[[0-?]*[ -/]*[@-~]|\x1bO[@-~]|\x1b.?|[^]/gu;
  let m;
  while ((m = re.exec(data)) !== null) out.push(m[0]);
  return out;
}

/**
 * Predictor keeps the predictions of one terminal.
 * screen: {alt() → bool, cursor() → {row, col} (row in buffer lines, not
 * the viewport), cell(row, col) → string (one character, ' ' for blank),
 * cols() → number}.
 * options: {mode, now() ms, setTimeout, clearTimeout, onChange() (the
 * overlay changed: redraw)}.
 */
export class Predictor {
  constructor(screen, options = {}) {
    this.screen = screen;
    this._now = options.now ?? (() => globalThis.performance.now());
    this._setTimeout = options.setTimeout ?? ((f, ms) => setTimeout(f, ms));
    this._clearTimeout = options.clearTimeout ?? ((t) => clearTimeout(t));
    this.onChange = options.onChange ?? (() => {});
    this.mode = MODES.includes(options.mode) ? options.mode : MODE_DEFAULT;
    this.srtt = null;
    this.minRtt = 0;
    this._auto = false; // auto mode's state, with hysteresis
    this.allowed = true; // the view's say: control role, focused, may type
    // Epochs (mosh): predictions of an epoch above confirmedEpoch are
    // tentative, made but not shown.
    this.epoch = 1;
    this.confirmedEpoch = 0;
    this._seq = 0; // key counter
    this.row = null; // the row predicted on, or null: nothing pending
    // col → {seen, vs}: the cell's predicted versions vs, oldest first,
    // each {ch, seq, epoch, deadline, born}: what the cell shows after key
    // seq. The last is what it will show; the older ones are what earlier
    // keys still in flight show on the way (their echoes come first, in
    // order). seen is what the screen showed at the last look: only a
    // change of the cell confirms a version.
    this.cells = new Map();
    this.cursor = null; // {col, seq, epoch, deadline}: where the cursor goes, or null: where the screen has it
    this._timer = null;
    this._due = Infinity;
    this.stats = { predicted: 0, shown: 0, confirmed: 0, contradicted: 0, expired: 0, moved: 0, tentative: 0 };
  }

  /** setMode sets 'auto', 'always' or 'never'. */
  setMode(mode) {
    if (!MODES.includes(mode) || mode === this.mode) return;
    this.mode = mode;
    if (!this.active) this._clear();
  }

  /**
   * setRtt gives the smoothed round trip (ms), for auto mode and the
   * deadlines, and the smallest recent one (default srtt): no echo comes
   * back sooner, so a cell that shows the predicted character sooner
   * than that after the key shows an older key's output, not its echo.
   */
  setRtt(srtt, min = srtt) {
    if (!(srtt >= 0)) return;
    this.srtt = srtt;
    this.minRtt = min >= 0 ? Math.min(min, srtt) : srtt;
    if (srtt > AUTO_ON_MS) this._auto = true;
    else if (srtt < AUTO_OFF_MS) this._auto = false;
    if (!this.active) this._clear();
  }

  /** setAllowed says whether this page may type here now (control role, focused, a live subscription). */
  setAllowed(v) {
    this.allowed = !!v;
    if (!this.allowed) this._clear();
  }

  /** active is whether keys are predicted now. */
  get active() {
    if (!this.allowed || this.mode === 'never') return false;
    return this.mode === 'always' || this._auto;
  }

  /** timeoutMs is how long a prediction waits for its confirmation. */
  get timeoutMs() {
    return Math.max(TIMEOUT_MIN_MS, 2 * (this.srtt ?? 0) + TIMEOUT_MARGIN_MS);
  }

  /**
   * input takes what the user typed (xterm's onData), before it is sent.
   * It returns whether the overlay changed.
   */
  input(data) {
    if (!this.active) return false;
    if (this.screen.alt()) {
      this._clear();
      return false;
    }
    const before = this.stats.shown;
    for (const key of tokens(data)) this._key(key);
    this._arm();
    this.onChange();
    return this.stats.shown !== before;
  }

  /** output is called once the host's output has been parsed: predictions are judged. */
  output() {
    if (this.row === null && this.cursor === null) return;
    this._judge();
  }

  /** reset forgets every prediction (a snapshot, a resize, a new subscription) and starts tentative. */
  reset() {
    this._clear();
    this._tentative();
  }

  /**
   * overlay returns what to draw: {row, cells: [{col, ch}], cursor: col |
   * null}, or null when nothing is shown. row is a buffer line.
   */
  overlay() {
    if (this.row === null) return null;
    const cells = [];
    for (const [col, { vs }] of this.cells) {
      const p = vs[vs.length - 1];
      if (p.epoch <= this.confirmedEpoch && this.screen.cell(this.row, col) !== p.ch) cells.push({ col, ch: p.ch });
    }
    const cur = this.cursor && this.cursor.epoch <= this.confirmedEpoch ? this.cursor.col : null;
    if (cells.length === 0 && cur === null) return null;
    cells.sort((a, b) => a.col - b.col);
    return { row: this.row, cells, cursor: cur };
  }

  /** pending is the number of predictions waiting for the host (cells and the cursor). */
  get pending() {
    return this.cells.size + (this.cursor ? 1 : 0);
  }

  dispose() {
    this._clear();
  }

  // ---- keys --------------------------------------------------------------

  _key(key) {
    const host = this.screen.cursor();
    if (this.row !== null && host.row !== this.row) {
      // The host moved to another row since: what was predicted is stale.
      this._fail('moved');
    }
    const row = this.row ?? host.row;
    const col = this.cursor ? this.cursor.col : host.col;
    const cols = this.screen.cols();
    const shown = (c) => this.cells.get(c)?.vs.at(-1).ch ?? this.screen.cell(row, c);
    let edits = null; // [col, ch]
    let next = col;
    if (PRINTABLE.test(key)) {
      if (col >= cols - 1) return this._tentative(); // the wrap is the host's to decide
      edits = [[col, key]];
      let tail = false;
      for (let c = col; c < cols; c++) if (shown(c) !== ' ') tail = true;
      if (tail) for (let c = cols - 1; c > col; c--) edits.push([c, shown(c - 1)]);
      next = col + 1;
    } else if (BACKSPACE.has(key)) {
      if (col === 0) return this._tentative();
      edits = [];
      for (let c = col - 1; c < cols - 1; c++) edits.push([c, shown(c + 1)]);
      edits.push([cols - 1, ' ']);
      next = col - 1;
    } else if (LEFT.has(key)) {
      if (col === 0) return this._tentative();
      next = col - 1;
    } else if (RIGHT.has(key)) {
      // Readline does not move past the end of the line: predicted only
      // with text under or after the cursor.
      let text = false;
      for (let c = col; c < cols && !text; c++) text = shown(c) !== ' ';
      if (col >= cols - 1 || !text) return this._tentative();
      next = col + 1;
    } else {
      return this._tentative();
    }
    const seq = ++this._seq;
    const deadline = this._now() + this.timeoutMs;
    const p = { seq, epoch: this.epoch, deadline, born: this._now() };
    const inflight = this.pending > 0;
    this.row = row;
    for (const [c, ch] of edits ?? []) {
      const e = this.cells.get(c);
      // A cell that keeps its predicted character keeps the earlier key's
      // prediction: that key's echo is what will show it.
      if (e && e.vs[e.vs.length - 1].ch === ch) continue;
      const real = this.screen.cell(row, c);
      if (e) e.vs.push({ ch, ...p });
      // The screen shows it already. With nothing in flight that is final;
      // with earlier keys in flight their echoes may still change the cell,
      // so the prediction is kept (not drawn while the screen agrees).
      else if (ch !== real || inflight) this.cells.set(c, { seen: real, vs: [{ ch, ...p }] });
    }
    // The screen's cursor is where this key leaves it only if nothing is in
    // flight (it may be passing through on the way, arrow by arrow).
    this.cursor = next === host.col && this.cells.size === 0 && !inflight ? null : { col: next, ...p };
    if (this.row !== null && this.cells.size === 0 && this.cursor === null) this.row = null;
    if (this._versions() > MAX_PENDING) return this._fail('expired');
    this.stats.predicted++;
    if (this.epoch <= this.confirmedEpoch) this.stats.shown++;
  }

  // ---- judging -----------------------------------------------------------

  _judge() {
    if (this.screen.alt()) return this._clear();
    const host = this.screen.cursor();
    if (this.row !== null && host.row !== this.row) return this._fail('moved');
    const now = this._now();
    // Keys typed after soonest cannot have been echoed yet (a fifth of the
    // smallest round trip is left for jitter).
    const soonest = now - 0.8 * this.minRtt;
    // A cell that changed to one of its versions confirms the oldest such:
    // the versions before it were shown on the way, or skipped.
    let confirmedSeq = 0;
    for (const [col, e] of this.cells) {
      const real = this.screen.cell(this.row, col);
      if (real === e.seen) continue;
      e.seen = real;
      const hit = e.vs.findIndex((v) => v.ch === real && v.born <= soonest);
      if (hit < 0) continue;
      const v = e.vs[hit];
      confirmedSeq = Math.max(confirmedSeq, v.seq);
      this.stats.confirmed++;
      if (v.epoch > this.confirmedEpoch) this.confirmedEpoch = v.epoch;
      e.vs.splice(0, hit + 1);
      if (e.vs.length === 0) this.cells.delete(col);
    }
    const cur = this.cursor;
    // The host has handled every key up to done: a confirmed cell's, or
    // the last key's when the cursor is where it was predicted and no cell
    // waits for a change.
    let done = confirmedSeq;
    let waiting = false;
    for (const e of this.cells.values()) if (e.vs.some((v) => v.ch !== e.seen)) waiting = true;
    // (The cursor passes through many columns while the host works through
    // arrow keys: where it was predicted counts only once the key is old
    // enough to have been echoed.)
    if (cur && host.col === cur.col && (cur.seq <= confirmedSeq || (!waiting && cur.born <= soonest))) {
      this.cursor = null; // the screen's cursor is where it was predicted
      done = Math.max(done, cur.seq);
      if (cur.epoch > this.confirmedEpoch && cur.seq <= confirmedSeq) this.confirmedEpoch = cur.epoch;
    }
    for (const [col, e] of this.cells) {
      const v = e.vs[0];
      const match = e.seen === v.ch;
      // The host handled a later key: it handled this one otherwise.
      if (!match && v.seq < confirmedSeq) return this._fail('contradicted');
      if (match) {
        // The screen showed it all along: settled once the host is past
        // its key (or at its deadline); nothing to draw meanwhile.
        if (v.seq <= done || this.cursor === null || v.deadline <= now) {
          e.vs.shift();
          if (e.vs.length === 0) this.cells.delete(col);
        }
      } else if (v.deadline <= now) return this._fail('expired');
    }
    if (this.cursor) {
      if (this.cursor.seq <= confirmedSeq && host.col !== this.cursor.col) return this._fail('contradicted');
      if (this.cursor.deadline <= now) return this._fail('expired');
    }
    if (this.cells.size === 0 && this.cursor === null) this.row = null;
    this._arm();
    this.onChange();
  }

  _versions() {
    let n = this.cursor ? 1 : 0;
    for (const e of this.cells.values()) n += e.vs.length;
    return n;
  }

  _fail(why) {
    this.stats[why]++;
    this._clear();
    this._tentative();
  }

  _tentative() {
    if (this.epoch <= this.confirmedEpoch) this.stats.tentative++;
    this.epoch = Math.max(this.epoch, this.confirmedEpoch) + 1;
  }

  _clear() {
    const had = this.row !== null || this.cursor !== null;
    this.cells.clear();
    this.cursor = null;
    this.row = null;
    if (this._timer !== null) this._clearTimeout(this._timer);
    this._timer = null;
    this._due = Infinity;
    if (had) this.onChange();
  }

  // _arm keeps one timer at the earliest deadline, to judge expiries when
  // no output comes (echo off).
  _arm() {
    let due = Infinity;
    for (const e of this.cells.values()) due = Math.min(due, e.vs[0].deadline);
    if (this.cursor) due = Math.min(due, this.cursor.deadline);
    if (due === this._due) return;
    if (this._timer !== null) this._clearTimeout(this._timer);
    this._timer = null;
    this._due = due;
    if (due === Infinity) return;
    this._timer = this._setTimeout(() => {
      this._timer = null;
      this._due = Infinity;
      this._judge();
    }, Math.max(0, due - this._now()));
  }
}
