// player.js — the recordings player's logic: which bytes of a recording to
// read, which keyframe a seek starts from, what to write into the terminal
// and when. No DOM: recordings.js gives it an xterm.js terminal and a
// source (recordings/* on the page's session); the tests give it fakes.
//
// Seeking (issue 42): the nearest keyframe at or before the target
// (recordings/index lists them, recordings/keyframe has the screen, in
// pieces when it is larger than a message) resets
// the terminal to the keyframe's size and writes its screen; then the "o"
// events (and "r" resizes) from the keyframe's offset up to the target are
// written. So a seek reads at most the bytes between two keyframes, whatever
// the recording's length. A recording without keyframes is played from its
// header (its size, an empty screen).
//
// Memory: the player never holds a recording whole. It holds the parsed
// events ahead of the playhead, and reads the next chunk only when fewer
// than readBytes of them are left, so at most 2 × readBytes characters of
// event lines are held (QUEUE_BOUND_FACTOR; state().maxQueuedChars is the
// most it held). Markers are kept up to MARKERS_MAX. The timeline's markers
// come from a first pass over the whole file, made only when the file is at
// most MARKER_SCAN_MAX_BYTES; a larger one shows the markers of the parts
// played or sought through, and state().markersPartial says so.
//
// Time: tick() advances the playhead from now() (the page calls it every
// animation frame while playing); the player starts no timer of its own.
// A live recording (live: true) at its end is polled with recordings/read
// at most every LIVE_POLL_MS, from tick(). Its end is where a read says eof
// or reaches the size written so far (the daemon answers a read at the end
// of a live file with no data, eof false).
//
// Not safe for concurrent use; one page, one player.

import { CastError, CastReader, parseHeader, utf8Length } from './cast.js';

/** READ_BYTES is the maxBytes of each recordings/read (the daemon's default too). */
export const READ_BYTES = 256 * 1024;
/** QUEUE_BOUND_FACTOR × readBytes bounds the event text held ahead of the playhead. */
export const QUEUE_BOUND_FACTOR = 2;
/** MARKERS_MAX bounds the markers kept for the timeline. */
export const MARKERS_MAX = 1000;
/** MARKER_SCAN_MAX_BYTES: files up to this size are read once at open for their markers. */
export const MARKER_SCAN_MAX_BYTES = 32 * 1024 * 1024;
/** LIVE_POLL_MS is how often the end of a live recording is read again. */
export const LIVE_POLL_MS = 1000;
/** SPEEDS are the playback speeds offered. */
export const SPEEDS = [0.5, 1, 2, 4, 8];
/** SEEK_STEP is what an arrow key moves the playhead (seconds). */
export const SEEK_STEP = 5;
/** KEYFRAME_PIECES_MAX bounds the recordings/keyframe pieces of one keyframe. */
export const KEYFRAME_PIECES_MAX = 4096;
/** INDEX_PAGES_MAX bounds the recordings/index requests of one index (its audit in pages). */
export const INDEX_PAGES_MAX = 4096;
/** LIST_LIMIT is the recordings/list page the page asks for. */
export const LIST_LIMIT = 200;

// sessionOf returns the session to ask now: session is a Session, or a
// function returning the current one (after a reconnect, the new one).
function sessionOf(session) {
  const s = typeof session === 'function' ? session() : session;
  if (!s) throw new Error('not connected');
  return s;
}

/**
 * sessionSource reads recording id over a session.js Session's JSON-RPC
 * (session: a Session, or a function returning the current one).
 */
export function sessionSource(session, id) {
  const ask = async (method, params) => sessionOf(session).request(method, params);
  return {
    read: (offset, maxBytes) => ask('recordings/read', { id, offset, maxBytes }),
    index: (auditFrom = 0) => ask('recordings/index', auditFrom ? { id, auditFrom } : { id }),
    keyframe: (n, from = 0) => ask('recordings/keyframe', from ? { id, n, from } : { id, n }),
  };
}

/**
 * listRecordings returns a page of recordings/list (of channel, or all),
 * newest first: {recordings, next}, next the cursor of the older ones
 * (after), null after the last.
 */
export async function listRecordings(session, channel, { after = null, limit = LIST_LIMIT } = {}) {
  const params = { limit };
  if (channel) params.channel = channel;
  if (after != null) params.after = after;
  const r = await sessionOf(session).request('recordings/list', params);
  if (!Array.isArray(r?.recordings)) throw new Error('recordings/list answered without a recordings array');
  const next = r.next ?? null;
  if (next !== null && (typeof next !== 'string' || next === after)) throw new Error('recordings/list answered a next that is not a new cursor');
  return { recordings: r.recordings, next };
}

/** errorText says what went wrong in words (a JSON-RPC error with its code). */
export function errorText(err) {
  if (err == null) return '';
  if (typeof err.code === 'number') return `${err.message} (error ${err.code})`;
  return err.message ?? String(err);
}

/** auditLabel is an audit line's text on the timeline. */
export function auditLabel(a) {
  const who = a.viewer || a.token || a.remote || 'someone';
  return `${a.event} ${who}${a.role ? ` (${a.role})` : ''}${a.remote && a.remote !== who ? ` from ${a.remote}` : ''}` +
    (a.detail ? `: ${a.detail}` : '');
}

/**
 * CastPlayer plays one recording into term.
 * source: {read(offset, maxBytes), index(auditFrom), keyframe(n, from)}: promises of the
 * recordings/read, /index and /keyframe results (sessionSource).
 * term: {reset(cols, rows), write(text), resize(cols, rows), flush?()}:
 * applied in call order; flush resolves once what was written is applied.
 * now: the clock in ms. onChange: called when state() changed.
 */
export class CastPlayer {
  constructor({ source, term, now = () => performance.now(), onChange = () => {}, readBytes = READ_BYTES }) {
    this.source = source;
    this.term = term;
    this.now = now;
    this.onChange = onChange;
    this.readBytes = readBytes;
    this.header = null;
    this.headerEnd = 0;
    this.keyframes = []; // {n, time, offset, rows, cols}; n -1: the header's (no screen)
    this.markers = [];
    this._markerKeys = new Set();
    this.markersTruncated = false;
    this.markersPartial = false;
    this.scanned = null; // the marker pass (a promise), when made
    this.time = 0;
    this.duration = 0;
    this.lastTime = 0; // the latest event time read
    this.size = 0;
    this.live = false;
    this.playing = false;
    this.ended = false;
    this.speed = 1;
    this.seeking = false;
    this.error = null;
    this.closed = false;
    this.rows = 0;
    this.cols = 0;
    this._gen = 0; // each seek's number: reads of an older one are dropped
    this._base = { time: 0, wall: 0 }; // the playhead was at time at wall
    this._queue = [];
    this._qi = 0;
    this.queuedChars = 0;
    this.maxQueuedChars = 0;
    this._reader = null;
    this._readOffset = 0;
    this._eof = false;
    this._readTime = 0; // the time of the last event read
    this._reading = null;
    this._lastEofRead = -Infinity;
    this.reads = 0;
    this.keyframeReads = 0;
    this._kf = null; // {n, screen}: the last keyframe read
    this.lastKeyframe = null; // the keyframe the last seek started from (-1: the header)
  }

  /** open reads the header and the index, shows time 0 and starts the marker pass. */
  async open(info = {}) {
    this.live = !!info.live;
    this.duration = Number.isFinite(info.duration) ? info.duration : 0;
    this.seeking = true;
    this._changed();
    try {
      const first = await this.source.read(0, this.readBytes);
      checkRead(first, 0);
      this.size = first.size ?? 0;
      const nl = first.data.indexOf('\n');
      if (nl < 0) {
        throw new CastError(1, first.eof ? 'no header line: the recording is empty' : 'the header line is longer than one read');
      }
      const line = first.data.slice(0, nl);
      this.header = parseHeader(line.endsWith('\r') ? line.slice(0, -1) : line);
      this.headerEnd = utf8Length(line) + 1;
      await this._loadIndex();
      if (this.closed) return;
      await this.seek(0);
      if (this.size <= MARKER_SCAN_MAX_BYTES) this.scanned = this._scan();
      else this.markersPartial = true;
    } catch (e) {
      this._fail(e);
    }
  }

  async _loadIndex() {
    const h = this.header;
    const start = { n: -1, time: 0, offset: this.headerEnd, rows: h.height, cols: h.width };
    const idx = await this.source.index();
    // The audit comes in pages when it is larger than a message: each
    // auditNext must be where its page ends, so the pages move forward.
    const audit = Array.isArray(idx?.audit) ? [...idx.audit] : [];
    for (let next = idx?.auditNext, pages = 1; next !== null && next !== undefined; pages++) {
      if (pages >= INDEX_PAGES_MAX) throw new Error(`recordings/index: more than ${INDEX_PAGES_MAX} pages of audit`);
      if (!Number.isInteger(next) || next !== audit.length) throw new Error(`recordings/index: auditNext ${next} is not where the audit read so far ends (${audit.length})`);
      const more = await this.source.index(next);
      if (!Array.isArray(more?.audit) || !more.audit.length) throw new Error(`recordings/index: no audit from ${next}`);
      for (const a of more.audit) audit.push(a);
      next = more.auditNext;
    }
    const kfs = Array.isArray(idx?.keyframes) ? idx.keyframes : [];
    const list = [];
    kfs.forEach((k, n) => {
      if (!Number.isFinite(k?.time) || !Number.isInteger(k?.offset) || !Number.isInteger(k?.rows) || !Number.isInteger(k?.cols)) {
        throw new Error(`recordings/index: keyframe ${n} lacks time, offset, rows or cols`);
      }
      list.push({ n, time: k.time, offset: k.offset, rows: k.rows, cols: k.cols });
    });
    list.sort((a, b) => a.time - b.time || a.offset - b.offset);
    if (!list.length || list[0].time > 0) list.unshift(start);
    this.keyframes = list;
    for (const a of audit) {
      if (Number.isFinite(a?.time) && typeof a.event === 'string') this._addMarker(a.time, auditLabel(a), 'audit');
    }
    this.dropped = Number.isFinite(idx?.dropped) ? idx.dropped : 0;
  }

  /**
   * _keyframe reads keyframe n's screen whole (null when seek gen was
   * overtaken): the daemon answers a screen larger than a message in
   * pieces, each with next, the UTF-8 byte where the rest starts (null
   * after the last). A next that is not where its piece ends is an error,
   * so the pieces always move forward; at most KEYFRAME_PIECES_MAX.
   */
  async _keyframe(n, gen) {
    const parts = [];
    for (let from = 0; ; ) {
      if (parts.length === KEYFRAME_PIECES_MAX) throw new Error(`recordings/keyframe ${n}: more than ${KEYFRAME_PIECES_MAX} pieces`);
      const kf = await this.source.keyframe(n, from);
      if (gen !== this._gen) return null;
      if (typeof kf?.screen !== 'string') throw new Error(`recordings/keyframe ${n} has no screen`);
      parts.push(kf.screen);
      if (kf.next == null) return parts.join('');
      const end = from + utf8Length(kf.screen);
      if (kf.next !== end || end <= from) throw new Error(`recordings/keyframe ${n} from ${from}: next ${kf.next} is not where the piece ends, ${end}`);
      from = end;
    }
  }

  /** keyframeAt returns the keyframe a seek to t starts from: the last at or before t. */
  keyframeAt(t) {
    const k = this.keyframes;
    let lo = 0;
    let hi = k.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (k[mid].time <= t) lo = mid;
      else hi = mid - 1;
    }
    return k[lo];
  }

  /**
   * seek shows the screen at time t: the keyframe at or before it, then
   * the events from its offset up to t. Playing goes on from t.
   */
  async seek(t) {
    if (this.closed || !this.keyframes.length) return;
    const gen = ++this._gen;
    const target = Math.max(0, Math.min(t, this._end()));
    this.seeking = true;
    this.ended = false;
    this.error = null;
    this._changed();
    try {
      const k = this.keyframeAt(target);
      let screen = '';
      if (k.n >= 0 && this._kf?.n === k.n) screen = this._kf.screen;
      else if (k.n >= 0) {
        screen = await this._keyframe(k.n, gen);
        this.keyframeReads++;
        if (gen !== this._gen) return;
        // The last one is kept: seeks within its stretch (a drag, the
        // arrows) need no round trip for it.
        this._kf = { n: k.n, screen };
      }
      this.lastKeyframe = k.n;
      this.term.reset(k.cols, k.rows);
      this.rows = k.rows;
      this.cols = k.cols;
      if (screen) this.term.write(screen);
      this._queue = [];
      this._qi = 0;
      this.queuedChars = 0;
      this._reader = new CastReader({ header: false });
      this._readOffset = k.offset;
      this._readTime = k.time;
      this._eof = false;
      for (;;) {
        this._applyUntil(target);
        if (this._qi < this._queue.length || this._eof) break;
        await this._read(gen);
        if (gen !== this._gen) return;
        // What was written is applied before more is read: the terminal's
        // queue holds one chunk, not the whole stretch.
        await this.term.flush?.();
        if (gen !== this._gen) return;
      }
      this.time = target;
      this._base = { time: target, wall: this.now() };
    } catch (e) {
      if (gen === this._gen) this._fail(e);
    } finally {
      if (gen === this._gen) {
        this.seeking = false;
        this._changed();
      }
    }
  }

  /** seekBy moves the playhead by dt seconds. */
  seekBy(dt) {
    return this.seek(this.time + dt);
  }

  play() {
    if (this.error || this.closed) return;
    if (this.ended || (!this.live && this.time >= this.duration && this._eof && this._qi >= this._queue.length)) {
      this.playing = true;
      this.seek(0);
      return;
    }
    this.playing = true;
    this._base = { time: this.time, wall: this.now() };
    this._changed();
  }

  pause() {
    if (!this.playing) return;
    this.playing = false;
    this._changed();
  }

  toggle() {
    if (this.playing) this.pause();
    else this.play();
  }

  setSpeed(x) {
    if (!SPEEDS.includes(x)) throw new RangeError(`speed ${x} is not one of ${SPEEDS.join(', ')}`);
    this._base = { time: this.time, wall: this.now() };
    this.speed = x;
    this._changed();
  }

  /** tick advances the playhead to now() and writes the events due. */
  tick() {
    if (!this.playing || this.seeking || this.error || this.closed) return;
    const now = this.now();
    let t = this._base.time + ((now - this._base.wall) / 1000) * this.speed;
    const more = this._qi < this._queue.length;
    // Past the last event read, nothing is known yet: wait for the next read.
    if (!this._eof && t > this._readTime) {
      t = Math.max(this.time, this._readTime);
      this._base = { time: t, wall: now };
    }
    if (!more && !this._eof) {
      // Buffering: the playhead waits for the next chunk.
      t = this.time;
      this._base = { time: t, wall: now };
    } else if (!more && this._eof) {
      const end = this._end();
      if (t >= end) {
        t = end;
        this._base = { time: t, wall: now };
        if (!this.live) {
          this.time = t;
          this.playing = false;
          this.ended = true;
          this._changed();
          return;
        }
      }
    }
    this._applyUntil(t);
    this.time = t;
    const gen = this._gen;
    const queueLow = this.queuedChars < this.readBytes;
    const poll = this._eof && this.live && this._qi >= this._queue.length && now - this._lastEofRead >= LIVE_POLL_MS;
    if (!this._reading && queueLow && (!this._eof || poll)) {
      this._read(gen).then(() => this._changed(), (e) => {
        if (gen === this._gen) this._fail(e);
      });
    }
    this._changed();
  }

  /** close stops the player; reads in flight are dropped. */
  close() {
    this.closed = true;
    this.playing = false;
    this._gen++;
  }

  _end() {
    return Math.max(this.duration, this.lastTime);
  }

  // _read reads the next chunk after the queue's end and queues its events
  // (when the seek that asked is still the latest).
  async _read(gen) {
    const tok = {};
    this._reading = tok;
    try {
      const offset = this._readOffset;
      const r = await this.source.read(offset, this.readBytes);
      if (gen !== this._gen || this.closed) return;
      const atEnd = checkRead(r, offset);
      this.reads++;
      const evs = this._reader.push(r.data);
      this._readOffset = r.nextOffset;
      this._eof = atEnd;
      if (this._eof) this._lastEofRead = this.now();
      this.live = !!r.live;
      if (Number.isFinite(r.size)) this.size = r.size;
      if (evs.length) this._readTime = evs[evs.length - 1].time;
      for (const ev of evs) {
        this._saw(ev);
        this._queue.push(ev);
        this.queuedChars += ev.chars;
      }
      if (this.queuedChars > this.maxQueuedChars) this.maxQueuedChars = this.queuedChars;
    } finally {
      if (this._reading === tok) this._reading = null;
    }
  }

  // _saw notes an event read: the time it reaches, a marker.
  _saw(ev) {
    if (ev.time > this.lastTime) this.lastTime = ev.time;
    if (ev.code === 'm') this._addMarker(ev.time, ev.data, 'marker');
  }

  _addMarker(time, label, kind) {
    const key = `${kind} ${time} ${label}`;
    if (this._markerKeys.has(key)) return;
    if (this.markers.length >= MARKERS_MAX) {
      this.markersTruncated = true;
      return;
    }
    this._markerKeys.add(key);
    const m = { time, label, kind };
    // Kept in time order (usually appended at the end).
    let i = this.markers.length;
    while (i > 0 && this.markers[i - 1].time > time) i--;
    this.markers.splice(i, 0, m);
  }

  // _applyUntil writes the queued events up to time t into the terminal,
  // each run of output as one write.
  _applyUntil(t) {
    let out = '';
    const q = this._queue;
    while (this._qi < q.length && q[this._qi].time <= t) {
      const ev = q[this._qi];
      q[this._qi++] = undefined;
      this.queuedChars -= ev.chars;
      if (ev.code === 'o') out += ev.data;
      else if (ev.code === 'r') {
        if (out) this.term.write(out);
        out = '';
        this.term.resize(ev.cols, ev.rows);
        this.rows = ev.rows;
        this.cols = ev.cols;
      }
      // "i" is what was typed (not drawn), "m" a marker (on the timeline).
    }
    if (out) this.term.write(out);
    if (this._qi > 1024 && this._qi * 2 > q.length) {
      this._queue = q.slice(this._qi);
      this._qi = 0;
    }
  }

  // _scan reads the whole file once for its markers and its last event
  // time, holding one chunk at a time.
  async _scan() {
    const reader = new CastReader({ header: true });
    let offset = 0;
    try {
      for (;;) {
        if (this.closed) return;
        const r = await this.source.read(offset, this.readBytes);
        const atEnd = checkRead(r, offset);
        for (const ev of reader.push(r.data)) this._saw(ev);
        offset = r.nextOffset;
        this._changed();
        if (atEnd) return;
      }
    } catch (e) {
      // Playing may still work (a bad line late in the file is met there
      // too); the timeline just lacks what comes after it.
      this.markersPartial = true;
      this.scanError = errorText(e);
      this._changed();
    }
  }

  _fail(e) {
    this.error = errorText(e);
    this.playing = false;
    this.seeking = false;
    this._changed();
  }

  _changed() {
    this.onChange(this);
  }

  /** state is the player's state for the page and its tests. */
  state() {
    return {
      time: this.time,
      duration: this._end(),
      playing: this.playing,
      ended: this.ended,
      speed: this.speed,
      seeking: this.seeking,
      live: this.live,
      error: this.error,
      rows: this.rows,
      cols: this.cols,
      size: this.size,
      keyframes: this.keyframes.length,
      markers: this.markers.map((m) => ({ ...m })),
      markersTruncated: this.markersTruncated,
      markersPartial: this.markersPartial,
      dropped: this.dropped ?? 0,
      queuedChars: this.queuedChars,
      maxQueuedChars: this.maxQueuedChars,
      reads: this.reads,
      keyframeReads: this.keyframeReads,
    };
  }
}

// checkRead refuses a recordings/read result that would stall or corrupt
// the reading: no data string, or an offset that does not move forward
// before the end. It returns whether the read reached the end of what is
// written: eof, or (a live recording, which grows) the size so far or
// nothing new (a line being written is not sent until it is whole).
function checkRead(r, offset) {
  if (typeof r?.data !== 'string' || !Number.isInteger(r?.nextOffset)) {
    throw new Error(`recordings/read at ${offset}: the answer has no data or nextOffset`);
  }
  const atEnd = !!r.eof || (!!r.live && ((Number.isFinite(r.size) && r.nextOffset >= r.size) || r.nextOffset === offset));
  if (r.nextOffset < offset || (r.nextOffset === offset && !atEnd)) {
    throw new Error(`recordings/read at ${offset}: nextOffset ${r.nextOffset} does not move forward`);
  }
  return atEnd;
}
