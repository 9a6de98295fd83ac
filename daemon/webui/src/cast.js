// cast.js — asciicast v2 text to events, for the recordings player
// (player.js). No DOM, no I/O: the player feeds it the text that
// recordings/read returns.
//
// The format (https://docs.asciinema.org/manual/asciicast/v2/): line 1 is
// the header, a JSON object with version 2 and the terminal's width and
// height; every other line is one event, a JSON array
// [seconds, code, data]: "o" output, "i" input, "r" a resize to
// "COLSxROWS", "m" a marker. Seconds count from the header's timestamp and
// never decrease.
//
// Bad input is refused, never repaired: each error names the line and what
// is wrong with it. The work is linear in the input and a line is held at
// most LINE_MAX_CHARS long, so a huge input ends in an error, not a hang.

/** LINE_MAX_CHARS bounds one line (UTF-16 code units): the daemon keeps event lines ≤ 64 KiB. */
export const LINE_MAX_CHARS = 1 << 20;

/** SIZE_MAX bounds a recording's columns and rows (the header's and an "r" event's). */
export const SIZE_MAX = { cols: 4096, rows: 4096 };

/** EVENT_CODES are the event codes of asciicast v2. */
export const EVENT_CODES = new Set(['o', 'i', 'r', 'm']);

/** CastError is bad asciicast text; line is its 1-based line number (0: unknown). */
export class CastError extends Error {
  constructor(line, message) {
    super(line ? `line ${line}: ${message}` : message);
    this.name = 'CastError';
    this.line = line;
  }
}

const show = (s) => (s.length > 40 ? JSON.stringify(s.slice(0, 40)) + '…' : JSON.stringify(s));

function parseJSON(text, line) {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new CastError(line, `not JSON (${e.message}): ${show(text)}`);
  }
}

/**
 * parseHeader parses the header line and returns {width, height,
 * timestamp, title, env}.
 */
export function parseHeader(text) {
  const h = parseJSON(text, 1);
  if (h === null || typeof h !== 'object' || Array.isArray(h)) {
    throw new CastError(1, 'the header is not a JSON object');
  }
  if (h.version !== 2) throw new CastError(1, `version ${JSON.stringify(h.version)}, want 2`);
  for (const [k, max] of [['width', SIZE_MAX.cols], ['height', SIZE_MAX.rows]]) {
    if (!Number.isInteger(h[k]) || h[k] < 1 || h[k] > max) {
      throw new CastError(1, `${k} ${JSON.stringify(h[k])} is not an integer from 1 to ${max}`);
    }
  }
  return {
    width: h.width,
    height: h.height,
    timestamp: typeof h.timestamp === 'number' ? h.timestamp : null,
    title: typeof h.title === 'string' ? h.title : '',
    env: h.env && typeof h.env === 'object' ? h.env : {},
  };
}

/** parseSize parses an "r" event's "COLSxROWS" into {cols, rows}, or throws. */
export function parseSize(data, line = 0) {
  const m = /^(\d{1,5})x(\d{1,5})$/.exec(data);
  const cols = m ? Number(m[1]) : 0;
  const rows = m ? Number(m[2]) : 0;
  if (!m || cols < 1 || rows < 1 || cols > SIZE_MAX.cols || rows > SIZE_MAX.rows) {
    throw new CastError(line, `resize ${show(data)} is not COLSxROWS within ${SIZE_MAX.cols}x${SIZE_MAX.rows}`);
  }
  return { cols, rows };
}

/**
 * parseEvent parses one event line into {time, code, data} (an "r" event
 * also has cols and rows). prevTime is the previous event's time: a time
 * before it is refused.
 */
export function parseEvent(text, line = 0, prevTime = 0) {
  const e = parseJSON(text, line);
  if (!Array.isArray(e) || e.length !== 3) throw new CastError(line, `an event is [seconds, code, data]: ${show(text)}`);
  const [time, code, data] = e;
  if (typeof time !== 'number' || !Number.isFinite(time) || time < 0) {
    throw new CastError(line, `time ${JSON.stringify(time)} is not a number ≥ 0`);
  }
  if (time < prevTime) throw new CastError(line, `time ${time} is before the previous event's ${prevTime}`);
  if (typeof code !== 'string' || !EVENT_CODES.has(code)) {
    throw new CastError(line, `event code ${JSON.stringify(code)} is not one of o, i, r, m`);
  }
  if (typeof data !== 'string') throw new CastError(line, `event data is ${typeof data}, want a string`);
  const ev = { time, code, data };
  if (code === 'r') Object.assign(ev, parseSize(data, line));
  return ev;
}

/**
 * CastReader turns asciicast text, fed in pieces of any size, into events.
 * Lines are counted from firstLine (1 when reading from the start, where
 * the header is expected; recordings/read from a keyframe's offset starts
 * on an event line, whose number is not known: pass 0 and errors say
 * "line N after offset"). Not safe for concurrent use.
 */
export class CastReader {
  /**
   * options: {header: true when the text starts with the header line,
   * prevTime: the time of the event before the text (0)}.
   */
  constructor(options = {}) {
    this.expectHeader = options.header ?? true;
    this.header = null;
    this.prevTime = options.prevTime ?? 0;
    this.lines = 0; // lines read
    this.pending = ''; // a line not yet ended by '\n'
  }

  /** push parses text and returns the events of the lines it completes. */
  push(text) {
    const out = [];
    let start = 0;
    for (;;) {
      const nl = text.indexOf('\n', start);
      if (nl < 0) break;
      let line = text.slice(start, nl);
      start = nl + 1;
      if (this.pending) {
        line = this.pending + line;
        this.pending = '';
      }
      this._line(line, out);
    }
    const rest = text.slice(start);
    if (this.pending.length + rest.length > LINE_MAX_CHARS) {
      throw new CastError(this._lineNo(this.lines + 1), `a line longer than ${LINE_MAX_CHARS} characters`);
    }
    this.pending += rest;
    return out;
  }

  /** end parses the last line when the text does not end with '\n'. */
  end() {
    const out = [];
    if (this.pending) {
      const line = this.pending;
      this.pending = '';
      this._line(line, out);
    }
    if (this.expectHeader && !this.header) throw new CastError(1, 'no header: the recording is empty');
    return out;
  }

  _lineNo(n) {
    return this.expectHeader ? n : 0;
  }

  _line(raw, out) {
    this.lines++;
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.length > LINE_MAX_CHARS) {
      throw new CastError(this._lineNo(this.lines), `a line longer than ${LINE_MAX_CHARS} characters`);
    }
    if (this.expectHeader && !this.header) {
      this.header = parseHeader(line);
      return;
    }
    if (line.trim() === '') return; // a blank line (a trailing one, say) carries nothing
    try {
      const ev = parseEvent(line, this._lineNo(this.lines), this.prevTime);
      this.prevTime = ev.time;
      ev.chars = raw.length + 1; // what holding it costs, about (the player's bound)
      out.push(ev);
    } catch (e) {
      if (e instanceof CastError && !e.line && !this.expectHeader) {
        throw new CastError(0, `event line ${this.lines} of this read: ${e.message}`);
      }
      throw e;
    }
  }
}

/** utf8Length returns the UTF-8 length in bytes of a string. */
export function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** formatTime writes seconds as m:ss (h:mm:ss from an hour). */
export function formatTime(seconds) {
  const s = Math.max(0, Math.floor(Number.isFinite(seconds) ? seconds : 0));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}
