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
//     shifted left; Delete (CSI 3 ~) the cell under it, with text there
//     or after it;
//   - left and right arrows move the cursor (right only with text under or
//     after the cursor: readline does not move past the end of the line).
// Anything else (Enter, control keys, other escape sequences, wide
// characters, a paste) is not predicted and makes the predictions that
// follow tentative.
//
// Judging (each time the host's output has been parsed, and at deadlines).
// AHP/1 has no echo acknowledgements (mosh has them), so which keys the
// host has handled is inferred from the screen. Each key predicted is kept
// with where it leaves the cursor, and each predicted cell with its
// versions, one per key that changed it (with keys in flight a cell may be
// set, cleared and set again):
//   - the host handles keys in order, so it has handled the keys up to the
//     one that leaves every predicted cell as the screen shows it and the
//     cursor where the screen has it. Several keys may fit (x, backspace,
//     x): the earliest is taken, which hides nothing (the overlay shows
//     each cell's last version), or the latest once a deadline has passed.
//     A key typed less than 0.8 × the smallest round trip ago cannot have
//     been echoed and does not fit. The keys and versions up to it are
//     done; if a cell changed to one of them, its epoch is confirmed;
//   - when the screen's cursor is where the last key leaves it, that key's
//     echo is due (1.5 × srtt) and the cells are not what it leaves, the
//     prediction was contradicted: the host handled the keys otherwise;
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
const DELETE = '\x1b[3~';

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
    // col → {base, seen, vs}: the cell's predicted versions vs, oldest
    // first, each {ch, seq, epoch, deadline, born}: what the cell shows
    // once the host has handled key seq. The last is what it will show; the
    // older ones are what earlier keys still in flight show on the way.
    // base is what it shows before the first of them, seen what the screen
    // showed at the last look.
    this.cells = new Map();
    // The keys predicted and not known to be handled, oldest first, each
    // {col, seq, epoch, deadline, born}: col is where the key leaves the
    // cursor. cursor is the last of them (where the cursor goes), or null:
    // where the screen has it.
    this._keys = [];
    this.cursor = null;
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

  /** pending is the number of predictions waiting for the host (cells and keys). */
  get pending() {
    return this.cells.size + this._keys.length;
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
    } else if (key === DELETE) {
      // Readline deletes under the cursor, and nothing at the end of the line.
      let text = false;
      for (let c = col; c < cols && !text; c++) text = shown(c) !== ' ';
      if (!text) return this._tentative();
      edits = [];
      for (let c = col; c < cols - 1; c++) edits.push([c, shown(c + 1)]);
      edits.push([cols - 1, ' ']);
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
      else if (ch !== real || inflight) this.cells.set(c, { base: real, seen: real, vs: [{ ch, ...p }] });
    }
    // The screen's cursor is where this key leaves it only if nothing is in
    // flight (it may be passing through on the way, arrow by arrow).
    if (next !== host.col || this.cells.size > 0 || inflight) {
      this.cursor = { col: next, ...p };
      this._keys.push(this.cursor);
    }
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
    let changed = false;
    for (const [col, e] of this.cells) {
      const real = this.screen.cell(this.row, col);
      if (real !== e.seen) changed = true;
      e.seen = real;
    }
    // The host handles keys in order: it has handled the keys up to some
    // key, which leaves every cell as the screen shows it and the cursor
    // where the screen has it. Within one write a cell may change back and
    // forth, so no single cell tells, and the states after several keys may
    // look alike (x, backspace, x): the earliest key that fits is taken,
    // which never hides a prediction (the overlay shows each cell's last
    // version), or, once a key's deadline has passed, the latest. Only keys
    // old enough to have been echoed are candidates.
    const keys = this._keys;
    const fits = (i) => keys[i].born <= soonest && keys[i].col === host.col && this._consistent(keys[i].seq);
    let late = keys.some((k) => k.deadline <= now);
    for (const e of this.cells.values()) {
      if (late) break;
      late = e.vs[0].deadline <= now;
    }
    let hit = -1;
    if (late) {
      for (let i = keys.length - 1; i >= 0 && hit < 0; i--) if (fits(i)) hit = i;
    } else {
      for (let i = 0; i < keys.length && hit < 0; i++) if (fits(i)) hit = i;
    }
    if (hit >= 0) {
      const S = keys[hit].seq;
      let shown = false; // a cell changed to a prediction: the key's epoch is confirmed
      for (const [col, e] of this.cells) {
        let k = -1;
        for (let i = 0; i < e.vs.length && e.vs[i].seq <= S; i++) k = i;
        if (k < 0) continue;
        if (changed && e.vs[k].ch !== e.base) shown = true;
        this.stats.confirmed += k + 1;
        e.base = e.vs[k].ch;
        e.vs.splice(0, k + 1);
        if (e.vs.length === 0) this.cells.delete(col);
      }
      if (shown && keys[hit].epoch > this.confirmedEpoch) this.confirmedEpoch = keys[hit].epoch;
      keys.splice(0, hit + 1);
      if (keys.length === 0) this.cursor = null;
    }
    // The screen's cursor is where the last key leaves it and that key's
    // echo is due (1.5 round trips: jitter passes a fifth of one), but the
    // cells are not what it leaves: the host handled the keys otherwise.
    const last = keys[keys.length - 1];
    const due = now - 1.5 * (this.srtt ?? 0);
    if (last && last.born <= due && last.col === host.col && !this._consistent(last.seq)) return this._fail('contradicted');
    for (const k of keys) if (k.deadline <= now) return this._fail('expired');
    for (const e of this.cells.values()) {
      // A cell whose keys are all handled (or gone) and shows its version: settled.
      if (keys.length === 0 && e.vs.every((v) => v.ch === e.seen)) continue;
      for (const v of e.vs) if (v.deadline <= now) return this._fail('expired');
    }
    if (keys.length === 0) this.cells.clear(); // every key handled: nothing is left to wait for
    if (this.cells.size === 0 && this.cursor === null) this.row = null;
    this._arm();
    this.onChange();
  }

  // _consistent reports whether every predicted cell shows (seen) what it
  // shows once the host has handled the keys up to seq.
  _consistent(seq) {
    for (const e of this.cells.values()) {
      let want = e.base;
      for (const v of e.vs) {
        if (v.seq > seq) break;
        want = v.ch;
      }
      if (want !== e.seen) return false;
    }
    return true;
  }

  _versions() {
    let n = this._keys.length;
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
    const had = this.row !== null || this._keys.length > 0;
    this.cells.clear();
    this.cursor = null;
    this._keys = [];
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
    for (const k of this._keys) due = Math.min(due, k.deadline);
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
