// session.js — a framework-free AHP/1 client (see ../../../../shared/PROTOCOL.md).
//
// No DOM dependency: the WebSocket constructor and the timer functions are
// injected, so node tests drive it with a fake socket.
//
// Layers:
//   Session       one WebSocket connection: initialize, JSON-RPC requests,
//                 routing of frames/credit/reset to subscriptions.
//   Subscription  one subscriptionId: reassembly and receive-limit checks for
//                 host→client data, in-order release and batched credit,
//                 fragmentation and the soft window for client→host data.
//   Client        reconnects a Session with exponential backoff and
//                 re-subscribes the channels that are attached to it.
//
// Everything runs on the single JavaScript event loop; no method may be
// called concurrently because there is no concurrency.

export const PROTOCOL_VERSION = 'ahp/1';
export const SUBPROTOCOL = 'ahp.v1';
export const WS_PATH = '/v1/ws';

/** JSON-RPC error codes of PROTOCOL.md §7. */
export const ErrorCode = Object.freeze({
  PARSE: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  UNAUTHORIZED: -32001,
  CHANNEL_NOT_FOUND: -32002,
  FORBIDDEN: -32003,
  LIMIT_EXCEEDED: -32004,
  UNKNOWN_SUBSCRIPTION: -32005,
  RESUME_FAILED: -32006,
  CHANNEL_BUSY: -32007,
});

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

/** Input waiting for host credit is bounded (UTF-16 bytes of `data`). */
export const DEFAULT_MAX_QUEUED_INPUT_BYTES = 1024 * 1024;

/** size returns the protocol's size of a string: UTF-16 bytes (§4). */
export function size(s) {
  return s.length * 2;
}

/** RpcError is a JSON-RPC error object returned by the host. */
export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.name = 'RpcError';
    this.code = code;
    this.data = data;
  }
}

/** ClosedError rejects requests pending when the connection closed. */
export class ClosedError extends Error {
  constructor(closeCode, reason) {
    super(`connection closed (${closeCode}${reason ? ': ' + reason : ''})`);
    this.name = 'ClosedError';
    this.closeCode = closeCode;
    this.reason = reason;
  }
}

class Emitter {
  constructor() {
    this._listeners = new Map();
  }
  /** on registers fn for event and returns a function that removes it. */
  on(event, fn) {
    let set = this._listeners.get(event);
    if (!set) this._listeners.set(event, (set = new Set()));
    set.add(fn);
    return () => set.delete(fn);
  }
  _emit(event, value) {
    const set = this._listeners.get(event);
    if (set) for (const fn of [...set]) fn(value);
  }
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

// ---------------------------------------------------------------------------
// Subscription.

/** SubscriptionEnd codes used for ends that are not a channel/reset. */
export const END_UNSUBSCRIBED = 'unsubscribed';
export const END_CONNECTION_CLOSED = 'connection-closed';

/**
 * Subscription is one delivery generation on one channel (§3). It is created
 * by Session.subscribe; the consumer passed there receives:
 *   onMessage(message, release)  a decoded logical message {method, params};
 *                                call release() once it has been consumed
 *                                (rendered, applied). Releases may come in any
 *                                order; credit advances over the in-order
 *                                released prefix only.
 *   onEnd({code, message, local}) the subscription ended: a channel/reset
 *                                from the host (local false), one this client
 *                                sent because the host broke a limit (local
 *                                true), an unsubscribe or a connection close.
 */
export class Subscription {
  constructor(session, channel, result, consumer, receive, options = {}) {
    this.session = session;
    this.channel = channel;
    this.id = result.subscriptionId;
    this.initialKind = result.initial?.kind;
    const fc = result.flowControl || {};
    /** Limits the host sends under (what we granted, possibly lowered). */
    this.receive = validLimits(fc.clientReceive) ? { ...fc.clientReceive } : { ...receive };
    /** Limits we send under (the host's receive limits). */
    this.send = validLimits(fc.hostReceive)
      ? { ...fc.hostReceive }
      : { ...(session.hostReceiveDefaults || DEFAULT_RECEIVE) };
    this.consumer = consumer;
    this.ended = false;
    this.endInfo = null;
    this.maxQueuedInputBytes = options.maxQueuedInputBytes ?? DEFAULT_MAX_QUEUED_INPUT_BYTES;

    // Receive side (host → client). Owned by the session's message handler
    // and by release callbacks.
    this._nextMessageId = 1; // id the next message must carry
    this._active = null; // {id, parts, bytes, lifecycle}
    this._receivedBytes = 0; // data bytes of every frame accepted
    this._releasedBytes = 0; // bytes of the in-order released prefix
    this._creditSent = 0; // consumedBytes last sent
    this._unreleased = []; // [{bytes, done}] complete messages in order
    this._unreleasedHead = 0;
    this._lifecycleSeen = new Set();

    // Send side (client → host).
    this._sendNextId = 1;
    this._sentBytes = 0;
    this._hostConsumed = 0;
    this._boundaries = []; // cumulative positions of message ends not yet credited
    this._queue = []; // [{method, data, escaped}] waiting for window
    this._queuedBytes = 0;

    this.stats = {
      framesReceived: 0,
      messagesReceived: 0,
      creditsSent: 0,
      framesSent: 0,
      messagesSent: 0,
      inputDroppedBytes: 0,
    };
  }

  /** outstanding is the client→host bytes sent and not yet credited. */
  get outstanding() {
    return this._sentBytes - this._hostConsumed;
  }

  /** receiveState returns the receive counters, for status lines and tests. */
  receiveState() {
    return {
      receivedBytes: this._receivedBytes,
      releasedBytes: this._releasedBytes,
      creditSent: this._creditSent,
      unreleased: this._unreleased.length - this._unreleasedHead,
    };
  }

  /** sendState returns the send counters, for status lines and tests. */
  sendState() {
    return {
      sentBytes: this._sentBytes,
      consumedBytes: this._hostConsumed,
      queuedMessages: this._queue.length,
      queuedBytes: this._queuedBytes,
    };
  }

  // ---- receive -----------------------------------------------------------

  /** _onFrame handles one channel/frame; rawLength is its WebSocket text length. */
  _onFrame(p, rawLength) {
    if (this.ended) return;
    this.stats.framesReceived++;
    const r = this.receive;
    if (rawLength * 2 > r.maximumFrameBytes) {
      return this.reset('frame-too-large',
        `frame of ${rawLength * 2} bytes exceeds maximumFrameBytes ${r.maximumFrameBytes}`);
    }
    const { data, messageId } = p;
    if (typeof data !== 'string' || !Number.isSafeInteger(messageId) ||
        (p.final !== undefined && typeof p.final !== 'boolean')) {
      return this.reset('protocol-error', 'malformed channel/frame');
    }
    const bytes = size(data);
    if (this._active) {
      if (messageId !== this._active.id) {
        return this.reset('protocol-error',
          `frame for message ${messageId} while message ${this._active.id} is incomplete`);
      }
    } else {
      if (messageId !== this._nextMessageId) {
        return this.reset('protocol-error',
          `message ${messageId} started, expected ${this._nextMessageId}`);
      }
      // §5: a message may start only while outstanding < window. The host's
      // view of our credit is never newer than _creditSent, so this check
      // can only be more lenient than the host's own. Lifecycle messages
      // may start beyond the window but are then limited to 1024 bytes and
      // checked to be lifecycle messages once decoded.
      const beyond = this._receivedBytes - this._creditSent >= r.windowBytes;
      this._active = { id: messageId, parts: [], bytes: 0, lifecycle: beyond };
    }
    const a = this._active;
    // A frame boundary never splits a surrogate pair (§4); reject, never repair.
    if (data.length > 0 &&
        (isLow(data.charCodeAt(0)) || isHigh(data.charCodeAt(data.length - 1)))) {
      return this.reset('protocol-error', `message ${a.id}: frame splits a surrogate pair`);
    }
    if (a.bytes + bytes > r.maximumMessageBytes) {
      return this.reset('message-too-large',
        `message ${a.id} exceeds maximumMessageBytes ${r.maximumMessageBytes}`);
    }
    if (a.lifecycle && a.bytes + bytes > LIFECYCLE_MAX_BYTES) {
      return this.reset('protocol-error',
        `message ${a.id} started with the window exhausted (${r.windowBytes} bytes outstanding)`);
    }
    // Empty frames carry nothing to keep: the parts list stays bounded by
    // maximumMessageBytes / 2 however the host slices (lessons rule 13).
    if (bytes > 0) a.parts.push(data);
    a.bytes += bytes;
    this._receivedBytes += bytes;
    if (p.final !== true) return;

    this._active = null;
    this._nextMessageId = a.id + 1;
    let msg;
    try {
      msg = JSON.parse(a.parts.join(''));
    } catch {
      return this.reset('protocol-error', `message ${a.id} is not valid JSON`);
    }
    if (!msg || typeof msg !== 'object' || msg.jsonrpc !== '2.0' ||
        typeof msg.method !== 'string' || 'id' in msg) {
      return this.reset('protocol-error', `message ${a.id} is not a JSON-RPC notification`);
    }
    if (LIFECYCLE_METHODS.has(msg.method)) {
      if (this._lifecycleSeen.has(msg.method)) {
        return this.reset('protocol-error', `second ${msg.method}`);
      }
      this._lifecycleSeen.add(msg.method);
    } else if (a.lifecycle) {
      return this.reset('protocol-error',
        `message ${a.id} (${msg.method}) started with the window exhausted`);
    }
    if (msg.params === undefined) msg.params = {};
    this.stats.messagesReceived++;
    const entry = { bytes: a.bytes, done: false };
    this._unreleased.push(entry);
    let called = false;
    const release = () => {
      if (called) return;
      called = true;
      entry.done = true;
      this._advanceRelease();
    };
    try {
      this.consumer.onMessage?.(msg, release, this);
    } catch (err) {
      // A consumer bug must not wedge credit: release and report.
      release();
      this.session._emit('error', err);
    }
  }

  _advanceRelease() {
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
    this._maybeCredit();
  }

  // Credit batching (flow-control-lessons rule 12): send once a quarter
  // window is waiting, and always once everything delivered is released, so
  // the host is never left waiting on a sub-threshold remainder.
  _maybeCredit() {
    if (this.ended) return;
    const unsent = this._releasedBytes - this._creditSent;
    if (unsent <= 0) return;
    const idle = this._unreleasedHead === this._unreleased.length;
    if (!idle && unsent < this.receive.windowBytes / 4) return;
    this._creditSent = this._releasedBytes;
    this.stats.creditsSent++;
    this.session.notify('channel/credit', {
      channel: this.channel,
      subscriptionId: this.id,
      consumedBytes: this._creditSent,
    });
  }

  // ---- send --------------------------------------------------------------

  /**
   * sendInput queues terminal/input {data} and sends what the host window
   * allows. Adjacent queued input is coalesced into one message. It returns
   * false, and drops data, when the subscription has ended, the session is
   * view-only, or the queue bound would be exceeded.
   */
  sendInput(data) {
    if (typeof data !== 'string' || data.length === 0) return true;
    if (this.ended || this.session.role !== 'control') return false;
    return this._enqueue('terminal/input', data);
  }

  _enqueue(method, data) {
    const bytes = size(data);
    if (this._queuedBytes + bytes > this.maxQueuedInputBytes) {
      this.stats.inputDroppedBytes += bytes;
      this.session._emit('inputDropped', { subscription: this, bytes });
      return false;
    }
    const overhead = JSON.stringify({ jsonrpc: '2.0', method, params: { data: '' } }).length;
    const budget = Math.floor(this.send.maximumMessageBytes / 2) - overhead;
    const last = this._queue[this._queue.length - 1];
    if (last && last.method === method) {
      const joined = last.data + data;
      if (escapedLength(joined) <= budget) {
        last.data = joined;
        this._queuedBytes += bytes;
        this._pump();
        return true;
      }
    }
    // A paste larger than one message becomes several, split between
    // characters, never inside a surrogate pair.
    for (const piece of fragment(data, budget)) this._queue.push({ method, data: piece });
    this._queuedBytes += bytes;
    this._pump();
    return true;
  }

  // §5 soft window: a message starts only while outstanding < window and
  // is then sent whole (it may finish beyond the window), so no message is
  // ever left half-sent between calls.
  _pump() {
    while (!this.ended && this._queue.length > 0 && this.outstanding < this.send.windowBytes) {
      const item = this._queue.shift();
      this._queuedBytes -= size(item.data);
      try {
        this._sendMessage(item.method, { data: item.data });
      } catch (err) {
        // Only fragment() throws: the host's frame limit cannot hold the
        // envelope (a channel id near maxIdLength). Nothing was sent.
        return this.reset('protocol-error', err.message);
      }
    }
  }

  _sendMessage(method, params) {
    const text = JSON.stringify({ jsonrpc: '2.0', method, params });
    const id = this._sendNextId++;
    // The envelope's size with an empty data string and final:true bounds
    // every frame's overhead for this message; the rest is the budget for
    // the escaped data, filled in one pass by fragment().
    const overhead = JSON.stringify(this._frameEnvelope(id, '', true)).length;
    const budget = Math.floor(this.send.maximumFrameBytes / 2) - overhead;
    const parts = fragment(text, budget);
    for (let i = 0; i < parts.length; i++) {
      const final = i === parts.length - 1;
      this._sentBytes += size(parts[i]);
      this.stats.framesSent++;
      this.session._sendText(JSON.stringify(this._frameEnvelope(id, parts[i], final)));
    }
    this._boundaries.push(this._sentBytes);
    this.stats.messagesSent++;
  }

  _frameEnvelope(messageId, data, final) {
    const params = { channel: this.channel, subscriptionId: this.id, messageId, data };
    if (final) params.final = true;
    return { jsonrpc: '2.0', method: 'channel/frame', params };
  }

  /** _onCredit handles channel/credit for client→host data (§5). */
  _onCredit(p) {
    if (this.ended) return;
    const c = p.consumedBytes;
    if (!Number.isSafeInteger(c) || c < 0) {
      return this.reset('invalid-credit', 'consumedBytes is not a non-negative safe integer');
    }
    if (c <= this._hostConsumed) return; // older or equal: ignored
    if (c > this._sentBytes) {
      return this.reset('invalid-credit', `consumedBytes ${c} exceeds sent ${this._sentBytes}`);
    }
    const b = this._boundaries;
    let i = 0;
    while (i < b.length && b[i] < c) i++;
    if (i === b.length || b[i] !== c) {
      return this.reset('invalid-credit', `consumedBytes ${c} is not on a message boundary`);
    }
    b.splice(0, i + 1);
    this._hostConsumed = c;
    this._pump();
  }

  // ---- control -----------------------------------------------------------

  /** resize asks the host to resize the terminal (control role, §8). */
  resize(rows, cols) {
    return this.session.request('terminal/resize', { subscriptionId: this.id, rows, cols });
  }

  /** unsubscribe ends the subscription (§3). */
  async unsubscribe() {
    if (this.ended) return;
    this._end({ code: END_UNSUBSCRIBED, message: 'unsubscribed', local: true });
    try {
      await this.session.request('unsubscribe', { subscriptionId: this.id });
    } catch {
      // Already gone on the host, or the connection closed: either way ended.
    }
  }

  /** reset sends channel/reset to the host and ends the subscription locally (§7). */
  reset(code, message) {
    if (this.ended) return;
    this.session.notify('channel/reset', { channel: this.channel, subscriptionId: this.id, code, message });
    this._end({ code, message, local: true });
  }

  _onReset(p) {
    if (this.ended) return;
    this._end({ code: String(p.code ?? 'unknown'), message: String(p.message ?? ''), local: false });
  }

  _end(info) {
    if (this.ended) return;
    this.ended = true;
    this.endInfo = info;
    // §7: an incomplete message is discarded; queued input is never retried
    // blindly (§8), so it is dropped too.
    this._active = null;
    this._queue.length = 0;
    this._queuedBytes = 0;
    this.session._subs.delete(this.id);
    try {
      this.consumer.onEnd?.(info, this);
    } catch (err) {
      this.session._emit('error', err);
    }
  }
}

// ---------------------------------------------------------------------------
// Session.

/**
 * Session is one AHP/1 WebSocket connection. Create it with Session.connect,
 * which resolves after initialize succeeded. Events (session.on):
 *   'close'  {code, reason} once, when the socket closed
 *   'error'  an Error from a consumer callback
 *   'inputDropped' {subscription, bytes}
 */
export class Session extends Emitter {
  constructor(ws) {
    super();
    this.ws = ws;
    this.initializeResult = null;
    this.closed = false;
    this.closeInfo = null;
    this._nextId = 1;
    this._pending = new Map(); // id → {resolve, reject, onResult}
    this._subs = new Map(); // subscriptionId → Subscription
    this.stats = { droppedNotifications: 0, protocolErrors: 0 };
  }

  /** role is "view" or "control" (from initialize's access.role). */
  get role() {
    return this.initializeResult?.access?.role ?? 'view';
  }

  get hostReceiveDefaults() {
    return this.initializeResult?.capabilities?.flowControl?.hostReceiveDefaults;
  }

  /**
   * connect opens url with subprotocol ahp.v1, sends initialize and resolves
   * with the Session. It rejects with RpcError (initialize refused) or
   * ClosedError (the socket closed first).
   * opts: {url, WebSocket, token?, clientName?, clientVersion?, timeoutMs?}
   */
  static connect(opts) {
    const WS = opts.WebSocket ?? globalThis.WebSocket;
    const ws = new WS(opts.url, SUBPROTOCOL);
    const s = new Session(ws);
    return s._start(opts);
  }

  _start(opts) {
    const ws = this.ws;
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (err) => {
        if (settled) return;
        settled = true;
        reject(err);
      };
      ws.onmessage = (ev) => this._onText(ev.data);
      ws.onerror = () => {}; // a close event always follows
      ws.onclose = (ev) => {
        this._onClose(ev.code, ev.reason);
        fail(new ClosedError(ev.code, ev.reason));
      };
      ws.onopen = () => {
        const params = {
          protocolVersion: PROTOCOL_VERSION,
          client: { name: opts.clientName ?? 'ahpd-web', version: opts.clientVersion ?? '0' },
          capabilities: { flowControl: true },
        };
        if (opts.token) params.token = opts.token;
        this.request('initialize', params).then(
          (result) => {
            if (result?.protocolVersion !== PROTOCOL_VERSION) {
              fail(new RpcError(ErrorCode.INVALID_REQUEST,
                `host speaks ${result?.protocolVersion}, want ${PROTOCOL_VERSION}`));
              return this.close(1000, 'unsupported protocol version');
            }
            this.initializeResult = result;
            settled = true;
            resolve(this);
          },
          (err) => {
            // The host closes with 1008 after a refused initialize; do not
            // wait. Settle first: the close reason must not replace err.
            fail(err);
            this.close(1000, 'initialize failed');
          },
        );
      };
    });
  }

  _sendText(text) {
    if (this.closed) return false;
    this.ws.send(text);
    return true;
  }

  /** notify sends a JSON-RPC notification (no response). */
  notify(method, params) {
    return this._sendText(JSON.stringify({ jsonrpc: '2.0', method, params }));
  }

  /** request sends a JSON-RPC request and resolves with its result. */
  request(method, params, hooks) {
    if (this.closed) {
      return Promise.reject(new ClosedError(this.closeInfo.code, this.closeInfo.reason));
    }
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, onResult: hooks?.onResult });
      this._sendText(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    });
  }

  /** listChannels returns channels/list's channel array. */
  async listChannels() {
    const r = await this.request('channels/list', {});
    return Array.isArray(r?.channels) ? r.channels : [];
  }

  /**
   * subscribe subscribes to channel and resolves with the Subscription.
   * consumer: {onMessage(msg, release, sub), onEnd(info, sub)}.
   * options: {receive?: limits, maxQueuedInputBytes?}.
   */
  subscribe(channel, consumer, options = {}) {
    const receive = { ...DEFAULT_RECEIVE, ...(options.receive || {}) };
    let sub;
    return this.request('subscribe', { channel, flowControl: { receive } }, {
      // Created synchronously when the response is handled, so frames that
      // follow it in the same read are routed (§3: the result precedes data).
      onResult: (result) => {
        sub = new Subscription(this, channel, result, consumer, receive, options);
        this._subs.set(sub.id, sub);
      },
    }).then(() => sub);
  }

  /** subscription returns the live Subscription with this id, if any. */
  subscription(id) {
    return this._subs.get(id);
  }

  /**
   * close closes the socket and ends the session at once: 'close' is
   * emitted now, not when the closing handshake finishes (on a dead TCP
   * connection that can take minutes). Browsers accept code 1000 or
   * 3000–4999 only.
   */
  close(code = 1000, reason = '') {
    if (this.closed) return;
    try {
      this.ws.close(code, reason);
    } catch {
      this.ws.close();
    }
    this._onClose(code, reason);
  }

  _onText(text) {
    if (typeof text !== 'string') return; // AHP/1 is text only (§1)
    let m;
    try {
      m = JSON.parse(text);
    } catch {
      this.stats.protocolErrors++;
      return;
    }
    if (!m || typeof m !== 'object' || Array.isArray(m)) {
      this.stats.protocolErrors++;
      return;
    }
    if (m.method === undefined && m.id !== undefined && m.id !== null) {
      const p = this._pending.get(m.id);
      if (!p) return;
      this._pending.delete(m.id);
      if (m.error) {
        p.reject(new RpcError(m.error.code, m.error.message ?? '', m.error.data));
      } else {
        try {
          p.onResult?.(m.result);
        } catch (err) {
          return p.reject(err);
        }
        p.resolve(m.result);
      }
      return;
    }
    const params = m.params && typeof m.params === 'object' ? m.params : {};
    switch (m.method) {
      case 'channel/frame':
      case 'channel/credit':
      case 'channel/reset': {
        const sub = this._subs.get(params.subscriptionId);
        // §3: notifications for an unknown or ended subscription are dropped and counted.
        if (!sub || sub.channel !== params.channel) {
          this.stats.droppedNotifications++;
          return;
        }
        if (m.method === 'channel/frame') sub._onFrame(params, text.length);
        else if (m.method === 'channel/credit') sub._onCredit(params);
        else sub._onReset(params);
        return;
      }
      default:
        if (m.id !== undefined && m.method !== undefined) {
          this._sendText(JSON.stringify({
            jsonrpc: '2.0', id: m.id,
            error: { code: ErrorCode.METHOD_NOT_FOUND, message: `method not found: ${m.method}` },
          }));
        } else if (m.id === null && m.error) {
          // A connection-level error the host could not tie to a request.
          this._emit('error', new RpcError(m.error.code, m.error.message ?? ''));
        } else {
          this.stats.droppedNotifications++;
        }
    }
  }

  _onClose(code, reason) {
    if (this.closed) return;
    this.closed = true;
    this.closeInfo = { code, reason: reason || '' };
    this.ws.onmessage = null; // nothing after the close is processed
    const err = new ClosedError(code, reason);
    for (const p of this._pending.values()) p.reject(err);
    this._pending.clear();
    for (const sub of [...this._subs.values()]) {
      sub._end({ code: END_CONNECTION_CLOSED, message: `connection closed (${code})`, local: true });
    }
    this._emit('close', this.closeInfo);
  }
}

// ---------------------------------------------------------------------------
// Client: reconnect with backoff and re-subscribe.

/** backoffDelay returns the delay before reconnect attempt n (1-based). */
export function backoffDelay(n, { initialMs = 250, maxMs = 5000 } = {}, random = Math.random) {
  const base = Math.min(maxMs, initialMs * 2 ** Math.max(0, n - 1));
  // ±20% jitter so a restarted daemon is not hit by every page at once.
  return Math.min(maxMs, Math.round(base * (0.8 + 0.4 * random())));
}

/**
 * Client keeps one Session open, reconnecting with exponential backoff
 * (capped at maxMs), and re-subscribes attached channels on every new
 * Session; the host then sends a fresh snapshot (§8).
 *
 * options: {url, WebSocket?, credentials, clientVersion?, backoff?:{initialMs,maxMs},
 *           setTimeout?, clearTimeout?, random?}
 * credentials: {token(): string|null, accepted(initializeResult), rejected(err)}
 *
 * Events (client.on):
 *   'state' {state, attempt, retryInMs, closeCode, closeReason, error}
 *           state ∈ 'connecting' | 'connected' | 'reconnecting' | 'closed'
 *   'session' the new Session after initialize
 */
export class Client extends Emitter {
  constructor(options) {
    super();
    this.options = options;
    this.session = null;
    this.state = { state: 'idle', attempt: 0 };
    this._attachments = new Set();
    this._timer = null;
    this._stopped = true;
    this._setTimeout = options.setTimeout ?? ((f, ms) => setTimeout(f, ms));
    this._clearTimeout = options.clearTimeout ?? ((t) => clearTimeout(t));
  }

  _setState(s) {
    this.state = s;
    this._emit('state', s);
  }

  /** start connects (and keeps reconnecting until stop). */
  start() {
    if (!this._stopped) return;
    this._stopped = false;
    this._connect(0);
  }

  /** stop closes the session and stops reconnecting. */
  stop(reason = 'stopped') {
    this._stopped = true;
    if (this._timer) this._clearTimeout(this._timer);
    this._timer = null;
    if (this.session) this.session.close(1000, reason);
    this._setState({ state: 'closed', attempt: 0, closeCode: 1000, closeReason: reason });
  }

  async _connect(attempt) {
    this._timer = null;
    if (this._stopped) return;
    const token = this.options.credentials.token();
    if (!token) {
      this._stopped = true;
      return this._setState({ state: 'closed', attempt, error: 'no-credential' });
    }
    this._setState({ state: attempt === 0 ? 'connecting' : 'reconnecting', attempt, retryInMs: 0 });
    let session;
    try {
      session = await Session.connect({
        url: this.options.url,
        WebSocket: this.options.WebSocket,
        token,
        clientVersion: this.options.clientVersion,
      });
    } catch (err) {
      if (this._stopped) return;
      // A refused credential will not work on retry; the page must get a new
      // link. A 1008 close before initialize answered is taken as a refusal
      // too, so a bad token never loops (origin refusals fail the upgrade
      // with HTTP 403, which the browser reports as 1006).
      if ((err instanceof RpcError && err.code === ErrorCode.UNAUTHORIZED) ||
          (err instanceof ClosedError && err.closeCode === 1008)) {
        this.options.credentials.rejected(err);
        this._stopped = true;
        const ended = this._policyClose;
        this._policyClose = null;
        if (ended != null) {
          // The host closed the session with 1008 (a kick, a revoked or
          // expired token) and refuses the reconnect token since: show
          // the host's reason, not the refusal.
          return this._setState({ state: 'closed', attempt, error: 'ended', closeCode: 1008, closeReason: ended });
        }
        return this._setState({ state: 'closed', attempt, error: 'unauthorized', closeReason: err.message });
      }
      return this._retry(attempt + 1, err);
    }
    if (this._stopped) {
      session.close(1000, 'stopped');
      return;
    }
    this.options.credentials.accepted(session.initializeResult);
    this.session = session;
    this._policyClose = null;
    session.on('close', (info) => {
      // Subscriptions ended with the session (their onEnd ran); the next
      // session re-subscribes every attachment.
      if (this.session === session) this.session = null;
      // A 1008 may be transient (an output stall): reconnect once; if the
      // credential is then refused, the 1008's reason is what ended it.
      this._policyClose = info.code === 1008 ? info.reason : null;
      if (!this._stopped) this._retry(1, new ClosedError(info.code, info.reason));
    });
    this._setState({ state: 'connected', attempt: 0, role: session.role });
    this._emit('session', session);
    for (const a of this._attachments) a._subscribe(session);
  }

  _retry(attempt, err) {
    const delay = backoffDelay(attempt, this.options.backoff, this.options.random);
    this._setState({
      state: 'reconnecting',
      attempt,
      retryInMs: delay,
      retryAt: Date.now() + delay,
      closeCode: err?.closeCode,
      closeReason: err?.reason ?? err?.message,
    });
    this._timer = this._setTimeout(() => this._connect(attempt), delay);
  }

  /**
   * attach keeps channel subscribed across reconnects. consumer is as for
   * Session.subscribe, plus onSubscribed(sub, session) and
   * onSubscribeError(err). It returns an Attachment with detach().
   */
  attach(channel, consumer, options = {}) {
    const a = new Attachment(this, channel, consumer, options);
    this._attachments.add(a);
    if (this.session) a._subscribe(this.session);
    return a;
  }
}

/** Attachment is a channel kept subscribed by a Client. */
export class Attachment {
  constructor(client, channel, consumer, options) {
    this.client = client;
    this.channel = channel;
    this.consumer = consumer;
    this.options = options;
    this.subscription = null;
    this.detached = false;
  }

  async _subscribe(session) {
    if (this.detached) return;
    const c = this.consumer;
    try {
      const sub = await session.subscribe(this.channel, {
        onMessage: (m, release, s) => c.onMessage?.(m, release, s),
        onEnd: (info, s) => {
          if (this.subscription === s) this.subscription = null;
          c.onEnd?.(info, s);
        },
      }, this.options);
      if (this.detached) return sub.unsubscribe();
      this.subscription = sub;
      c.onSubscribed?.(sub, session);
    } catch (err) {
      if (!this.detached && !(err instanceof ClosedError)) c.onSubscribeError?.(err);
    }
  }

  /** detach unsubscribes and stops re-subscribing. */
  detach() {
    this.detached = true;
    this.client._attachments.delete(this);
    const s = this.subscription;
    this.subscription = null;
    if (s) return s.unsubscribe();
    return Promise.resolve();
  }
}
