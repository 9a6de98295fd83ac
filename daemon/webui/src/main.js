// main.js — the ahpd web page wiring: the channel list in the sidebar,
// switching the one attached channel, the status line, notices and the
// test hook. The protocol is session.js (over wire.js); what is shown of a
// channel is its view (terminal.js, telemetry.js). A terminal's process
// telemetry, when a channel for it is listed, is drawn in the status line
// (process-status.js); beside a terminal, the charts panel shows a telemetry
// channel (chart-panel.js: the daemon's own figures first).

// terminal.js brings xterm.css and telemetry.js uPlot's CSS: imported first
// so style.css comes after them.
import { createView as createTerminalView, kind as terminalKind } from './terminal.js';
import { createView as createTelemetryView, kind as telemetryKind, TELEMETRY_RECEIVE } from './telemetry.js';
import { createRecordingsView } from './recordings.js';
import { createProcessStatus, findProcessChannel } from './process-status.js';
import { PANEL_CHART_HEIGHT, PANEL_Y_SPACE, panelChannel, panelPlacement, panelShown } from './chart-panel.js';
import './style.css';

import { checkURL, Client, diagnoseRefusal, ErrorCode, websocketURL } from './session.js';
import { receiveFromQuery } from './wire.js';
import { CredentialStore, formatFragment, parseFragment } from './credentials.js';
import { clippedText, PREDICT_MODES, Prefs, sizeText } from './prefs.js';
import { channelLabel, closeText, documentTitle } from './page-text.js';

const VERSION = '0.1.0';
const LATENCY_INTERVAL_MS = 5000;
// The receive limits a terminal subscription asks for: wire.js's defaults,
// or ?window=, ?frame=, ?message= in the page URL (benchmarks, experiments).
const TERMINAL_RECEIVE = receiveFromQuery(new URLSearchParams(location.search));

const $ = (id) => document.getElementById(id);
const el = {
  channels: $('channels'),
  notice: $('notice'),
  terminal: $('terminal'),
  telemetry: $('telemetry'),
  views: $('views'),
  panel: $('chart-panel'),
  panelBody: $('chart-panel-body'),
  panelOpen: $('chart-panel-open'),
  panelClose: $('chart-panel-close'),
  chartsToggle: $('charts-toggle'),
  status: $('status'),
  connection: $('status-connection'),
  channel: $('status-channel'),
  viewOnly: $('status-view-only'),
  role: $('status-role'),
  size: $('status-size'),
  latency: $('status-latency'),
  stage: $('stage'),
  banner: $('banner'),
  toast: $('toast'),
  clipped: $('status-clipped'),
  theme: $('theme-toggle'),
  closeChannel: $('close-channel'),
  sidebarToggle: $('sidebar-toggle'),
  newTerminal: $('new-terminal'),
  recordings: $('recordings'),
  recordingsToggle: $('recordings-toggle'),
};

// ui is the page state; render() draws it and window.ahpTest exposes it.
const ui = {
  connection: 'connecting', // connecting | connected | reconnecting | closed
  attempt: 0,
  retryAt: 0,
  closeCode: null, // how the host closed the last session that was up
  closeReason: '',
  attemptCode: null, // how the latest reconnect attempt failed (1006: unreachable)
  everConnected: false,
  restarted: false, // the last reconnect reached a daemon that restarted (after a 1001)
  credential: null, // kind of the credential the host refused
  error: null,
  refusal: null, // {refused: host|origin, status, setting, fix, host, origin}: why the daemon refuses this page
  role: null,
  channels: [],
  channel: null, // selected channel URI
  view: null, // kind of the view shown: terminal | telemetry
  subscriptionId: null,
  ready: false, // channel/ready of the current subscription applied
  rows: 0,
  cols: 0,
  latencyMs: null,
  exit: null,
  ended: null, // {code, message} of the last subscription end
  liveTitle: null, // the attached terminal's title as xterm saw it set (OSC 0/2)
  clipped: null, // {rows, cols, fitRows, fitCols} when the terminal exceeds the viewport
  sidebarOpen: false, // on narrow screens the sidebar is a drawer
  // The charts panel beside a terminal (chart-panel.js): the channel it
  // shows (null: none listed), where it goes and whether it is on screen.
  panel: { channel: null, placement: 'none', size: 0, shown: false },
};

// Saved preferences: terminal font size and theme (localStorage).
const prefs = new Prefs(safeStorage('localStorage'));
document.documentElement.dataset.theme = prefs.theme;

// ---- the views ------------------------------------------------------------

// The view of the attached channel fills the stage: the terminal view (made
// at once, for its test hooks) or the telemetry view (made when first
// shown); the other one's container is hidden. A view sends only on the
// subscription it is given and reports what the page shows.
const view = createTerminalView(el.terminal, {
  onSize(rows, cols) {
    ui.rows = rows;
    ui.cols = cols;
    render();
  },
  onReady() {
    ui.ready = true;
    render();
  },
  onExit({ code, signal }) {
    ui.exit = { code, signal };
    showExitNotice();
    // The list shows it at once, not at the next channels/list.
    setChannelState(ui.channel, 'exited');
    render();
  },
  onForbidden() {
    applyRole('view');
  },
  onTitle(title) {
    ui.liveTitle = title;
    renderChannels();
    render();
  },
  onClipped(c) {
    ui.clipped = c;
    render();
  },
  onViewOnlyTyping() {
    toast('view only: typing is disabled', 'view-only-hint');
  },
  onNotSent() {
    if (ui.connection !== 'connected') toast('not connected: keys typed now are not sent', 'not-sent');
  },
  onCopy({ ok, chars, error }) {
    if (ok) toast(`copied ${chars} character${chars === 1 ? '' : 's'}`, 'copied');
    else toast(`copy failed: ${error}`, 'copy-failed');
  },
  onFontSize(n) {
    prefs.set({ fontSize: n });
    view.setFontSize(prefs.fontSize);
    toast(`font size ${prefs.fontSize}`, 'font-size');
  },
}, {
  fontSize: prefs.fontSize,
  theme: prefs.theme,
  // WebGL on a GPU, the DOM renderer on a software rasterizer;
  // ?renderer=dom turns WebGL off (a GPU that draws badly), ?renderer=webgl
  // uses it even on a software rasterizer.
  renderer: new URLSearchParams(location.search).get('renderer') ?? 'auto',
  predict: prefs.predict,
});
// The terminal has the keyboard from the start: keys typed while the page
// connects are sent once it is attached.
view.attaching();
view.focus();

// The recordings of the attached terminal (recordings.js), over the stage:
// its list, and a player in its own xterm.js terminal.
const recordingsView = createRecordingsView(el.recordings, {
  fontSize: prefs.fontSize,
  theme: prefs.theme,
  onClose() {
    render();
    focusView();
  },
});
el.recordingsToggle.replaceChildren('◉', long(' recordings'));
el.recordingsToggle.addEventListener('click', () => {
  if (recordingsView.shown) recordingsView.hide();
  else if (currentSession && ui.channel) {
    ui.sidebarOpen = false;
    // The session of the moment: after a reconnect, the new one.
    recordingsView.open(() => client.session, ui.channel);
  }
  render();
});

function showExitNotice() {
  const { code, signal } = ui.exit;
  const text = `The process exited${signal ? ` (signal ${signal})` : code != null ? ` with code ${code}` : ''}. ` +
    'The terminal is read-only now; pick a channel to attach another.';
  const channel = ui.channel;
  const parts = [text];
  if (ui.role === 'control' && currentSession) {
    // channels/restart and channels/close need role control over it.
    parts.push(' ', actionButton('Restart', 'restart', () => manage(channel, 'restart')),
      ' ', actionButton('Close', 'close', () => manage(channel, 'close')));
  }
  showNotice(parts);
  el.notice.dataset.testid = 'exit-notice';
}

function actionButton(label, testid, onClick) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'action';
  b.dataset.testid = testid;
  b.textContent = label;
  b.addEventListener('click', onClick);
  return b;
}

// manage restarts (a new run under the same URI, attached at once) or
// closes the channel.
async function manage(channel, what) {
  const session = currentSession;
  if (!session) return;
  try {
    if (what === 'restart') {
      await session.restartChannel(channel);
      if (attachment?.channel === channel) {
        attachment.detach();
        attachment = null;
      }
      await refreshChannels(session);
      attach(channel);
    } else {
      await session.closeChannel(channel);
      hideNotice();
      await refreshChannels(session);
    }
  } catch (err) {
    toast(`${what} failed: ${err.message ?? err}`, 'manage-failed');
  }
}

async function newTerminal() {
  const session = currentSession;
  if (!session) return;
  try {
    const channel = await session.createTerminal();
    await refreshChannels(session);
    if (channel) attach(channel);
  } catch (err) {
    toast(`new terminal failed: ${err.message ?? err}`, 'manage-failed');
  }
}
el.newTerminal.addEventListener('click', newTerminal);

// The status line's close asks once more before it hangs up a program.
let closeArmed = null; // {channel, timer} after the first click
el.closeChannel.addEventListener('mousedown', (ev) => ev.preventDefault());
el.closeChannel.addEventListener('click', () => {
  const channel = ui.channel;
  if (closeArmed?.channel === channel) {
    clearTimeout(closeArmed.timer);
    closeArmed = null;
    el.closeChannel.textContent = 'close';
    manage(channel, 'close');
    return;
  }
  if (closeArmed) clearTimeout(closeArmed.timer);
  el.closeChannel.textContent = `close ${channel}? click again`;
  closeArmed = {
    channel,
    timer: setTimeout(() => {
      closeArmed = null;
      el.closeChannel.textContent = 'close';
    }, 3000),
  };
});
el.newTerminal.addEventListener('mousedown', (ev) => ev.preventDefault());

// setChannelState updates one channel's state in the list before the next poll.
function setChannelState(channel, state) {
  const c = ui.channels.find((x) => x.channel === channel);
  if (!c || c.state === state || (c.state === 'closed' && state === 'exited')) return;
  c.state = state;
  renderChannels();
}
let telemetryView = null;

// kindOf returns the channel's type: from channels/list, else its URI scheme.
function kindOf(channel) {
  const c = ui.channels.find((x) => x.channel === channel);
  if (c) return c.type;
  const m = /^ahp-([a-z]+):/.exec(channel ?? '');
  return m ? m[1] : null;
}

const shown = (type) => type === terminalKind || type === telemetryKind;

function viewFor(type) {
  if (type !== telemetryKind) return view;
  if (!telemetryView) {
    telemetryView = createTelemetryView(el.telemetry, {
      onReady() {
        ui.ready = true;
        render();
      },
    });
    telemetryView.setRole(ui.role);
  }
  return telemetryView;
}

// The status line's CPU/RSS sparkline of the attached terminal's processes.
const proc = createProcessStatus();
el.channel.after(proc.el);
let procAttachment = null;

// syncProcessStatus subscribes to the process channel of the attached
// terminal (title `processes of URI`), or ends that subscription.
function syncProcessStatus() {
  const c = ui.view === terminalKind && ui.channel ? findProcessChannel(ui.channels, ui.channel) : null;
  if (procAttachment && procAttachment.channel === c?.channel) return;
  if (procAttachment) {
    procAttachment.detach();
    procAttachment = null;
    proc.stop();
  }
  if (!c) return;
  proc.start(c.channel);
  // Telemetry's small window suffices for any rate (telemetry-stream.js):
  // it is not tuned to the path.
  procAttachment = client.attach(c.channel, proc.consumer, { receive: TELEMETRY_RECEIVE, autoWindow: false });
}

// ---- the charts panel beside the terminal ------------------------------------

// A terminal shows, without a click, the charts of a telemetry channel
// beside it (chart-panel.js picks it: the daemon's own figures first): on
// the right of a wide stage, under the terminal on a narrow one, not at all
// on one too small for both. The terminal's container shrinks to make room
// and the terminal view fits to it as to any viewport change (its resize
// requests follow). Closing it is saved with the preferences; the status
// line's "charts" opens it again.
let panelView = null;
let panelAttachment = null;
const panelRefused = new Set(); // listed channels the panel could not subscribe to

// panelConsumer is the consumer of one panel subscription: what arrives
// after it was replaced or the panel closed is released unread.
function panelConsumer() {
  let mine = null;
  const live = () => panelView && panelAttachment === mine;
  return {
    set attachment(a) {
      mine = a;
    },
    onSubscribed(sub, session) {
      if (live()) panelView.onSubscribed(sub, session);
    },
    onMessage(msg, release, sub) {
      if (live()) panelView.onMessage(msg, release, sub);
      else release();
    },
    onEnd(info, sub) {
      if (live()) panelView.onEnd(info, sub);
    },
    onSubscribeError(err) {
      if (!live()) return;
      // Not for this link (FORBIDDEN), or gone: not tried again while it
      // is listed (refreshChannels forgets a channel no longer listed).
      panelRefused.add(mine.channel);
      mine.detach();
      panelAttachment = null;
      syncPanel();
    },
  };
}

// measurePanel places the panel for the stage's size.
function measurePanel() {
  const r = el.views.getBoundingClientRect();
  const p = panelPlacement(r.width, r.height);
  ui.panel.placement = p.placement;
  ui.panel.size = p.size;
}

// syncPanel shows, moves or hides the panel and subscribes to its channel
// or ends that subscription.
function syncPanel() {
  const c = panelChannel(ui.channels.filter((x) => !panelRefused.has(x.channel)), ui.panel.channel);
  ui.panel.channel = c?.channel ?? null;
  measurePanel();
  const shown = panelShown({ view: ui.view, channel: ui.panel.channel, open: prefs.charts === 'open', placement: ui.panel.placement });
  ui.panel.shown = shown;
  el.views.dataset.panel = shown ? ui.panel.placement : 'none';
  el.panel.hidden = !shown;
  el.chartsToggle.hidden = !(ui.view === terminalKind && ui.panel.channel && ui.panel.placement !== 'none');
  el.chartsToggle.setAttribute('aria-pressed', String(shown));
  if (!shown) {
    if (panelAttachment) {
      panelAttachment.detach();
      panelAttachment = null;
    }
    // Gone, not hidden: its charts cost nothing and its elements do not
    // stand beside the telemetry view's.
    panelView?.dispose();
    panelView = null;
    return;
  }
  el.views.style.setProperty('--panel-size', `${ui.panel.size}px`);
  const height = PANEL_CHART_HEIGHT[ui.panel.placement];
  if (!panelView) {
    panelView = createTelemetryView(el.panelBody, {}, { chartHeight: height, ySpace: PANEL_Y_SPACE });
  } else panelView.setChartHeight(height);
  const label = channelLabel(c);
  el.panelOpen.textContent = label;
  el.panelOpen.title = `${label === c.channel ? label : `${label} (${c.channel})`}: open these charts in full`;
  panelView.setTitle(c.title);
  if (panelAttachment?.channel === c.channel) return;
  panelAttachment?.detach();
  panelView.clear();
  const consumer = panelConsumer();
  panelAttachment = client.attach(c.channel, consumer, { receive: TELEMETRY_RECEIVE, autoWindow: false });
  consumer.attachment = panelAttachment;
}

el.panelOpen.addEventListener('click', () => {
  if (ui.panel.channel) attach(ui.panel.channel);
});
el.panelClose.addEventListener('click', () => {
  prefs.set({ charts: 'closed' });
  syncPanel();
  render();
  focusView();
});
el.chartsToggle.replaceChildren('▤', long(' charts'));
el.chartsToggle.addEventListener('click', () => {
  prefs.set({ charts: prefs.charts === 'open' ? 'closed' : 'open' });
  syncPanel();
  render();
  focusView();
});
// The panel's buttons and charts never take the keyboard from the terminal.
for (const b of [el.panelOpen, el.panelClose, el.chartsToggle, el.panel]) {
  b.addEventListener('mousedown', (ev) => ev.preventDefault());
}
// A new stage size may move the panel (side, bottom, none).
new ResizeObserver(() => {
  const was = `${ui.panel.placement} ${ui.panel.size}`;
  measurePanel();
  if (`${ui.panel.placement} ${ui.panel.size}` !== was) {
    syncPanel();
    render();
  }
}).observe(el.views);

// ---- connection -----------------------------------------------------------

const credentials = new CredentialStore(safeStorage('sessionStorage'));
const fragment = credentials.takeFromLocation(window.location, window.history);
ui.channel = fragment.get('channel') || null;

const client = new Client({
  // Relative to the page: behind a proxy at /ahpd/ it is /ahpd/v1/ws.
  url: websocketURL(location.href),
  credentials,
  diagnose: () => diagnoseRefusal(checkURL(location.href)),
  clientVersion: VERSION,
});

let attachment = null;

// consumerFor wraps a view with the page's bookkeeping (Client.attach, session.js).
const consumerFor = (view) => ({
  onSubscribed(sub, session) {
    view.onSubscribed(sub, session);
    ui.subscriptionId = sub.id;
    ui.ready = false;
    ui.exit = null;
    ui.ended = null;
    ui.role = session.role;
    if (ui.restarted) {
      showNotice(`ahpd restarted: the terminal this tab showed ended with the old daemon; ${ui.channel} is a new channel of the daemon running now.`);
      el.notice.dataset.testid = 'restart-notice';
      ui.restarted = false;
    } else hideNotice();
    render();
    // The list fetched at connect predates this subscription: refresh it so
    // the viewer count includes this page.
    if (!pingSince) refreshChannels(session);
  },
  onMessage: view.onMessage,
  onEnd(info, sub) {
    view.onEnd(info, sub);
    ui.subscriptionId = null;
    ui.ready = false;
    if (info.code === 'channel-closed') setChannelState(ui.channel, 'closed');
    if (info.code === 'channel-closed' && ui.exit) {
      // The normal end after terminal/exit: the exit notice stays.
      ui.ended = { code: info.code, message: info.message };
      showExitNotice();
    } else if (info.code !== 'connection-closed' && info.code !== 'unsubscribed') {
      ui.ended = { code: info.code, message: info.message };
      showNotice(`Detached from ${ui.channel}: ${info.code}${info.message ? ' — ' + info.message : ''}. ` +
        'Select the channel to attach again.', true);
    }
    render();
  },
  onSubscribeError(err) {
    view.cancelAttach();
    const why = err.code === ErrorCode.CHANNEL_NOT_FOUND ? 'no such channel'
      : err.code === ErrorCode.FORBIDDEN ? 'this link does not grant access to it'
        : err.message;
    showNotice(`Cannot attach ${ui.channel}: ${why}.`, true);
  },
});

function attach(channel) {
  ui.sidebarOpen = false;
  if (recordingsView.shown && channel !== ui.channel) recordingsView.hide();
  if (attachment && attachment.channel === channel) {
    if (attachment.subscription) {
      focusView();
      return render();
    }
    attachment.detach();
  } else if (attachment) {
    attachment.detach();
  }
  const type = kindOf(channel);
  const v = viewFor(type);
  v.clear?.();
  if (ui.channel !== channel) ui.liveTitle = null;
  ui.channel = channel;
  ui.view = v.kind;
  ui.ended = null;
  ui.exit = null;
  ui.clipped = null;
  el.terminal.hidden = v !== view;
  el.telemetry.hidden = v === view;
  if (v === view) view.attaching();
  focusView();
  setFragmentChannel(channel);
  // The panel first: the terminal's first fit is then its final size.
  syncPanel();
  attachment = client.attach(channel, consumerFor(v), v.kind === telemetryKind
    ? { receive: TELEMETRY_RECEIVE, autoWindow: false }
    : { receive: TERMINAL_RECEIVE });
  syncProcessStatus();
  render();
}

// focusView gives the keyboard to the terminal (after a click in the list,
// the focus would otherwise stay on the list's button).
function focusView() {
  if (ui.view === terminalKind) view.focus();
  else {
    // The hidden terminal must not keep the keys.
    el.telemetry.tabIndex = -1;
    el.telemetry.focus({ preventScroll: true });
  }
}

function setFragmentChannel(channel) {
  const frag = parseFragment(location.hash);
  frag.set('channel', channel);
  history.replaceState(history.state ?? null, '', location.pathname + location.search + formatFragment(frag));
}

client.on('state', (s) => {
  ui.connection = s.state;
  ui.attempt = s.attempt ?? 0;
  ui.retryAt = s.retryAt ?? 0;
  if (s.state === 'connected') {
    ui.closeCode = null;
    ui.closeReason = '';
    ui.attemptCode = null;
    ui.error = null;
    ui.role = s.role;
    ui.everConnected = true;
    ui.restarted = !!s.restarted;
  } else if (s.lastClose) {
    // The close the daemon sent; the attempts after it fail otherwise
    // (1006 while nothing listens), which is shown apart.
    ui.closeCode = s.lastClose.code ?? null;
    ui.closeReason = s.lastClose.reason ?? '';
    ui.attemptCode = s.state === 'reconnecting' && s.attempt > 1 ? s.closeCode ?? null : null;
  } else if (s.closeCode !== undefined || s.closeReason) {
    ui.closeCode = s.closeCode ?? null;
    ui.closeReason = s.closeReason ?? '';
  }
  if (s.state !== 'connected') ui.latencyMs = null;
  if (s.error) ui.error = s.error;
  ui.credential = s.credential ?? null;
  ui.refusal = s.refusal ?? null;
  if (s.error === 'refused') showRefusal(s.refusal);
  if (s.error === 'no-credential') showAuthHelp('This page needs a link with a ticket.');
  if (s.error === 'unauthorized') {
    showAuthHelp(s.credential === 'reconnect'
      ? "This tab's saved credential was refused: the daemon has restarted since it was issued (its terminals ended with it), or it expired or was revoked."
      : 'The link was refused: it was already used or has expired.');
  }
  if (s.error === 'restarted') {
    showAuthHelp(`ahpd restarted: it shut down (${closeText(ui.closeCode, ui.closeReason)}), and the daemon running now ` +
      "does not accept this tab's credential (tickets and the tokens a daemon mints do not outlive it). " +
      'The terminal shown here ended with the old daemon; this is its last screen.');
    el.notice.dataset.reason = 'restarted';
  }
  render();
});

let currentSession = null;
// rttMeter is the session's round-trip meter (session.rtt, rtt.js: ping),
// which sizes its windows and decides predictive echo; null with a host
// that does not take ping.
let rttMeter = null;

client.on('session', async (session) => {
  currentSession = session;
  rttMeter = session.rtt;
  view.setRttMeter(rttMeter);
  el.newTerminal.hidden = !session.createsChannels;
  // The list follows the daemon's changes at once; the 5 s poll stays for
  // the viewer counts of other channels and the latency figure.
  session.on('channelsChanged', () => {
    if (!pingSince) refreshChannels(session);
  });
  session.watchChannels().catch(() => {}); // an older daemon: the poll alone
  applyRole(session.role);
  await refreshChannels(session);
  if (!attachment) {
    const first = ui.channels.find((c) => c.type === terminalKind) ?? ui.channels.find((c) => shown(c.type));
    const channel = ui.channel || first?.channel;
    if (channel) attach(channel);
    else showNotice(['No terminal to attach. Create one with ', code('ahpctl terminal create -- bash'), '.']);
  }
});

function applyRole(role) {
  ui.role = role;
  view.setRole(role);
  telemetryView?.setRole(role);
}

// pingSince is when the outstanding channels/list round trip started (0: none).
let pingSince = 0;

async function refreshChannels(session) {
  const t0 = performance.now();
  pingSince = t0;
  try {
    ui.channels = await session.listChannels();
    ui.latencyMs = Math.round(performance.now() - t0);
  } catch {
    return; // closed meanwhile; the state handler shows it
  } finally {
    pingSince = 0;
  }
  renderChannels();
  syncProcessStatus();
  for (const ch of panelRefused) if (!ui.channels.some((c) => c.channel === ch)) panelRefused.delete(ch);
  syncPanel();
  if (telemetryView && ui.view === telemetryKind) {
    telemetryView.setTitle(ui.channels.find((c) => c.channel === ui.channel)?.title);
  }
  render();
}

// Every 5 s: one channels/list round trip, which is both the latency
// measure and the liveness check. A host that has not answered for three
// intervals is treated as gone (the browser may not notice a dead TCP
// connection for minutes); closing the session starts the reconnect.
setInterval(() => {
  const session = client.session;
  if (!session || ui.connection !== 'connected') return;
  if (pingSince) {
    if (performance.now() - pingSince > 3 * LATENCY_INTERVAL_MS) {
      pingSince = 0;
      session.close(4000, 'host not responding');
    }
    return;
  }
  refreshChannels(session);
}, LATENCY_INTERVAL_MS);
// The reconnect countdown ticks once a second.
setInterval(() => {
  if (ui.connection === 'reconnecting') render();
}, 1000);

// ---- rendering ------------------------------------------------------------

function render() {
  el.status.dataset.state = ui.connection;
  renderBanner();
  renderTitle();
  // Clipped matters while this page could do something about it: not while
  // disconnected or after the program exited.
  el.clipped.hidden = !ui.clipped || ui.view !== terminalKind || ui.connection !== 'connected' || !!ui.exit;
  if (ui.clipped) {
    const t = clippedText(ui.clipped, ui.role === 'control');
    el.clipped.textContent = t.text;
    el.clipped.disabled = ui.role !== 'control';
    el.clipped.title = t.title;
  }
  // A narrow status line shows the buttons' glyphs only (style.css .long).
  const [glyph, word] = prefs.theme === 'dark' ? ['◐', ' dark'] : ['◑', ' light'];
  if (el.theme.textContent !== glyph + word) el.theme.replaceChildren(glyph, long(word));
  document.body.classList.toggle('sidebar-open', ui.sidebarOpen);
  el.sidebarToggle.setAttribute('aria-expanded', String(ui.sidebarOpen));
  let text;
  switch (ui.connection) {
    case 'connected':
      text = 'connected';
      break;
    case 'connecting':
      text = 'connecting…';
      break;
    case 'reconnecting': {
      const s = Math.max(0, Math.ceil((ui.retryAt - Date.now()) / 1000));
      text = ui.retryAt && s > 0 ? `reconnecting in ${s}s` : 'reconnecting…';
      if (ui.closeCode != null) text += ` (closed ${ui.closeCode}${ui.closeReason ? ': ' + ui.closeReason : ''})`;
      if (ui.attemptCode != null && ui.attemptCode !== ui.closeCode) text += ` · last try ${ui.attemptCode}`;
      break;
    }
    default:
      text = 'closed';
      if (ui.closeCode != null || ui.closeReason) {
        text += ` (${[ui.closeCode, ui.closeReason].filter((x) => x != null && x !== '').join(': ')})`;
      } else if (ui.error) text += ` (${ui.error})`;
  }
  el.connection.textContent = text;
  el.channel.textContent = ui.channel ? ui.channel + (ui.exit ? ' — exited' : ui.subscriptionId && !ui.ready ? ' — loading' : '') : '';
  el.channel.title = currentTitle() || '';
  el.role.textContent = ui.role ? `role ${ui.role}` : '';
  // Closing needs role control over the channel (this link's role).
  el.closeChannel.hidden = !(ui.role === 'control' && currentSession && ui.channel && ui.connection === 'connected');
  el.viewOnly.hidden = ui.role !== 'view';
  el.recordingsToggle.hidden = !(ui.view === terminalKind && currentSession && ui.channel && ui.connection === 'connected');
  el.recordingsToggle.setAttribute('aria-pressed', String(recordingsView.shown));
  el.size.textContent = ui.rows && ui.view === terminalKind ? sizeText(ui.rows, ui.cols) : '';
  // The round trip: the ping meter's smoothed figure (what sizes the
  // windows and decides predictive echo), else the channels/list poll's.
  const srtt = ui.connection === 'connected' ? rttMeter?.srtt : null;
  const latency = srtt != null ? Math.round(srtt) : ui.latencyMs;
  el.latency.textContent = latency != null ? `${latency} ms` : '';
  for (const li of el.channels.children) li.classList.toggle('active', li.dataset.channel === ui.channel);
}

function renderChannels() {
  const items = ui.channels.map((c) => {
    const li = document.createElement('li');
    li.dataset.testid = 'channel-item';
    li.dataset.channel = c.channel;
    li.dataset.type = c.type;
    li.className = `type-${c.type} state-${c.state}`;
    const b = document.createElement('button');
    b.type = 'button';
    b.disabled = !shown(c.type);
    b.title = shown(c.type) ? c.channel : `${c.channel} (${c.type} channels cannot be shown here yet)`;
    // The name whole: a long one loses its middle (…), not its end, and
    // shows in full on hover.
    const name = channelLabel(c.channel === ui.channel && ui.liveTitle ? { ...c, title: ui.liveTitle } : c);
    const title = document.createElement('span');
    title.className = 'title';
    title.dataset.testid = 'channel-name';
    const cut = name.length - Math.min(12, Math.floor(name.length / 2));
    const head = document.createElement('span');
    head.className = 'head';
    head.textContent = name.slice(0, cut);
    const tail = document.createElement('span');
    tail.className = 'tail';
    tail.textContent = name.slice(cut);
    title.append(head, tail);
    title.title = name === c.channel ? name : `${name} (${c.channel})`;
    const meta = document.createElement('span');
    meta.className = 'meta';
    meta.textContent = `${c.type} · ${c.state} · ${c.viewers} viewer${c.viewers === 1 ? '' : 's'}`;
    b.append(title, meta);
    b.addEventListener('click', () => attach(c.channel));
    // Keep the focus where it is (the terminal) on a mouse click.
    b.addEventListener('mousedown', (ev) => ev.preventDefault());
    li.append(b);
    return li;
  });
  if (items.length === 0) {
    const li = document.createElement('li');
    li.className = 'empty';
    li.textContent = 'no channels';
    items.push(li);
  }
  el.channels.replaceChildren(...items);
}

// showNotice shows text (a string, or an array of strings and nodes).
function showNotice(content, isError = false) {
  el.notice.hidden = false;
  el.notice.dataset.testid = 'notice';
  el.notice.classList.toggle('error', isError);
  delete el.notice.dataset.reason;
  el.notice.replaceChildren(...(Array.isArray(content) ? content : [content]));
}

function hideNotice() {
  el.notice.hidden = true;
  el.notice.textContent = '';
}

function showAuthHelp(why) {
  // The link's #channel= names the channel; without it, say how to find one.
  showNotice(ui.channel ? [
    `${why} On the machine running ahpd, run `,
    code(`ahpctl open ${ui.channel}`),
    ' and open the URL it prints.',
  ] : [
    `${why} On the machine running ahpd, run `,
    code('ahpctl open ahp-terminal:/ID'),
    ' (', code('ahpctl channels list'), ' shows the IDs) and open the URL it prints.',
  ], true);
  el.notice.dataset.testid = 'auth-help';
}

// showRefusal says why the daemon refuses this page (its Host or Origin)
// and which setting admits it; the page does not retry.
function showRefusal(r) {
  const what = r.refused === 'host' ? `Host ${r.host}` : `Origin ${r.origin}`;
  showNotice([
    strong(`ahpd refuses this page: its ${what} is not allowed`),
    ` (HTTP ${r.status}, setting `, code(r.setting), '). ',
    r.fix ? `To fix: ${r.fix.replace(/\.?$/, '.')} ` : '',
    'Then restart ahpd and reload this page. Not retrying: retrying cannot fix this.',
  ], true);
  el.notice.dataset.testid = 'refused';
  el.notice.dataset.reason = r.refused;
}

function code(text) {
  const c = document.createElement('code');
  c.textContent = text;
  return c;
}

function safeStorage(name) {
  try {
    return window[name];
  } catch {
    return null;
  }
}

// currentTitle is the attached channel's title: what the program set, as
// xterm saw it, else channels/list's.
function currentTitle() {
  if (!ui.channel) return '';
  if (ui.view === terminalKind && ui.liveTitle) return ui.liveTitle;
  return ui.channels.find((c) => c.channel === ui.channel)?.title || '';
}

function renderTitle() {
  const t = documentTitle(currentTitle(), ui.channel);
  if (document.title !== t) document.title = t;
}

// renderBanner: while the connection is down, the stale screen is dimmed
// and a banner says why and what happens next.
function renderBanner() {
  const down = ui.everConnected && ui.connection !== 'connected';
  el.stage.classList.toggle('disconnected', down);
  document.body.classList.toggle('disconnected', down); // the list is stale too
  el.banner.hidden = !down;
  if (!down) return;
  const why = ui.closeCode != null ? closeText(ui.closeCode, ui.closeReason) : 'the connection was lost';
  let next;
  if (ui.connection === 'reconnecting') {
    const s = Math.max(0, Math.ceil((ui.retryAt - Date.now()) / 1000));
    next = ui.retryAt && s > 0 ? `Reconnecting in ${s} s (attempt ${ui.attempt})…` : 'Reconnecting…';
    if (ui.attemptCode === 1006) next += ' The daemon is not reachable yet.';
  } else if (ui.error === 'refused') next = `Not reconnecting: ahpd refuses this page's ${ui.refusal?.refused === 'host' ? 'Host' : 'Origin'} (see ${ui.refusal?.setting}; the notice says what to set).`;
  else if (ui.error === 'restarted') next = 'ahpd restarted; this terminal is gone.';
  else if (ui.error === 'ended' || ui.error === 'unauthorized') next = 'Not reconnecting: the credential was refused.';
  else next = 'Not reconnecting.';
  el.banner.dataset.code = ui.closeCode ?? '';
  if (ui.closeCode === 1012 && ui.connection === 'reconnecting') {
    // An upgrade in place: the same terminals are back in a moment.
    el.banner.dataset.kind = 'upgrading';
    el.banner.replaceChildren(strong('Upgrading'), ' — ahpd is restarting itself in place; your terminals keep running. Reconnecting…');
    return;
  }
  el.banner.dataset.kind = '';
  el.banner.replaceChildren(strong('Disconnected'), ` — ${why}. ${next} The screen below is as it was when the connection ended.`);
}

// long is the part of a status-line button's text a narrow window leaves out.
function long(text) {
  const s = document.createElement('span');
  s.className = 'long';
  s.textContent = text;
  return s;
}

function strong(text) {
  const b = document.createElement('strong');
  b.textContent = text;
  return b;
}

// toast shows a short message for a moment (copy, font size, view-only keys).
let toastTimer = null;
function toast(text, kind) {
  el.toast.textContent = text;
  el.toast.dataset.kind = kind;
  el.toast.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => {
    el.toast.hidden = true;
  }, 2000);
}

el.clipped.addEventListener('click', () => {
  view.fitToWindow();
  view.focus();
});
el.clipped.addEventListener('mousedown', (ev) => ev.preventDefault());
el.theme.addEventListener('click', () => {
  prefs.set({ theme: prefs.theme === 'dark' ? 'light' : 'dark' });
  document.documentElement.dataset.theme = prefs.theme;
  view.setTheme(prefs.theme);
  recordingsView.setTheme(prefs.theme);
  // The charts take the theme's colours when drawn: a slow channel's
  // would keep the old grid until its next sample.
  telemetryView?.recolour();
  panelView?.recolour();
  render();
});
el.theme.addEventListener('mousedown', (ev) => ev.preventDefault());
// Predictive echo (predict.js): a status-line button cycles auto → always →
// never, saved with the other preferences. Made here, beside the theme
// button, with its look.
const predictToggle = document.createElement('button');
predictToggle.type = 'button';
predictToggle.className = 'theme-toggle';
predictToggle.dataset.testid = 'predict-toggle';
el.theme.before(predictToggle);
function renderPredict() {
  predictToggle.replaceChildren(long('echo '), prefs.predict); // textContent: "echo auto"
  predictToggle.title = 'Predictive echo (saved in this browser): auto shows typed keys at once while the round trip is ' +
    'over 30 ms, always does on any link, never waits for the host. Click to change.';
}
predictToggle.addEventListener('click', () => {
  const i = PREDICT_MODES.indexOf(prefs.predict);
  prefs.set({ predict: PREDICT_MODES[(i + 1) % PREDICT_MODES.length] });
  view.setPredict(prefs.predict);
  renderPredict();
  toast(`predictive echo: ${prefs.predict}`, 'predict');
});
predictToggle.addEventListener('mousedown', (ev) => ev.preventDefault());
renderPredict();
// Escape closes the drawer (narrow screens) and gives the keys back to the view.
document.addEventListener('keydown', (ev) => {
  if (ev.key !== 'Escape' || !ui.sidebarOpen) return;
  ui.sidebarOpen = false;
  render();
  focusView();
});
el.sidebarToggle.addEventListener('click', () => {
  ui.sidebarOpen = !ui.sidebarOpen;
  render();
});

// ---- test hook ------------------------------------------------------------

window.ahpTest = {
  /** state returns a copy of the page state plus the current flow counters. */
  state() {
    const sub = attachment?.subscription;
    return {
      ...ui,
      channels: ui.channels.map((c) => ({ ...c })),
      termRows: view.term.rows,
      termCols: view.term.cols,
      title: currentTitle(),
      documentTitle: document.title,
      terminal: view.state(),
      rtt: rttMeter ? { srtt: rttMeter.srtt, min: rttMeter.min, latest: rttMeter.latest, samples: rttMeter.samples } : null,
      activeElement: document.activeElement?.className || document.activeElement?.tagName,
      receive: sub ? sub.receiveState() : null,
      receiveLimits: sub ? { ...sub.receive } : null, // what the host granted
      receiveStats: sub ? { ...sub.stats } : null,
      send: sub ? sub.sendState() : null,
      telemetry: ui.view === telemetryKind ? telemetryView?.state() ?? null : null,
      panel: { ...ui.panel, open: prefs.charts === 'open', telemetry: panelView?.state() ?? null },
      process: proc.channel ? {
        ...proc.state(),
        receive: procAttachment?.subscription?.receiveState() ?? null,
      } : null,
    };
  },
  /** screenText returns the visible lines of the terminal, right-trimmed. */
  screenText: () => view.screenText(),
  /** receiveWindow is the terminal subscription's window in force (bytes, as tuned), or null: cheap to poll. */
  receiveWindow: () => attachment?.subscription?.window ?? null,
  attach,
  client,
  term: view.term,
  view,
  /** the telemetry view (state(), stream.pause()/resume()), once shown. */
  get telemetry() {
    return telemetryView;
  },
  /** the recordings view: state(), screenText() and flush() of its player, open(session, channel). */
  recordings: recordingsView,
  /** the charts panel's telemetry view (state(), layout()) while it is shown. */
  get panel() {
    return panelView;
  },
};

render();
client.start();
