// telemetry.js — the telemetry view: live uPlot line charts for `telemetry`
// channels (PROTOCOL.md §8). It follows the view interface at the top of
// session.js (kind, createView; the view is a Client.attach consumer plus
// setRole and dispose), beside terminal.js.
//
//   - one chart per metric name (at most DEFAULT_MAX_CHARTS), one line per
//     series (name + labels): the top DEFAULT_TOP_N by recent value, and a
//     "+K more" that expands to EXPANDED_LINES; a legend under the chart
//     with each series' last value, or the value under the pointer;
//   - each chart keeps a fixed ring of rows (telemetry-store.js), so memory
//     is flat however long the page runs and however fast the source;
//   - axes sized to their labels (measured in the axes' font), one unit per
//     y axis with the decimals its ticks need (format.js), time ticks
//     spaced by the width of their label so they never overlap;
//   - telemetry/dropped is a gap: a null row (uPlot breaks the lines) and a
//     shaded band over the lost time span, and the header counts the
//     samples lost; a pause of the source breaks the lines too (no band);
//     a point with no line on either side (a single sample) is a dot;
//   - the header's rate counts live samples, not the history replay;
//   - messages are applied once per animation frame and released after the
//     frame that drew them (telemetry-stream.js): credit follows drawing.
//
// Telemetry channels take no client messages, so the role changes nothing.

import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

import { DEFAULT_TOP_N, TelemetryModel } from './telemetry-store.js';
import { TELEMETRY_RECEIVE, telemetryConsumer } from './telemetry-stream.js';

export { TELEMETRY_RECEIVE };
import { axisIncrements, axisLabels, number, TIME_INCRS, timeLabels, timeStep, unitFor, valueFormatter } from './format.js';

/** kind is the channels/list type this view shows. */
export const kind = 'telemetry';

/** Lines a chart draws when its "+K more" is expanded (the legend lists them). */
export const EXPANDED_LINES = 64;
/** A chart redraws at most this often (ms); see draw(). */
export const REDRAW_MS = 100;
/** How often the shown series are re-ranked (ms): lines do not flicker in and out. */
const RERANK_MS = 2000;

const PALETTE = ['#5fb3f9', '#4ec27a', '#e0b04a', '#c792ea', '#ef6b6b', '#56d4dd', '#f78c6c', '#a9b665',
  '#7aa2f7', '#e06c9f', '#9ece6a', '#d19a66'];
const CHART_HEIGHT = 210;
const FONT_PX = 11;
/** The least distance between two y ticks (px) in the telemetry view. */
export const Y_SPACE = FONT_PX * 2.5;
const AXIS_FONT = `${FONT_PX}px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace`;
const TICK = 4; // tick length (px)
const AXIS_GAP = 5; // between a tick and its label (px)
// The axes take the page theme's colours (style.css --muted, --line) at
// every draw, so a theme switch recolours the charts at their next frame.
const cssVar = (name, fallback) =>
  (typeof getComputedStyle === 'function' && getComputedStyle(document.documentElement).getPropertyValue(name).trim()) || fallback;
const AXIS = {
  stroke: () => cssVar('--muted', '#7d8590'),
  font: AXIS_FONT,
  gap: AXIS_GAP,
  grid: { stroke: () => cssVar('--grid', '#20252d'), width: 1 },
  ticks: { stroke: () => cssVar('--line', '#262b33'), width: 1, size: TICK },
};
const GAP_FILL = 'rgba(239, 107, 107, 0.13)';
const GAP_EDGE = 'rgba(239, 107, 107, 0.7)';
const gapText = () => cssVar('--gap-text', '#f4a3a3');

/** colorOf is a series' colour: by its order of first appearance, so it keeps it when ranks change. */
export const colorOf = (s) => PALETTE[s.index % PALETTE.length];

// textWidth measures text in the axes' font (CSS px), with one canvas kept
// for it; the widths of a few distinct labels are cached.
let measureCtx = null;
const widths = new Map();
function textWidth(text) {
  let w = widths.get(text);
  if (w !== undefined) return w;
  measureCtx ??= document.createElement('canvas').getContext('2d');
  measureCtx.font = AXIS_FONT;
  w = measureCtx.measureText(text).width;
  if (widths.size > 4096) widths.clear();
  widths.set(text, w);
  return w;
}

/**
 * yAxisSize is the width of a y axis whose labels are values: the widest
 * label, the tick and the gap, so no label is clipped at the canvas edge.
 */
function yAxisSize(_u, values) {
  let w = 0;
  for (const v of values ?? []) if (v != null) w = Math.max(w, textWidth(String(v)));
  return Math.ceil(w) + TICK + AXIS_GAP + 4;
}

// The x axis: ticks at least a label and a margin apart (timeStep), so
// labels never overlap at any width; the plot leaves half the widest label
// free on the right for the last one.
const X_LABEL_MARGIN = 16;
const xLabelWidth = (u) => {
  let w = 0;
  for (const v of u.axes?.[0]?._values ?? []) if (v != null) w = Math.max(w, textWidth(String(v)));
  return w || textWidth('00:00:00');
};
// xLeftPadding: a time label centred on a tick at the plot's left edge
// reaches half its width into the y axis; a narrower axis gets the rest as
// padding, so the label is not cut at the canvas edge.
const xLeftPadding = (u) => Math.max(0, Math.ceil(xLabelWidth(u) / 2) + 1 - (u.axes?.[1]?._size ?? 0));

/**
 * createView builds the telemetry view in container. hooks (all optional):
 * onReady() channel/ready applied; onChange() the header counters changed.
 * options: chartHeight (CSS px; smaller in the charts panel beside a
 * terminal, which changes it with setChartHeight) and ySpace, the least
 * distance between two y ticks (px; Y_SPACE): a plot at least 4 × ySpace
 * high has two labels on its y axis whatever the data's range (its step,
 * 1, 2, 2.5 or 5 × 10ⁿ, is less than twice the least that keeps ySpace,
 * so the range spans two steps). The view also has
 * state(), layout(), model and stream (pause/resume), for tests.
 */
export function createView(container, hooks = {}, options = {}) {
  const root = div('telemetry');
  root.dataset.testid = 'telemetry';
  const head = div('tele-head');
  const title = span('tele-title', 'telemetry-title');
  const rate = span('tele-stat', 'telemetry-rate');
  const seriesCount = span('tele-stat', 'telemetry-series');
  const lost = span('tele-lost', 'telemetry-lost');
  head.append(title, rate, seriesCount, span('spacer'), lost);
  const grid = div('tele-grid');
  grid.dataset.testid = 'telemetry-charts';
  const empty = div('tele-empty');
  empty.textContent = 'waiting for samples…';
  const hidden = div('tele-hidden');
  root.append(head, empty, grid, hidden);
  container.append(root);

  let channel = null;
  let sub = null;
  let model = null;
  let stream = null;
  const plots = new Map(); // metric name → plot (makePlot)
  // The header's rate: live samples (after channel/ready) over a second or more.
  let rateAt = 0;
  let rateSamples = 0;
  let samplesPerSecond = null;
  let redrawTimer = null; // a chart waits for REDRAW_MS to pass (draw())
  let chartHeight = options.chartHeight ?? CHART_HEIGHT;
  const ySpace = options.ySpace ?? Y_SPACE;

  function start(ch) {
    for (const p of plots.values()) p.u.destroy();
    plots.clear();
    grid.replaceChildren();
    hidden.textContent = '';
    channel = ch;
    model = new TelemetryModel();
    stream?.reset();
    stream = telemetryConsumer({
      model,
      requestFrame: (fn) => requestAnimationFrame(fn),
      draw,
      onReady: () => hooks.onReady?.(),
    });
    rateAt = 0;
    samplesPerSecond = null;
    title.textContent = ch;
    renderHead();
  }

  // draw runs in the frame that applied messages (telemetry-stream.js). A
  // chart redraws at most every REDRAW_MS: a collection of many series
  // comes in several batches, over several frames, and redrawing a chart
  // for each (its canvas rasterized again) cost 40 % of a core for 1,000
  // series at 10 Hz (docs/benchmarks.md). A chart changed since its last
  // redraw is redrawn when REDRAW_MS has passed (a timer, then a frame).
  function draw() {
    const now = performance.now();
    let wait = Infinity;
    for (const chart of model.charts.values()) {
      const p = plots.get(chart.name) ?? makePlot(chart);
      if (p.version === chart.version) continue;
      const due = p.drawnAt + REDRAW_MS - now;
      if (due > 0 && !p.dirty) {
        wait = Math.min(wait, due);
        continue;
      }
      redraw(p, now);
    }
    if (wait !== Infinity && !redrawTimer) {
      redrawTimer = setTimeout(() => requestAnimationFrame(() => {
        redrawTimer = null;
        if (model) draw();
      }), wait);
    }
    const hc = model.hiddenCharts.size;
    hidden.textContent = hc ? `${hc} more metric${hc === 1 ? '' : 's'} not shown (at most ${model.maxCharts} charts)` : '';
    empty.hidden = model.charts.size > 0;
    renderHead();
  }

  function redraw(p, now) {
    const chart = p.chart;
    p.version = chart.version;
    p.drawnAt = now;
    choose(p, now);
    const data = chart.data(p.shown);
    p.u.batch((u) => {
      while (u.series.length - 1 < p.shown.length) u.addSeries(seriesOpts(p), u.series.length);
      while (u.series.length - 1 > p.shown.length) u.delSeries(u.series.length - 1);
      u.setData(data); // drawn now, not in a microtask
    });
    p.draws++;
    p.card.dataset.points = String(chart.points);
    p.card.dataset.gaps = String(chart.visibleGaps().length);
    renderMore(p);
    renderLegend(p);
  }

  // choose picks the series a chart draws: the top N by recent value (all,
  // up to EXPANDED_LINES, when expanded), re-ranked every RERANK_MS or
  // when series come, so lines do not flicker in and out.
  function choose(p, now) {
    const c = p.chart;
    if (c.series.length === p.seen && now - p.rankedAt < RERANK_MS && !p.dirty) return;
    p.seen = c.series.length;
    p.rankedAt = now;
    p.dirty = false;
    p.ranked = c.series.length > p.topN ? c.ranked() : c.series;
    p.shown = p.ranked.slice(0, p.expanded ? EXPANDED_LINES : p.topN);
  }

  function renderMore(p) {
    const n = p.chart.series.length;
    const extra = n - Math.min(n, p.topN);
    p.more.hidden = extra === 0;
    const t = p.expanded ? `show top ${p.topN}` : `+${extra} more`;
    if (p.more.textContent !== t) p.more.textContent = t;
    p.more.setAttribute('aria-expanded', String(p.expanded));
    const note = [];
    if (p.expanded && n > p.shown.length) note.push(`lines for the top ${p.shown.length} of ${n}`);
    if (p.chart.hiddenSeries.size) note.push(`${p.chart.hiddenSeries.size} series not kept`);
    const nt = note.join(' · ');
    if (p.note.textContent !== nt) p.note.textContent = nt;
  }

  // renderLegend shows each drawn series' value: its last, or the one
  // under the pointer while it hovers the plot.
  function renderLegend(p) {
    const c = p.chart;
    const idx = p.u.cursor.idx;
    const rows = p.legendRows;
    while (rows.length < p.shown.length) {
      const row = document.createElement('div');
      row.className = 'tele-legend-row';
      row.dataset.testid = 'legend-row';
      const mark = span('mark');
      const label = span('label');
      const value = span('value');
      row.append(mark, label, value);
      p.legend.append(row);
      rows.push({ row, mark, label, value, key: null, text: null });
    }
    while (rows.length > p.shown.length) rows.pop().row.remove();
    for (let k = 0; k < p.shown.length; k++) {
      const s = p.shown[k];
      const r = rows[k];
      if (r.key !== s.key || r.index !== s.index) {
        r.key = s.key;
        r.index = s.index;
        r.mark.style.background = colorOf(s);
        r.label.textContent = s.label;
        r.label.title = `${c.name}{${s.key}}`;
        r.row.dataset.series = s.key;
      }
      const v = idx == null ? s.last : c.valueAt(s, idx);
      const text = v == null ? '—' : p.fmt(v);
      if (r.text !== text) {
        r.text = text;
        r.value.textContent = text;
        r.row.dataset.value = v == null ? '' : String(v);
      }
    }
    p.legend.dataset.hover = idx == null ? '' : String(idx);
  }

  function renderHead() {
    if (!model) return;
    const st = model.stats;
    const now = performance.now();
    if (model.replaying) {
      // The history replay is not a rate: wait for live samples.
      rateAt = 0;
      samplesPerSecond = null;
    } else if (!rateAt || now - rateAt > 3000) {
      // First live draw, or none for a while (a hidden tab, a stall): start
      // over rather than average the pause in.
      rateAt = now;
      rateSamples = st.liveSamples;
    } else if (now - rateAt >= 1000) {
      samplesPerSecond = ((st.liveSamples - rateSamples) * 1000) / (now - rateAt);
      rateAt = now;
      rateSamples = st.liveSamples;
    }
    rate.textContent = samplesPerSecond == null ? '' : `${number(Math.round(samplesPerSecond))} samples/s`;
    let n = 0;
    for (const c of model.charts.values()) n += c.series.length;
    seriesCount.textContent = `${n} series · ${model.charts.size} chart${model.charts.size === 1 ? '' : 's'}`;
    lost.dataset.lost = String(st.lostSamples);
    lost.dataset.dropped = String(st.droppedMessages);
    lost.classList.toggle('bad', st.droppedMessages > 0);
    lost.textContent = st.droppedMessages === 0 ? 'no samples lost'
      : `lost ${st.lostSamples.toLocaleString('en-US')} sample${st.lostSamples === 1 ? '' : 's'} in ${st.gaps} gap${st.gaps === 1 ? '' : 's'}`;
    hooks.onChange?.();
  }

  function makePlot(chart) {
    const card = document.createElement('section');
    card.className = 'tele-card';
    card.dataset.testid = 'telemetry-chart';
    card.dataset.name = chart.name;
    const h = document.createElement('h3');
    const name = span('name');
    name.textContent = chart.name;
    name.title = chart.name;
    const more = document.createElement('button');
    more.type = 'button';
    more.className = 'more';
    more.dataset.testid = 'legend-more';
    more.hidden = true;
    const note = span('note');
    h.append(name, more, note);
    const el = div('tele-plot');
    const legend = div('tele-legend');
    legend.dataset.testid = 'legend';
    card.append(h, el, legend);
    grid.append(card);
    const unit = unitFor(chart.name);
    const p = {
      chart, card, el, legend, more, note, u: null, version: -1,
      fmt: valueFormatter(unit),
      topN: DEFAULT_TOP_N, expanded: false, shown: [], ranked: [], seen: -1, rankedAt: 0, dirty: false,
      legendRows: [],
      draws: 0, // redraws of the plot (uPlot setData), for the benchmark
      drawnAt: -Infinity,
      recording: null, // layout(): the texts drawn, while it redraws
    };
    more.addEventListener('click', () => {
      p.expanded = !p.expanded;
      p.dirty = true;
      p.version = -1;
      draw();
    });
    p.u = new uPlot({
      width: plotWidth(el),
      height: chartHeight,
      ms: 1, // sample times are Unix milliseconds
      // Lines on whole pixels and 1 px wide: Chromium's software canvas
      // (no GPU) strokes 64 lines of 1,200 points in 15 ms so, 84 ms at
      // 1.5 px unaligned (docs/benchmarks.md, Telemetry charts).
      pxAlign: 1,
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      legend: { show: false }, // the page's own legend (renderLegend)
      // Top: half a label over the highest y tick; right: half a time
      // label past the last x tick; left: what a narrow y axis (a count's
      // "0", "1") leaves short of half a time label at the first x tick.
      padding: [FONT_PX, (u) => Math.ceil(xLabelWidth(u) / 2) + 4, 0, xLeftPadding],
      scales: {
        x: {
          time: true,
          // One time only: centre it in a minute rather than pin it to
          // the left edge of uPlot's day.
          range: (u, min, max) => {
            const xs = u.data[0];
            return xs.length > 0 && xs[0] === xs[xs.length - 1] ? [xs[0] - 30_000, xs[0] + 30_000] : [min, max];
          },
        },
      },
      axes: [
        {
          ...AXIS,
          incrs: TIME_INCRS,
          space: (_u, _ai, min, max, dim) => timeStep(max - min, dim, textWidth, X_LABEL_MARGIN).space,
          values: (_u, splits, _ai, _space, incr) => timeLabels(splits, incr),
          size: FONT_PX + TICK + AXIS_GAP + 6,
        },
        {
          ...AXIS,
          space: ySpace,
          // A count (every value whole) steps by 1 or more: 0, 1, 2, not 0.2, 0.4.
          incrs: (_u, _ai, min, max) => {
            const all = axisIncrements(unit, min, max);
            return chart.integral && unit.scale === 1 ? all.filter((i) => i >= 1) : all;
          },
          values: (u, splits) => axisLabels(unit, splits, u.scales.y),
          size: yAxisSize,
        },
      ],
      series: [{ label: 'time' }],
      hooks: {
        drawClear: [(u) => drawGaps(u, chart, p)],
        setCursor: [() => renderLegend(p)],
      },
    }, [[]], el);
    plots.set(chart.name, p);
    return p;
  }

  // layout redraws every chart with its text recorded: each axis label as
  // drawn on the canvas (text, box in canvas pixels), for the browser test.
  function layout() {
    const out = [];
    for (const p of plots.values()) {
      const u = p.u;
      const ctx = u.ctx;
      const texts = [];
      p.recording = texts;
      ctx.fillText = function fillText(text, x, y) {
        const m = this.measureText(text);
        const tr = this.getTransform();
        texts.push({
          text: String(text),
          kind: p.recording === texts ? 'axis' : 'other',
          left: tr.a * (x - m.actualBoundingBoxLeft) + tr.e,
          right: tr.a * (x + m.actualBoundingBoxRight) + tr.e,
          top: tr.d * (y - m.actualBoundingBoxAscent) + tr.f,
          bottom: tr.d * (y + m.actualBoundingBoxDescent) + tr.f,
        });
        return CanvasRenderingContext2D.prototype.fillText.call(this, text, x, y);
      };
      try {
        u.batch(() => u.redraw(false, true));
      } finally {
        delete ctx.fillText;
        p.recording = null;
      }
      const rect = u.root.getBoundingClientRect();
      const host = p.el.getBoundingClientRect();
      out.push({
        name: p.chart.name,
        canvas: { width: ctx.canvas.width, height: ctx.canvas.height, cssWidth: ctx.canvas.getBoundingClientRect().width },
        root: { left: rect.left, right: rect.right },
        host: { left: host.left, right: host.right },
        pxRatio: uPlot.pxRatio ?? devicePixelRatio,
        bbox: { ...u.bbox },
        axes: u.axes.map((a, i) => ({ side: a.side, values: (a._values ?? []).map((v) => (v == null ? null : String(v))), splits: [...(a._splits ?? [])], size: a._size, i })),
        texts,
        legend: p.legendRows.map((r) => ({
          label: r.label.textContent, value: r.value.textContent, raw: r.row.dataset.value === '' ? null : Number(r.row.dataset.value),
        })),
        hover: u.cursor.idx ?? null,
        dots: dotsOf(p),
      });
    }
    return out;
  }

  // Resize every chart to its card's width.
  const observer = new ResizeObserver(() => {
    for (const p of plots.values()) {
      const w = plotWidth(p.el);
      if (w !== p.u.width) p.u.setSize({ width: w, height: chartHeight });
    }
  });
  observer.observe(grid);

  return {
    kind,
    onSubscribed(s) {
      if (s.channel !== channel) start(s.channel);
      else if (sub !== s) model.resubscribed(); // a reconnect: its replay is not live
      sub = s;
    },
    onMessage(msg, release, s) {
      // Frames may arrive before onSubscribed (they follow the subscribe
      // result in the same read): the subscription names the channel.
      if (s && s.channel !== channel) start(s.channel);
      stream.onMessage(msg, release);
    },
    onEnd(_info, s) {
      if (sub === s) sub = null;
    },
    setRole() {},
    /**
     * clear forgets what was drawn, so the next subscription starts afresh
     * (the page calls it when the user attaches; a reconnect keeps the
     * charts and skips the replayed batches instead).
     */
    clear() {
      channel = null;
    },
    /** recolour redraws every chart in the page theme's colours now (not at its next sample). */
    recolour() {
      for (const p of plots.values()) p.u.redraw(false, false);
    },
    /** setChartHeight sets every chart's height (CSS px). */
    setChartHeight(h) {
      if (h === chartHeight) return;
      chartHeight = h;
      for (const p of plots.values()) p.u.setSize({ width: plotWidth(p.el), height: chartHeight });
    },
    /** setTitle shows the channel's channels/list title in the header. */
    setTitle(t) {
      title.textContent = t && t !== channel ? `${t} — ${channel}` : channel ?? '';
    },
    get model() {
      return model;
    },
    get stream() {
      return stream;
    },
    layout,
    /** state returns what the view shows, for tests. */
    state() {
      if (!model) return null;
      return {
        channel,
        stats: { ...model.stats },
        lastSeq: model.lastSeq,
        pending: stream.pending,
        samplesPerSecond,
        charts: [...model.charts.values()].map((c) => {
          const p = plots.get(c.name);
          return {
            name: c.name,
            points: c.points,
            capacity: c.capacity,
            drawnPoints: p?.u.data[0]?.length ?? 0,
            series: c.series.map((s) => s.label),
            shown: p ? p.shown.map((s) => s.label) : [],
            expanded: p?.expanded ?? false,
            draws: p?.draws ?? 0,
            hiddenSeries: c.hiddenSeries.size,
            gaps: c.visibleGaps().length,
            pauses: c.pauses,
            first: c.x(0) ?? null,
            nullRows: countNullRows(c),
          };
        }),
      };
    },
    dispose() {
      clearTimeout(redrawTimer);
      redrawTimer = null;
      observer.disconnect();
      stream?.reset();
      for (const p of plots.values()) p.u.destroy();
      plots.clear();
      root.remove();
    },
  };
}

// seriesOpts is a uPlot series slot: it draws whichever series the plot
// shows at its place (p.shown), in that series' colour.
function seriesOpts(p) {
  const color = (_u, si) => {
    const s = p.shown[si - 1];
    return s ? colorOf(s) : 'transparent';
  };
  return {
    stroke: color,
    width: 1,
    spanGaps: false, // null (a gap) breaks the line; undefined is spanned
    // Points with no line to either side (one sample, the first after a
    // gap) are drawn as dots; no other points.
    points: { show: false, size: 5, stroke: color, fill: color, filter: (_u, si) => p.chart.isolated(si - 1) },
  };
}

// drawGaps shades the time span of every dropped range, under the lines.
function drawGaps(u, chart, p) {
  const gaps = chart.visibleGaps();
  if (gaps.length === 0) return;
  const rec = p.recording;
  p.recording = null; // its texts are not axis labels
  const { ctx, bbox } = u;
  ctx.save();
  ctx.beginPath();
  ctx.rect(bbox.left, bbox.top, bbox.width, bbox.height);
  ctx.clip();
  for (const g of gaps) {
    const x0 = u.valToPos(g.from, 'x', true);
    const x1 = u.valToPos(g.to, 'x', true);
    const w = Math.max(x1 - x0, 2);
    ctx.fillStyle = GAP_FILL;
    ctx.fillRect(x0, bbox.top, w, bbox.height);
    ctx.fillStyle = GAP_EDGE;
    ctx.fillRect(x0, bbox.top, 1, bbox.height);
    ctx.fillRect(x0 + w - 1, bbox.top, 1, bbox.height);
    // The loss, written in the band when it is wide enough (the whole
    // range's count: every chart shows the same channel-wide loss).
    const label = g.count == null ? 'gap' : `${g.count.toLocaleString('en-US')} lost`;
    ctx.font = `${Math.round(11 * devicePixelRatio)}px ui-monospace, Menlo, Consolas, monospace`;
    const tw = ctx.measureText(label).width;
    if (w > tw + 8) {
      ctx.fillStyle = gapText();
      ctx.textAlign = 'center';
      ctx.textBaseline = 'top';
      ctx.fillText(label, x0 + w / 2, bbox.top + 6 * devicePixelRatio);
    }
  }
  ctx.restore();
  p.recording = rec;
}

// dotsOf returns where each dot (a point with no line to either side) is
// on the canvas, and the colour drawn there, for the browser test.
function dotsOf(p) {
  const out = [];
  const { u, chart } = p;
  const d = u.data;
  for (let k = 0; k < p.shown.length; k++) {
    for (const i of chart.isolated(k) ?? []) {
      const x = Math.round(u.valToPos(d[0][i], 'x', true));
      const y = Math.round(u.valToPos(d[k + 1][i], 'y', true));
      const [r, g, b, a] = u.ctx.getImageData(x, y, 1, 1).data;
      const want = colorOf(p.shown[k]).match(/[0-9a-f]{2}/gi).map((h) => parseInt(h, 16));
      out.push({ series: p.shown[k].label, x, y, alpha: a, rgb: [r, g, b], colorDistance: Math.hypot(r - want[0], g - want[1], b - want[2]) });
    }
  }
  return out;
}

function countNullRows(chart) {
  let n = 0;
  for (let i = 0; i < chart.points; i++) if (chart.isGap(i)) n++;
  return n;
}

function plotWidth(el) {
  return Math.max(200, Math.floor(el.clientWidth || el.parentElement?.clientWidth || 480));
}

function div(cls) {
  const d = document.createElement('div');
  d.className = cls;
  return d;
}

function span(cls, testid) {
  const s = document.createElement('span');
  s.className = cls;
  if (testid) s.dataset.testid = testid;
  return s;
}
