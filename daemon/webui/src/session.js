// session.js — the AHP/1 session layer (see ../../../../shared/PROTOCOL.md):
// one WebSocket connection and what lives on it. The wire and flow-control
// rules themselves are in wire.js; where tokens come from is credentials.js.
//
// No DOM dependency: the WebSocket constructor and the timer functions are
// injected, so node tests drive it with a fake socket.
//
//   Session       one WebSocket connection: initialize, JSON-RPC requests,
//                 routing of channel/frame, channel/credit and channel/reset
//                 to the subscription they name.
//   Subscription  one subscriptionId: feeds wire.js's Receiver and Sender,
//                 sends what they return (frames, credit, resets), hands
//                 complete messages to its consumer, subscribe/unsubscribe.
//   Client        reconnects a Session with exponential backoff, using the
//                 credentials given (ticket, then reconnect token), and
//                 re-subscribes the channels attached to it.
//
// Everything runs on the single JavaScript event loop; no method may be
// called concurrently because there is no concurrency.
//
// Consumers and views
// -------------------
// Session.subscribe and Client.attach take a consumer; all callbacks but
// onMessage are optional:
//   onMessage(msg, release, sub)  a decoded logical message {method, params}
//                                 of the stream, in order; call release()
//                                 once it is consumed (rendered, applied),
//                                 which is what credit follows.
//   onSubscribed(sub, session)    (Client.attach) a Subscription is live: the
//                                 first one or the one after a reconnect,
//                                 whose stream starts with a snapshot (§8).
//   onEnd(info, sub)              sub ended: info {code, message, local}.
//   onSubscribeError(err)         (Client.attach) subscribe was refused.
//
// A view shows one kind of channel. Each kind is a module of its own, a
// sibling of terminal.js (later tcp.js, telemetry.js), exporting
//   kind                          the channels/list `type` it shows
//   createView(container, hooks)  builds the view in a DOM element and
//                                 returns it; hooks are the page's callbacks
//                                 for what the view reports (terminal.js:
//                                 onSize, onReady, onExit), and every view
//                                 calls hooks.onForbidden() when the host
//                                 refuses a request with FORBIDDEN.
// The view it returns is a consumer as above, with the same methods:
//   onSubscribed(sub, session)    keep sub: the only thing the view sends on
//                                 (terminal.js: sub.sendInput, sub.resize)
//   onMessage(msg, release, sub)  apply msg in stream order, then release();
//                                 unknown methods are released unread
//   onEnd(info, sub)              forget sub if it is the one kept
// plus
//   setRole(role)                 'control' or 'view' (from initialize): a
//                                 view-only page sends nothing
//   dispose()                     stop and remove it from the container.
// The page (main.js) creates the view, wraps it with its own bookkeeping and
// passes that to Client.attach; a view sends only on the sub it was handed
// and never touches the Client.

import {
  DEFAULT_MAX_QUEUED_INPUT_BYTES,
  DEFAULT_RECEIVE,
  Receiver,
  Sender,
  size,
  validLimits,
} from './wire.js';
import { WindowTuner } from './tune.js';
import { createRttMeter } from './rtt.js';

/**
 * AUTO_WINDOW_CEILING is how far a subscription's receive window may grow
 * when the page sizes it to the path (PROTOCOL.md §6, "Changing a
 * window"): 8 MiB, lowered to the host's maximum. A flood the page cannot
 * parse as fast is skipped by snapshot instead (tune.js).
 */
export const AUTO_WINDOW_CEILING = 8 * 1024 * 1024;
/** PAGE_QUEUE_TARGET_MS is the queue the page's window tuner tolerates (tune.js's default is 4). */
export const PAGE_QUEUE_TARGET_MS = 30;
/** AUTO_WINDOW_IDLE_MS: a subscription that released nothing for this long stops asking for frequent pings. */
const AUTO_WINDOW_IDLE_MS = 1000;

export const PROTOCOL_VERSION = 'ahp/1';
export const SUBPROTOCOL = 'ahp.v1';
// WS_PATH and CHECK_PATH are relative to the page's own URL: the daemon
// serves the page, /v1/ws and /v1/check under one prefix (its publicUrl's
// path, "/" by default), so a page behind a proxy at /ahpd/ dials
// /ahpd/v1/ws.
export const WS_PATH = 'v1/ws';
export const CHECK_PATH = 'v1/check';

/** websocketURL returns the WebSocket URL of the page at pageHref: WS_PATH beside it, ws: or wss:. */
export function websocketURL(pageHref) {
  const u = new URL(WS_PATH, pageHref);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  u.search = '';
  u.hash = '';
  return u.href;
}

/** checkURL returns the URL of the daemon's access check for the page at pageHref. */
export function checkURL(pageHref) {
  const u = new URL(CHECK_PATH, pageHref);
  u.search = '';
  u.hash = '';
  return u.href;
}

/**
 * diagnoseRefusal asks the daemon's access check (POST, so that the
 * browser sends the page's Origin, as it does on the WebSocket upgrade)
 * whether this page's Host and Origin are refused. It resolves with the
 * check's answer when they are ({refused: 'host'|'origin', status,
 * setting, fix, host, origin}), else null: allowed, or no answer (the
 * daemon is down, a proxy's error page, an older daemon).
 */
export async function diagnoseRefusal(url, fetchFn = globalThis.fetch, timeoutMs = 5000) {
  if (!fetchFn) return null;
  const ctl = typeof AbortController === 'function' ? new AbortController() : null;
  const timer = ctl ? setTimeout(() => ctl.abort(), timeoutMs) : null;
  try {
    const res = await fetchFn(url, { method: 'POST', cache: 'no-store', credentials: 'omit', signal: ctl?.signal });
    if (!res.ok) return null;
    const body = await res.json();
    if (!body || body.ok !== false || (body.refused !== 'host' && body.refused !== 'origin')) return null;
    return {
      refused: body.refused,
      status: Number(body.status) || null,
      setting: String(body.setting ?? ''),
      fix: String(body.fix ?? ''),
      host: String(body.host ?? ''),
      origin: String(body.origin ?? ''),
    };
  } catch {
    return null;
  } finally {
    if (timer) clearTimeout(timer);
  }
}

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
  // opened is false when the WebSocket closed before it opened (the
  // upgrade failed: nothing listens, or the daemon refused it).
  constructor(closeCode, reason, opened = true) {
    super(`connection closed (${closeCode}${reason ? ': ' + reason : ''})`);
    this.name = 'ClosedError';
    this.closeCode = closeCode;
    this.reason = reason;
    this.opened = opened;
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

    // Host → client, fed by the session's message handler and by release
    // callbacks; client → host, fed by sendInput and channel/credit.
    this._rx = new Receiver(this.receive);
    this._tx = new Sender(channel, this.id, this.send,
      options.maxQueuedInputBytes ?? DEFAULT_MAX_QUEUED_INPUT_BYTES);

    this.stats = {
      framesReceived: 0,
      messagesReceived: 0,
      creditsSent: 0,
      framesSent: 0,
      messagesSent: 0,
      inputDroppedBytes: 0,
      windowChanges: 0,
    };

    // Adaptive window (tune.js): on unless options.autoWindow is false,
    // when the host takes channel/window and ping (session.rtt).
    this._tuner = null;
    this._offRtt = null;
    this._idleTimer = null;
    const meter = session.rtt;
    if (options.autoWindow !== false && meter && !meter.stopped) {
      const max = session.initializeResult?.capabilities?.flowControl?.maximums?.windowBytes;
      let ceiling = options.windowCeiling ?? AUTO_WINDOW_CEILING;
      if (Number.isSafeInteger(max) && max > 0) ceiling = Math.min(ceiling, max);
      // The page's pings wait behind its own parsing on the main thread
      // (4–10 ms over the path's round trip while xterm.js draws, on a
      // busy machine), which a 4 ms target takes for a queue on the path:
      // the window then stays at 256 KiB on long links and a flood the page
      // keeps up with is skipped by snapshot (docs/benchmarks.md, "The web
      // page through the link"). What queues here is this terminal's own
      // output, ahead of its own echo: 30 ms of it is the page's target.
      this._tuner = new WindowTuner({ floor: this.receive.windowBytes, ceiling, queueTargetMs: options.queueTargetMs ?? PAGE_QUEUE_TARGET_MS }, this.receive.windowBytes);
      if (meter.srtt !== null) this._tuner.onRtt(session._now(), meter.latest ?? meter.srtt);
      this._offRtt = meter.onSample(({ rtt }) => this._tuner?.onRtt(session._now(), rtt));
    }
  }

  /** window is the receive window in force (the page may have tuned it). */
  get window() {
    return this._rx.limits.windowBytes;
  }

  /**
   * _tune feeds bytes released to the tuner and announces a changed window
   * with channel/window, after the Receiver takes it.
   */
  _tune(bytes) {
    const meter = this.session.rtt;
    if (!this._tuner || !meter || this.ended) return;
    meter.busy(true, this.id);
    if (this._idleTimer === null) {
      this._idleTimer = setTimeout(() => this._idle(), AUTO_WINDOW_IDLE_MS);
    }
    this._lastRelease = this.session._now();
    this._tuner.noteHeld(this._rx.held);
    const w = this._tuner.onRelease(this._lastRelease, bytes);
    if (w === null) return;
    this._rx.setWindow(w);
    this.receive = { ...this.receive, windowBytes: w };
    this.stats.windowChanges++;
    this.session.notify('channel/window', { channel: this.channel, subscriptionId: this.id, windowBytes: w });
  }

  _idle() {
    this._idleTimer = null;
    if (this.ended) return;
    const since = this.session._now() - this._lastRelease;
    if (since >= AUTO_WINDOW_IDLE_MS) {
      this.session.rtt?.busy(false, this.id);
    } else {
      this._idleTimer = setTimeout(() => this._idle(), AUTO_WINDOW_IDLE_MS - since);
    }
  }

  /** outstanding is the client→host bytes sent and not yet credited. */
  get outstanding() {
    return this._tx.outstanding;
  }

  /** maxQueuedInputBytes bounds the input waiting for host credit. */
  get maxQueuedInputBytes() {
    return this._tx.maxQueuedBytes;
  }

  /** receiveState returns the receive counters, for status lines and tests. */
  receiveState() {
    return this._rx.state();
  }

  /** sendState returns the send counters, for status lines and tests. */
  sendState() {
    return this._tx.state();
  }

  // ---- receive -----------------------------------------------------------

  /** _onFrame handles one channel/frame; rawLength is its WebSocket text length. */
  _onFrame(p, rawLength) {
    if (this.ended) return;
    this.stats.framesReceived++;
    const r = this._rx.frame(p, rawLength);
    if (r === null) return;
    if (r.error) return this.reset(r.error.code, r.error.message);
    const msg = r.message;
    this.stats.messagesReceived++;
    const entry = this._rx.deliver(r.bytes);
    const release = () => {
      if (this._rx.release(entry)) {
        this._tune(entry.bytes);
        this._maybeCredit();
      }
    };
    try {
      this.consumer.onMessage?.(msg, release, this);
    } catch (err) {
      // A consumer bug must not wedge credit: release and report.
      release();
      this.session._emit('error', err);
    }
  }

  _maybeCredit() {
    if (this.ended) return;
    const consumedBytes = this._rx.takeCredit();
    if (consumedBytes === null) return;
    this.stats.creditsSent++;
    this.session.notify('channel/credit', {
      channel: this.channel,
      subscriptionId: this.id,
      consumedBytes,
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
    if (!this._tx.enqueue(method, data)) {
      const bytes = size(data);
      this.stats.inputDroppedBytes += bytes;
      this.session._emit('inputDropped', { subscription: this, bytes });
      return false;
    }
    this._pump();
    return true;
  }

  _pump() {
    if (this.ended) return;
    const { frames, messages, error } = this._tx.pump();
    for (const text of frames) {
      this.stats.framesSent++;
      this.session._sendText(text);
    }
    this.stats.messagesSent += messages;
    if (error) this.reset(error.code, error.message);
  }

  /** _onWindow handles the host's channel/window for client→host data (§6). */
  _onWindow(p) {
    if (this.ended) return;
    if (this._tx.setWindow(p.windowBytes)) this._pump();
  }

  /** _onCredit handles channel/credit for client→host data (§5). */
  _onCredit(p) {
    if (this.ended) return;
    const error = this._tx.credit(p.consumedBytes);
    if (error) return this.reset(error.code, error.message);
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
    this._offRtt?.();
    this._offRtt = null;
    this._tuner = null;
    if (this._idleTimer !== null) clearTimeout(this._idleTimer);
    this._idleTimer = null;
    this.session.rtt?.busy(false, this.id);
    // §7: an incomplete message is discarded; queued input is never retried
    // blindly (§8), so it is dropped too.
    this._rx.abort();
    this._tx.clear();
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
    /** rtt is the round-trip meter (rtt.js) once initialized, or null. */
    this.rtt = null;
  }

  /** _now is the clock (ms) the tuners and the meter share. */
  _now() {
    return globalThis.performance?.now?.() ?? Date.now();
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
      let opened = false;
      const fail = (err) => {
        if (settled) return;
        settled = true;
        reject(err);
      };
      ws.onmessage = (ev) => this._onText(ev.data);
      ws.onerror = () => {}; // a close event always follows
      ws.onclose = (ev) => {
        this._onClose(ev.code, ev.reason);
        fail(new ClosedError(ev.code, ev.reason, opened));
      };
      ws.onopen = () => {
        opened = true;
        const params = {
          protocolVersion: PROTOCOL_VERSION,
          client: { name: opts.clientName ?? 'ahpd-web', version: opts.clientVersion ?? '0' },
          capabilities: { flowControl: true, windowUpdates: true },
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
            // The round trip (ping), for adaptive windows and predictive
            // echo; null when the host does not take ping.
            if (opts.rtt !== false) this.rtt = createRttMeter(this);
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
    // During the closing handshake (the host's close frame arrived, the
    // close event not yet) a send is lost anyway, and the browser logs an
    // error for it: send nothing once the socket is not OPEN (1).
    if (this.ws.readyState !== undefined && this.ws.readyState !== 1) return false;
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

  /**
   * createsChannels reports whether the credential may create channels:
   * role control over all channels (channels/create).
   */
  get createsChannels() {
    const a = this.initializeResult?.access;
    return a?.role === 'control' && !(a.channels?.length > 0);
  }

  /** createTerminal starts a login shell (channels/create) and resolves with its URI. */
  async createTerminal() {
    const r = await this.request('channels/create', { type: 'terminal' });
    return r?.channel;
  }

  /** restartChannel reruns an exited terminal under its URI (channels/restart). */
  restartChannel(channel) {
    return this.request('channels/restart', { channel });
  }

  /** closeChannel closes a channel (channels/close). */
  closeChannel(channel) {
    return this.request('channels/close', { channel });
  }

  /**
   * watchChannels asks for channels/changed notifications (emitted as
   * 'channelsChanged') whenever a channel is created, exits or closes, or a
   * viewer joins or leaves.
   */
  watchChannels() {
    return this.request('channels/watch', {});
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
      case 'channel/window':
      case 'channel/reset': {
        const sub = this._subs.get(params.subscriptionId);
        // §3: notifications for an unknown or ended subscription are dropped and counted.
        if (!sub || sub.channel !== params.channel) {
          this.stats.droppedNotifications++;
          return;
        }
        if (m.method === 'channel/frame') sub._onFrame(params, text.length);
        else if (m.method === 'channel/credit') sub._onCredit(params);
        else if (m.method === 'channel/window') sub._onWindow(params);
        else sub._onReset(params);
        return;
      }
      case 'channels/changed':
        // After watchChannels: channels/list would answer differently.
        this._emit('channelsChanged');
        return;
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
 *           setTimeout?, clearTimeout?, random?, diagnose?}
 * diagnose: async () => refusal|null, asked when a WebSocket closes before
 *           it opened (the browser reports a refused upgrade as 1006, like
 *           a daemon that is down): a refusal (diagnoseRefusal's answer)
 *           stops the client, since retrying cannot fix it.
 * credentials: {token(): string|null, accepted(initializeResult), rejected(err)}
 *
 * Events (client.on):
 *   'state' {state, attempt, retryInMs, closeCode, closeReason, error, lastClose}
 *           state ∈ 'connecting' | 'connected' | 'reconnecting' | 'closed';
 *           lastClose {code, reason}: how the host closed the last session
 *           that was up (closeCode/closeReason are the latest attempt's);
 *           error ∈ 'no-credential' | 'unauthorized' | 'ended' (a 1008
 *           close, then refused) | 'restarted' (a 1001 close, then refused)
 *           | 'refused' (the daemon refuses this page's Host or Origin:
 *           refusal is diagnose's answer);
 *           connected states carry restarted: true after a 1001 close.
 *   'session' the new Session after initialize
 */
export class Client extends Emitter {
  constructor(options) {
    super();
    this.options = options;
    this.session = null;
    this.state = { state: 'idle', attempt: 0 };
    this._attachments = new Set();
    this._policyClose = null; // the reason of a 1008 close, until the next session
    this._lastClose = null; // {code, reason} of the last session's close, until the next one
    this._serverStarted = null; // initialize's server.started of the last session, if the daemon sent it
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
        const kind = this.options.credentials.kind?.() ?? null;
        this.options.credentials.rejected(err);
        this._stopped = true;
        const ended = this._policyClose;
        const last = this._lastClose ?? null;
        this._policyClose = null;
        if (ended != null) {
          // The host closed the session with 1008 (a kick, a revoked or
          // expired token) and refuses the reconnect token since: show
          // the host's reason, not the refusal.
          return this._setState({ state: 'closed', attempt, error: 'ended', closeCode: 1008, closeReason: ended, lastClose: last });
        }
        if (last?.code === 1001) {
          // The daemon shut down (1001) and the one answering now does not
          // know this page's credential: it restarted with another state
          // directory (tokens are kept in the state directory), or the
          // credential expired or was revoked meanwhile; its terminals
          // (SIGHUP at shutdown, §9) ended with it.
          return this._setState({ state: 'closed', attempt, error: 'restarted', credential: kind, refusal: err.message, lastClose: last });
        }
        return this._setState({ state: 'closed', attempt, error: 'unauthorized', credential: kind, closeReason: err.message, lastClose: last });
      }
      if (err instanceof ClosedError && !err.opened && this.options.diagnose) {
        // The upgrade failed: a refusal of this page's Host or Origin is
        // final (the daemon's settings must change), anything else is
        // retried.
        const refusal = await this.options.diagnose().catch(() => null);
        if (this._stopped) return;
        if (refusal) {
          this._stopped = true;
          return this._setState({
            state: 'closed', attempt, error: 'refused', refusal,
            closeCode: refusal.status, closeReason: `${refusal.refused} not allowed (${refusal.setting})`,
            lastClose: this._lastClose ?? null,
          });
        }
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
    // A daemon that started since the last session (initialize's
    // server.started differs: a stop and start, or a crash, which sends no
    // close) has new channels, whatever their names. A daemon that does
    // not send server.started is taken to have restarted after a 1001
    // (sent only at shutdown, §9).
    const started = session.initializeResult?.server?.started ?? null;
    const restarted = started != null && this._serverStarted != null
      ? started !== this._serverStarted
      : this._lastClose?.code === 1001;
    if (started != null) this._serverStarted = started;
    this._lastClose = null;
    session.on('close', (info) => {
      // Subscriptions ended with the session (their onEnd ran); the next
      // session re-subscribes every attachment.
      if (this.session === session) this.session = null;
      // A 1008 may be transient (an output stall): reconnect once; if the
      // credential is then refused, the 1008's reason is what ended it.
      this._policyClose = info.code === 1008 ? info.reason : null;
      // The close the host sent is kept apart from the failures of the
      // reconnect attempts after it (a refused TCP connection is 1006), so
      // the page can say why the connection ended.
      this._lastClose = { code: info.code, reason: info.reason || '' };
      if (!this._stopped) this._retry(1, new ClosedError(info.code, info.reason));
    });
    this._setState({ state: 'connected', attempt: 0, role: session.role, restarted });
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
      // lastClose: the close the host sent on the last established session
      // (null if none); closeCode/closeReason: this attempt's failure.
      lastClose: this._lastClose ?? null,
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
