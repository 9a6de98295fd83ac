// wire.js — the AHP/1 wire and flow-control layer (../../../../shared/PROTOCOL.md
// §4, §5) for one subscription: sizes, JSON-escaped widths and
// fragmentation, channel/frame encoding, reassembly and the receive-limit
// checks, in-order release and batched credit, and the send side's queue,
// soft window and credit checks.
//
// Pure: no DOM, no WebSocket, no timers, no callbacks out. The caller
// (session.js's Subscription) hands in what the host sent and gets back
// what to deliver, what to send and which channel/reset code to send when
// the host broke a rule; it does the sending and ends the subscription.
//
//   Receiver  host → client: frame(params, rawLength) → nothing yet, a
//             complete logical message, or an error; deliver/release track
//             consumption; takeCredit() says when to send channel/credit.
//   Sender    client → host: enqueue(method, data) → pump() gives the
//             channel/frame texts the host window allows; credit(consumed)
//             checks the host's channel/credit and opens the window.

/** Lifecycle messages may start without window credit (§4), each ≤ 1024 bytes. */
export const LIFECYCLE_METHODS = new Set(['terminal/exit', 'tcp/eof', 'tcp/closed']);
const LIFECYCLE_MAX_BYTES = 1024;

/** Receive limits this client asks for by default (UTF-16 bytes). */
export const DEFAULT_RECEIVE = Object.freeze({
  // Outstanding output is bounded by window + one message (§5), which is
  // what xterm.js may hold unparsed: keep it well under its 50 MB discard
  // mark and near its guide's 500 KB "high" mark.
  windowBytes: 256 * 1024,
  maximumFrameBytes: 64 * 1024,
  maximumMessageBytes: 1024 * 1024,
});

/**
 * receiveFromQuery returns the receive limits the page asks for, from its
 * URL's query (a URLSearchParams): `window`, `frame` and `message` override
 * base's windowBytes, maximumFrameBytes and maximumMessageBytes, each in
 * bytes with an optional KiB or MiB suffix (`?window=4MiB`). It is a knob
 * for benchmarks and experiments (e2e/bench-cat.mjs); the host still caps
 * what it grants at its maximums. Limits that break §3's rules, or a value
 * that is not a positive size, give base unchanged.
 */
export function receiveFromQuery(query, base = DEFAULT_RECEIVE) {
  const out = { ...base };
  for (const [param, key] of [['window', 'windowBytes'], ['frame', 'maximumFrameBytes'], ['message', 'maximumMessageBytes']]) {
    const v = query.get(param);
    if (v === null) continue;
    const n = parseSize(v);
    if (n === null) return { ...base };
    out[key] = n;
  }
  return validLimits(out) ? out : { ...base };
}

/**
 * parseSize returns the bytes s says: digits with an optional KiB or MiB
 * suffix ('65536', '64KiB', '4MiB'), or null when s is not that. Shared
 * with e2e/bench-cat.mjs's flags.
 */
export function parseSize(s) {
  const m = /^(\d+)(KiB|MiB)?$/.exec(s);
  if (!m) return null;
  return Number(m[1]) * (m[2] === 'MiB' ? 1 << 20 : m[2] === 'KiB' ? 1 << 10 : 1);
}

/** Input waiting for host credit is bounded (UTF-16 bytes of `data`). */
export const DEFAULT_MAX_QUEUED_INPUT_BYTES = 1024 * 1024;

/** size returns the protocol's size of a string: UTF-16 bytes (§4). */
export function size(s) {
  return s.length * 2;
}

// ---------------------------------------------------------------------------
// Sizes, escaping and fragmentation (§4).

const isHigh = (c) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c) => c >= 0xdc00 && c <= 0xdfff;

/**
 * escapedWidth returns how many UTF-16 code units JSON.stringify writes for
 * the code unit c (a lone surrogate: c is not half of a pair).
 */
function escapedWidth(c) {
  if (c === 0x22 || c === 0x5c) return 2; // \" \\
  if (c < 0x20) {
    // \b \t \n \f \r, the rest as \u00XX
    return c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6;
  }
  if (c >= 0xd800 && c <= 0xdfff) return 6; // lone surrogate, ES2019 well-formed stringify
  return 1;
}

/** escapedLength returns JSON.stringify(s).length − 2, without allocating. */
export function escapedLength(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (isHigh(c) && i + 1 < s.length && isLow(s.charCodeAt(i + 1))) {
      n += 2;
      i++;
    } else {
      n += escapedWidth(c);
    }
  }
  return n;
}

/**
 * fragment cuts text into consecutive slices whose JSON-escaped length is at
 * most budget code units each, in one pass. A surrogate pair is never split.
 * It returns at least one slice (an empty text gives [""]).
 */
export function fragment(text, budget) {
  if (!(budget >= 2)) throw new RangeError(`fragment budget ${budget} is below 2 code units`);
  const out = [];
  let start = 0;
  let used = 0;
  for (let i = 0; i < text.length; ) {
    const c = text.charCodeAt(i);
    let units = 1;
    let w;
    if (isHigh(c) && i + 1 < text.length && isLow(text.charCodeAt(i + 1))) {
      units = 2;
      w = 2;
    } else {
      w = escapedWidth(c);
    }
    if (w > budget) throw new RangeError(`fragment budget ${budget} cannot hold one character`);
    if (used + w > budget) {
      out.push(text.slice(start, i));
      start = i;
      used = 0;
    }
    used += w;
    i += units;
  }
  if (start < text.length || out.length === 0) out.push(text.slice(start));
  return out;
}

/** validLimits reports whether l satisfies §3's rules for receive limits. */
export function validLimits(l) {
  const ok = (v) => Number.isSafeInteger(v) && v > 0;
  return (
    !!l &&
    ok(l.windowBytes) &&
    ok(l.maximumFrameBytes) &&
    ok(l.maximumMessageBytes) &&
    l.maximumFrameBytes >= 1024 &&
    l.windowBytes >= l.maximumFrameBytes &&
    l.maximumMessageBytes >= l.maximumFrameBytes
  );
}

/** frameEnvelope returns the channel/frame notification for one frame (§4). */
export function frameEnvelope(channel, subscriptionId, messageId, data, final) {
  const params = { channel, subscriptionId, messageId, data };
  if (final) params.final = true; // omitted on non-final frames, as in §4's final?
  return { jsonrpc: '2.0', method: 'channel/frame', params };
}

// ---------------------------------------------------------------------------
// Receive side (host → client).

const fail = (code, message) => ({ error: { code, message } });

/**
 * Receiver reassembles one subscription's host→client frames under the
 * receive limits this client granted, and tracks which delivered messages
 * have been released for credit. After frame() returned an error the
 * subscription is over; the Receiver must not be fed again.
 */
export class Receiver {
  /** limits: {windowBytes, maximumFrameBytes, maximumMessageBytes}, kept by reference. */
  constructor(limits) {
    this.limits = limits;
    this._nextMessageId = 1; // id the next message must carry
    this._active = null; // {id, parts, bytes, lifecycle}
    this._receivedBytes = 0; // data bytes of every frame accepted
    this._releasedBytes = 0; // bytes of the in-order released prefix
    this._creditSent = 0; // consumedBytes last handed out by takeCredit
    this._unreleased = []; // [{bytes, done}] complete messages in order
    this._unreleasedHead = 0;
    this._lifecycleSeen = new Set();
    // The largest window announced (PROTOCOL.md §6, "Changing a window"):
    // the host may not have seen a smaller one yet, so the check uses it.
    this._maxWindow = limits.windowBytes;
  }

  /**
   * held is what takes up the window without being in flight: bytes
   * received and not yet credited (buffered, or released and not yet
   * announced). The window tuner adds its mean to a shrink (noteHeld).
   */
  get held() {
    return this._receivedBytes - this._creditSent;
  }

  /**
   * setWindow changes the window this receiver grants (announce it with
   * channel/window): credit is batched per quarter of the new window, and
   * messages are accepted up to the largest window ever set. limits is
   * copied first: it may be shared.
   */
  setWindow(windowBytes) {
    const w = Math.max(windowBytes, this.limits.maximumFrameBytes);
    this.limits = { ...this.limits, windowBytes: w };
    this._maxWindow = Math.max(this._maxWindow, w);
    return w;
  }

  /**
   * frame takes one channel/frame's params and the length of the WebSocket
   * text that carried it. It returns
   *   null                       accepted; the message is not complete yet
   *   {message, bytes}           a complete logical message {jsonrpc, method,
   *                              params} of bytes (its size, for credit)
   *   {error: {code, message}}   a breach: send channel/reset with code
   *                              (frame-too-large, message-too-large,
   *                              protocol-error) and end the subscription.
   */
  frame(p, rawLength) {
    const r = this.limits;
    if (rawLength * 2 > r.maximumFrameBytes) {
      return fail('frame-too-large',
        `frame of ${rawLength * 2} bytes exceeds maximumFrameBytes ${r.maximumFrameBytes}`);
    }
    const { data, messageId } = p;
    if (typeof data !== 'string' || !Number.isSafeInteger(messageId) ||
        (p.final !== undefined && typeof p.final !== 'boolean')) {
      return fail('protocol-error', 'malformed channel/frame');
    }
    const bytes = size(data);
    if (this._active) {
      if (messageId !== this._active.id) {
        return fail('protocol-error',
          `frame for message ${messageId} while message ${this._active.id} is incomplete`);
      }
    } else {
      if (messageId !== this._nextMessageId) {
        return fail('protocol-error',
          `message ${messageId} started, expected ${this._nextMessageId}`);
      }
      // §5: a message may start only while outstanding < window. The host's
      // view of our credit is never newer than _creditSent, so this check
      // can only be more lenient than the host's own. Lifecycle messages
      // may start beyond the window but are then limited to 1024 bytes and
      // checked to be lifecycle messages once decoded.
      const beyond = this._receivedBytes - this._creditSent >= this._maxWindow;
      this._active = { id: messageId, parts: [], bytes: 0, lifecycle: beyond };
    }
    const a = this._active;
    // A frame boundary never splits a surrogate pair (§4); reject, never repair.
    if (data.length > 0 &&
        (isLow(data.charCodeAt(0)) || isHigh(data.charCodeAt(data.length - 1)))) {
      return fail('protocol-error', `message ${a.id}: frame splits a surrogate pair`);
    }
    if (a.bytes + bytes > r.maximumMessageBytes) {
      return fail('message-too-large',
        `message ${a.id} exceeds maximumMessageBytes ${r.maximumMessageBytes}`);
    }
    if (a.lifecycle && a.bytes + bytes > LIFECYCLE_MAX_BYTES) {
      return fail('protocol-error',
        `message ${a.id} started with the window exhausted (${r.windowBytes} bytes outstanding)`);
    }
    // Empty frames carry nothing to keep: the parts list stays bounded by
    // maximumMessageBytes / 2 however the host slices (lessons rule 13).
    if (bytes > 0) a.parts.push(data);
    a.bytes += bytes;
    this._receivedBytes += bytes;
    if (p.final !== true) return null;

    this._active = null;
    this._nextMessageId = a.id + 1;
    let msg;
    try {
      msg = JSON.parse(a.parts.join(''));
    } catch {
      return fail('protocol-error', `message ${a.id} is not valid JSON`);
    }
    if (!msg || typeof msg !== 'object' || msg.jsonrpc !== '2.0' ||
        typeof msg.method !== 'string' || 'id' in msg) {
      return fail('protocol-error', `message ${a.id} is not a JSON-RPC notification`);
    }
    if (LIFECYCLE_METHODS.has(msg.method)) {
      if (this._lifecycleSeen.has(msg.method)) {
        return fail('protocol-error', `second ${msg.method}`);
      }
      this._lifecycleSeen.add(msg.method);
    } else if (a.lifecycle) {
      return fail('protocol-error',
        `message ${a.id} (${msg.method}) started with the window exhausted`);
    }
    if (msg.params === undefined) msg.params = {};
    return { message: msg, bytes: a.bytes };
  }

  /** abort discards an incomplete message (§7: never delivered). */
  abort() {
    this._active = null;
  }

  /**
   * deliver records that a complete message of bytes was handed to the
   * consumer and returns its entry for release(). Entries are kept in
   * delivery (stream) order.
   */
  deliver(bytes) {
    const entry = { bytes, done: false };
    this._unreleased.push(entry);
    return entry;
  }

  /**
   * release marks entry consumed and advances the in-order released prefix.
   * Releases may come in any order; it returns false if entry was already
   * released (a second call counts nothing).
   */
  release(entry) {
    if (entry.done) return false;
    entry.done = true;
    const q = this._unreleased;
    let h = this._unreleasedHead;
    while (h < q.length && q[h].done) {
      this._releasedBytes += q[h].bytes;
      h++;
    }
    if (h === q.length) {
      q.length = 0;
      h = 0;
    } else if (h > 1024) {
      q.splice(0, h);
      h = 0;
    }
    this._unreleasedHead = h;
    return true;
  }

  /**
   * takeCredit returns the cumulative consumedBytes to send in a
   * channel/credit now, or null when none is due, and counts it as sent.
   * Batching (flow-control-lessons rule 12): credit is due once a quarter
   * window is waiting, and always once everything delivered is released,
   * so the host is never left waiting on a sub-threshold remainder.
   */
  takeCredit() {
    const unsent = this._releasedBytes - this._creditSent;
    if (unsent <= 0) return null;
    const idle = this._unreleasedHead === this._unreleased.length;
    if (!idle && unsent < this.limits.windowBytes / 4) return null;
    this._creditSent = this._releasedBytes;
    return this._creditSent;
  }

  /** state returns the receive counters, for status lines and tests. */
  state() {
    return {
      receivedBytes: this._receivedBytes,
      releasedBytes: this._releasedBytes,
      creditSent: this._creditSent,
      unreleased: this._unreleased.length - this._unreleasedHead,
    };
  }
}

// ---------------------------------------------------------------------------
// Send side (client → host).

/**
 * Sender queues one subscription's client→host logical messages
 * ({method, params: {data}}, e.g. terminal/input) and cuts them into
 * channel/frame texts under the host's receive limits, starting a message
 * only while the host window is open (§5 soft window).
 */
export class Sender {
  /**
   * limits: the host's receive limits, kept by reference.
   * maxQueuedBytes: bound on the UTF-16 bytes of data waiting for window.
   */
  constructor(channel, subscriptionId, limits, maxQueuedBytes = DEFAULT_MAX_QUEUED_INPUT_BYTES) {
    this.channel = channel;
    this.subscriptionId = subscriptionId;
    this.limits = limits;
    this.maxQueuedBytes = maxQueuedBytes;
    this._nextId = 1;
    this._sentBytes = 0;
    this._hostConsumed = 0;
    this._boundaries = []; // cumulative positions of message ends not yet credited
    this._queue = []; // [{method, data}] waiting for window
    this._queuedBytes = 0;
  }

  /** outstanding is the client→host bytes sent and not yet credited. */
  get outstanding() {
    return this._sentBytes - this._hostConsumed;
  }

  /** setWindow applies the host's channel/window for client→host data (§6). */
  setWindow(windowBytes) {
    if (!Number.isSafeInteger(windowBytes) || windowBytes < this.limits.maximumFrameBytes) return false;
    this.limits = { ...this.limits, windowBytes };
    return true;
  }

  /**
   * enqueue queues method {data} behind what is waiting; adjacent data of
   * the same method is coalesced into one message while it fits, and data
   * larger than one message becomes several, split between characters,
   * never inside a surrogate pair. It returns false, queueing nothing, when
   * maxQueuedBytes would be exceeded. Call pump() after.
   */
  enqueue(method, data) {
    const bytes = size(data);
    if (this._queuedBytes + bytes > this.maxQueuedBytes) return false;
    const overhead = JSON.stringify({ jsonrpc: '2.0', method, params: { data: '' } }).length;
    const budget = Math.floor(this.limits.maximumMessageBytes / 2) - overhead;
    const last = this._queue[this._queue.length - 1];
    if (last && last.method === method) {
      const joined = last.data + data;
      if (escapedLength(joined) <= budget) {
        last.data = joined;
        this._queuedBytes += bytes;
        return true;
      }
    }
    for (const piece of fragment(data, budget)) this._queue.push({ method, data: piece });
    this._queuedBytes += bytes;
    return true;
  }

  /**
   * pump takes queued messages while outstanding < window and returns
   * {frames, messages, error?}: the channel/frame texts to send, in order,
   * and how many messages they complete. A message is started only while
   * the window is open and is then returned whole (it may finish beyond the
   * window), so none is ever left half-sent. error {code, message} is set
   * when the host's frame limit cannot hold a frame envelope (a channel id
   * near maxIdLength): send what frames holds, then channel/reset.
   */
  pump() {
    const frames = [];
    let messages = 0;
    while (this._queue.length > 0 && this.outstanding < this.limits.windowBytes) {
      const item = this._queue.shift();
      this._queuedBytes -= size(item.data);
      try {
        this._encode(item.method, { data: item.data }, frames);
      } catch (err) {
        // Only fragment() throws, before anything of this message was counted.
        return { frames, messages, error: { code: 'protocol-error', message: err.message } };
      }
      messages++;
    }
    return { frames, messages };
  }

  _encode(method, params, frames) {
    const text = JSON.stringify({ jsonrpc: '2.0', method, params });
    const id = this._nextId++;
    // The envelope's size with an empty data string and final:true bounds
    // every frame's overhead for this message; the rest is the budget for
    // the escaped data, filled in one pass by fragment().
    const overhead = JSON.stringify(frameEnvelope(this.channel, this.subscriptionId, id, '', true)).length;
    const budget = Math.floor(this.limits.maximumFrameBytes / 2) - overhead;
    const parts = fragment(text, budget);
    for (let i = 0; i < parts.length; i++) {
      const final = i === parts.length - 1;
      this._sentBytes += size(parts[i]);
      frames.push(JSON.stringify(frameEnvelope(this.channel, this.subscriptionId, id, parts[i], final)));
    }
    this._boundaries.push(this._sentBytes);
  }

  /**
   * credit applies the host's channel/credit consumedBytes (§5). It returns
   * null (applied, or older and ignored; call pump() after) or an error
   * {code: 'invalid-credit', message} when it is not a non-negative safe
   * integer, is beyond what was sent, or is off a message boundary.
   */
  credit(c) {
    if (!Number.isSafeInteger(c) || c < 0) {
      return { code: 'invalid-credit', message: 'consumedBytes is not a non-negative safe integer' };
    }
    if (c <= this._hostConsumed) return null; // older or equal: ignored
    if (c > this._sentBytes) {
      return { code: 'invalid-credit', message: `consumedBytes ${c} exceeds sent ${this._sentBytes}` };
    }
    const b = this._boundaries;
    let i = 0;
    while (i < b.length && b[i] < c) i++;
    if (i === b.length || b[i] !== c) {
      return { code: 'invalid-credit', message: `consumedBytes ${c} is not on a message boundary` };
    }
    b.splice(0, i + 1);
    this._hostConsumed = c;
    return null;
  }

  /** clear drops everything queued (§8: input is never retried blindly). */
  clear() {
    this._queue.length = 0;
    this._queuedBytes = 0;
  }

  /** state returns the send counters, for status lines and tests. */
  state() {
    return {
      sentBytes: this._sentBytes,
      consumedBytes: this._hostConsumed,
      queuedMessages: this._queue.length,
      queuedBytes: this._queuedBytes,
    };
  }
}
