// rtt.js — the connection's round trip, measured with AHP/1 `ping` requests
// (PROTOCOL.md §6, "Measuring the round trip"): the host answers {} on its
// control lane, ahead of frames, so the time to the answer is what a
// keystroke's echo sees, queues included. The page uses it to decide when
// to predict echo (predict.js) and to size its receive windows.
//
// DOM-free: the clock and timers are injected, so node tests drive it with
// a fake session and a fake clock.
//
// Rules:
//   - at most one ping outstanding; the next is scheduled when its answer
//     came (or it failed);
//   - one every IDLE_INTERVAL_MS (2 s) while nobody asks for more, and every
//     max(srtt, BUSY_MIN_INTERVAL_MS) while someone does (busy(true): the
//     user is typing, a window is being sized);
//   - srtt is an EWMA with gain 1/4 (the first sample sets it); min is the
//     smallest sample of the last MIN_WINDOW_MS (a windowed minimum, as
//     BBR's min_rtt filter), kept in a deque bounded by MIN_SAMPLES_MAX;
//   - it stops when the session closes, when stop() is called, and when the
//     host answers ping with an error (an older host: METHOD_NOT_FOUND).
//
// A host that takes ping says capabilities.windowUpdates: true in its
// initialize result; createRttMeter returns null for one that does not.

export const IDLE_INTERVAL_MS = 2000;
export const BUSY_MIN_INTERVAL_MS = 50;
export const SRTT_GAIN = 1 / 4;
export const MIN_WINDOW_MS = 10000;
export const MIN_SAMPLES_MAX = 256;

/** takesPing reports whether the session's host answers ping (capabilities.windowUpdates). */
export function takesPing(session) {
  return session?.initializeResult?.capabilities?.windowUpdates === true;
}

/**
 * createRttMeter starts a meter on session, or returns null when its host
 * does not take ping. options as for RttMeter.
 */
export function createRttMeter(session, options = {}) {
  if (!takesPing(session)) return null;
  const m = new RttMeter(session, options);
  m.start();
  return m;
}

/**
 * RttMeter measures session's round trip. session: {request(method,
 * params) → Promise, on(event, fn) → off, closed}. options: {now() ms
 * (performance.now), setTimeout, clearTimeout, idleMs, busyMinMs,
 * minWindowMs}.
 *
 * Fields (read-only for users): srtt, min, latest (ms, null before the
 * first sample), samples (count), stopped.
 */
export class RttMeter {
  constructor(session, options = {}) {
    this.session = session;
    this._now = options.now ?? (() => globalThis.performance.now());
    this._setTimeout = options.setTimeout ?? ((f, ms) => setTimeout(f, ms));
    this._clearTimeout = options.clearTimeout ?? ((t) => clearTimeout(t));
    this.idleMs = options.idleMs ?? IDLE_INTERVAL_MS;
    this.busyMinMs = options.busyMinMs ?? BUSY_MIN_INTERVAL_MS;
    this.minWindowMs = options.minWindowMs ?? MIN_WINDOW_MS;
    this.srtt = null;
    this.min = null;
    this.latest = null;
    this.samples = 0;
    this.stopped = false;
    this._busy = new Set(); // who asked for frequent samples
    this._listeners = new Set();
    this._timer = null;
    this._due = 0; // when the timer fires
    this._sentAt = null; // when the outstanding ping went out, or null
    this._lastSentAt = -Infinity;
    this._mins = []; // [t, rtt], rtt increasing: the windowed minimum's deque
    this._offClose = null;
  }

  /** start sends the first ping now and follows the session's close. */
  start() {
    if (this.stopped || this._offClose) return;
    this._offClose = this.session.on?.('close', () => this.stop()) ?? (() => {});
    if (this.session.closed) return this.stop();
    this._ping();
  }

  /** stop ends the measuring; listeners hear nothing more. */
  stop() {
    if (this.stopped) return;
    this.stopped = true;
    if (this._timer !== null) this._clearTimeout(this._timer);
    this._timer = null;
    this._offClose?.();
    this._listeners.clear();
  }

  /**
   * busy asks for frequent samples (on) or says that who no longer needs
   * them. Several users may ask at once; the meter is busy while any is.
   */
  busy(on, who = 'default') {
    if (on) this._busy.add(who);
    else this._busy.delete(who);
    if (this.stopped || this._sentAt !== null || (!on && this._timer === null)) return;
    // Busy: bring the next ping forward if it is further away than a busy
    // interval. Idle again: put it back to an idle interval.
    const at = Math.max(this._now(), this._lastSentAt + this._interval());
    if (this._timer === null || at < this._due || !this.isBusy) this._schedule(at - this._now());
  }

  get isBusy() {
    return this._busy.size > 0;
  }

  /** onSample registers cb({rtt, srtt, min}) for each sample; it returns a function that removes it. */
  onSample(cb) {
    this._listeners.add(cb);
    return () => this._listeners.delete(cb);
  }

  _interval() {
    return this.isBusy ? Math.max(this.srtt ?? 0, this.busyMinMs) : this.idleMs;
  }

  _schedule(delay) {
    if (this._timer !== null) this._clearTimeout(this._timer);
    this._due = this._now() + Math.max(0, delay);
    this._timer = this._setTimeout(() => {
      this._timer = null;
      this._ping();
    }, Math.max(0, delay));
  }

  _ping() {
    if (this.stopped || this._sentAt !== null) return;
    const t0 = this._now();
    this._sentAt = t0;
    this._lastSentAt = t0;
    let p;
    try {
      p = this.session.request('ping', {});
    } catch {
      return this.stop();
    }
    p.then(
      () => {
        this._sentAt = null;
        if (this.stopped) return;
        this._sample(this._now() - t0);
        this._schedule(this._lastSentAt + this._interval() - this._now());
      },
      () => {
        // Closed (the close event stops us too) or refused: an older host
        // without ping; measuring is over either way.
        this._sentAt = null;
        this.stop();
      },
    );
  }

  _sample(rtt) {
    const t = this._now();
    this.latest = rtt;
    this.samples++;
    this.srtt = this.srtt === null ? rtt : this.srtt + SRTT_GAIN * (rtt - this.srtt);
    const q = this._mins;
    while (q.length > 0 && q[q.length - 1][1] >= rtt) q.pop();
    q.push([t, rtt]);
    while (q.length > 1 && (q[0][0] < t - this.minWindowMs || q.length > MIN_SAMPLES_MAX)) q.shift();
    this.min = q[0][1];
    const s = { rtt, srtt: this.srtt, min: this.min };
    for (const cb of [...this._listeners]) {
      try {
        cb(s);
      } catch (err) {
        console.error('ahpd rtt listener:', err);
      }
    }
  }
}
