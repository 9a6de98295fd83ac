// credentials.js — where the page's token comes from (no DOM dependency:
// location, history and storage are passed in).
//
// The daemon prints http://HOST/#ticket=TICKET. The fragment never reaches
// the server as part of the URL; the page takes the ticket (or a #token=),
// removes it from the address bar and sends it as initialize's token. A
// ticket is single-use: the initialize result's reconnectToken (same rights)
// is kept in sessionStorage for reconnects and reloads of this tab.

export const STORAGE_KEY = 'ahpd.reconnectToken';

/** parseFragment parses "#a=1&b=2" into a Map, without turning '+' into ' '. */
export function parseFragment(hash) {
  const out = new Map();
  const s = (hash || '').replace(/^#/, '');
  if (!s) return out;
  for (const part of s.split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    const k = eq < 0 ? part : part.slice(0, eq);
    const v = eq < 0 ? '' : part.slice(eq + 1);
    try {
      out.set(decodeURIComponent(k), decodeURIComponent(v));
    } catch {
      out.set(k, v);
    }
  }
  return out;
}

/** formatFragment is parseFragment's inverse ("" for an empty map). */
export function formatFragment(map) {
  const parts = [];
  // ':' and '/' are legal in a fragment; keep channel URIs readable.
  const enc = (s) => encodeURIComponent(s).replace(/%3A/gi, ':').replace(/%2F/gi, '/');
  for (const [k, v] of map) parts.push(v === '' ? enc(k) : `${enc(k)}=${enc(v)}`);
  return parts.length ? '#' + parts.join('&') : '';
}

/**
 * CredentialStore yields the token for the next initialize.
 * Order: a ticket or token from the fragment (fresh link wins), then the
 * reconnect token kept in sessionStorage.
 */
export class CredentialStore {
  /** storage: a Storage-like {getItem,setItem,removeItem}, or null. */
  constructor(storage) {
    this.storage = storage;
    this._fresh = null; // {token, kind: 'ticket'|'token'} not yet accepted
  }

  /**
   * takeFromLocation reads #ticket= / #token= from location.hash, removes
   * them from the address bar with history.replaceState (keeping other
   * parameters such as channel) and returns the remaining fragment map.
   */
  takeFromLocation(location, history) {
    const frag = parseFragment(location.hash);
    let found = false;
    for (const kind of ['ticket', 'token']) {
      const v = frag.get(kind);
      if (frag.has(kind)) {
        frag.delete(kind);
        found = true;
        if (v) this._fresh = { token: v, kind };
      }
    }
    if (found && history) {
      const url = location.pathname + location.search + formatFragment(frag);
      history.replaceState(history.state ?? null, '', url);
    }
    return frag;
  }

  /** token returns the credential to send, or null if there is none. */
  token() {
    if (this._fresh) return this._fresh.token;
    return this._get();
  }

  /** kind returns 'ticket', 'token', 'reconnect' or null. */
  kind() {
    if (this._fresh) return this._fresh.kind;
    return this._get() ? 'reconnect' : null;
  }

  /**
   * accepted records a successful initialize: keep its reconnectToken; a
   * plain #token= without one is kept instead (it is reusable); a used
   * ticket is forgotten either way.
   */
  accepted(result) {
    const fresh = this._fresh;
    this._fresh = null;
    if (typeof result?.reconnectToken === 'string' && result.reconnectToken) {
      this._set(result.reconnectToken);
    } else if (fresh?.kind === 'token') {
      this._set(fresh.token);
    } else if (fresh?.kind === 'ticket') {
      this._remove();
    }
  }

  /** rejected forgets the credential the host refused. */
  rejected() {
    if (this._fresh) this._fresh = null;
    else this._remove();
  }

  _get() {
    try {
      return this.storage?.getItem(STORAGE_KEY) || null;
    } catch {
      return null;
    }
  }
  _set(v) {
    try {
      this.storage?.setItem(STORAGE_KEY, v);
    } catch {
      // Storage disabled: reconnects within this page still work from memory.
      this._fresh = { token: v, kind: 'token' };
    }
  }
  _remove() {
    try {
      this.storage?.removeItem(STORAGE_KEY);
    } catch {
      // nothing stored
    }
  }
}
