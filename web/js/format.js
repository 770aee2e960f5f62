// DOM building and number/size/time formatting, shared by every view. Owns no state.
//
// Exports: el (element builder; every string from the API reaches the page through textContent,
// never innerHTML), $ (querySelector), isNum, fmtNumber, fmtBytes, fmtRate, fmtDuration, fmtTime,
// fmtResourceAmount, fmtResources, fmtBytesRate, fmtPercent, fmtSig, and small widgets: idCell,
// badge, kvTable, emptyRow, followBottom.
//
// Numbers are shown with at most 3-4 significant digits (never a raw double such as
// 35.032302211808414); a missing or non-finite value is shown as "–", never as null, undefined
// or NaN.

// el('div', {class: 'x', dataset: {a: 1}, onclick: fn, text: 'hi'}, child, [children], 'text')
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'text') node.textContent = value;
      else if (key === 'dataset') Object.assign(node.dataset, value);
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    if (typeof child === 'number' && !Number.isFinite(child)) {
      node.append('–');
      continue;
    }
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export const $ = (selector) => document.querySelector(selector);

export function isNum(v) {
  return typeof v === 'number' && Number.isFinite(v);
}

export function fmtNumber(v, digits = 3) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  if (typeof v !== 'number') return String(v);
  if (!Number.isFinite(v)) return v > 0 ? '∞' : '−∞';
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(2)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(2)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
  if (Number.isInteger(v)) return String(v);
  if (a >= 100) return v.toFixed(0);
  if (a >= 1e-3) return String(+v.toPrecision(digits));
  return v.toExponential(1);
}

// `v` with `digits` significant digits, without a trailing ".0" (35.0323 -> "35.0", 1234 ->
// "1234" for integers below 10^digits+1, else rounded: 123456 -> "123000").
export function fmtSig(v, digits = 3) {
  if (!isNum(v)) return '–';
  if (Number.isInteger(v) && Math.abs(v) < 10 ** (digits + 1)) return String(v);
  const text = v.toPrecision(digits);
  return text.includes('e') ? String(+text) : text;
}

// Bytes in binary units with 3 significant digits: 1536 -> "1.50 KiB", 35.03 -> "35.0 B".
export function fmtBytes(b) {
  if (!isNum(b)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (Math.abs(b) >= 1000 && i < units.length - 1) {
    b /= 1024;
    i++;
  }
  return `${i === 0 && Number.isInteger(b) ? b : fmtSig(b, 3)} ${units[i]}`;
}

// A data rate in decimal units with 3 significant digits: 35.0323 -> "35.0 B/s",
// 612345 -> "612 KB/s", 1.5e6 -> "1.50 MB/s".
export function fmtBytesRate(bytesPerSecond) {
  if (!isNum(bytesPerSecond)) return '–';
  const units = ['B/s', 'KB/s', 'MB/s', 'GB/s', 'TB/s'];
  let v = bytesPerSecond;
  let i = 0;
  while (Math.abs(v) >= 999.5 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v === 0 ? '0' : fmtSig(v, 3)} ${units[i]}`;
}

// A count per second with 3 significant digits: 12.4567 -> "12.5/s".
export function fmtRate(perSecond) {
  return isNum(perSecond) ? `${fmtNumber(perSecond, 3)}/s` : '–';
}

// A percentage with 3 significant digits (CPU use may exceed 100%): 37.512 -> "37.5%".
export function fmtPercent(p) {
  if (!isNum(p)) return '–';
  return `${p === 0 ? '0' : fmtSig(p, p >= 100 ? 4 : 3)}%`;
}

export function fmtDuration(seconds) {
  if (!isNum(seconds) || seconds < 0) return '–';
  if (seconds < 10) return `${+seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const s = Math.floor(seconds);
  const pad = (n) => String(n).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function fmtTime(ms) {
  if (!isNum(ms) || ms <= 0) return '–';
  const d = new Date(ms);
  const today = new Date();
  const time = d.toLocaleTimeString([], {hour12: false});
  return d.toDateString() === today.toDateString() ? time : `${d.toLocaleDateString()} ${time}`;
}

function isBytesResource(name) {
  return /memory/i.test(name);
}

export function fmtResourceAmount(name, v) {
  return isBytesResource(name) ? fmtBytes(v) : fmtNumber(v);
}

// {"CPU": 1, "GPU": 0.5} -> "CPU 1 · GPU 0.5" (zero amounts left out).
export function fmtResources(resources) {
  if (!resources || typeof resources !== 'object') return '–';
  const parts = Object.entries(resources)
    .filter(([, v]) => isNum(v) && v !== 0)
    .map(([k, v]) => `${k} ${fmtResourceAmount(k, v)}`);
  return parts.length ? parts.join(' · ') : '–';
}

// Long ids are shown shortened with the full id as a tooltip.
export function idCell(id, length = 10) {
  const text = id === undefined || id === null || id === '' ? '–' : String(id);
  const short = text.length > length + 2 ? `${text.slice(0, length)}…` : text;
  return el('span', {class: 'mono', title: text, text: short});
}

export function badge(state) {
  const s = state ? String(state) : 'UNKNOWN';
  return el('span', {class: `badge state-${s}`, text: s});
}

export function kvTable(rows) {
  return el(
    'table',
    {class: 'kv'},
    el(
      'tbody',
      null,
      rows
        .filter((r) => r)
        .map(([k, v]) =>
          el(
            'tr',
            null,
            el('th', {text: k}),
            el('td', null, v instanceof Node ? v : String(v ?? '–')),
          ),
        ),
    ),
  );
}

export function emptyRow(columns, text) {
  return el('tr', {class: 'empty-row'}, el('td', {colspan: columns, text}));
}

// Keeps a <pre>'s scroll position pinned to the bottom if it was there before `update` ran.
export function followBottom(pre, update) {
  const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
  update();
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}
