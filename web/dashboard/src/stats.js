// Polls GET /stats once a second: the first call fetches the server's whole history (the last
// 15 minutes), later ones only the points after the last one seen (?since=), merged here.
import { useEffect, useState } from 'preact/hooks';
import { getJSON } from './api.js';

export const POLL_MS = 1000;
const KEEP_MS = 15 * 60 * 1000;

function emptyHistory() {
  return { t: [], cpu: [], rss_bytes: [], models: {} };
}

// Appends the history chunk `h` to `into` (both column-wise); a model missing on either side
// gets nulls, so every column stays as long as `t`.
export function mergeHistory(into, h) {
  const n0 = into.t.length;
  const n1 = h.t.length;
  for (const name of Object.keys(h.models)) {
    if (!into.models[name]) {
      into.models[name] = {};
      for (const col of Object.keys(h.models[name])) into.models[name][col] = new Array(n0).fill(null);
    }
  }
  into.t.push(...h.t);
  into.cpu.push(...h.cpu);
  into.rss_bytes.push(...h.rss_bytes);
  for (const [name, cols] of Object.entries(into.models)) {
    const src = h.models[name];
    for (const col of Object.keys(cols)) cols[col].push(...(src ? src[col] : new Array(n1).fill(null)));
  }
  // Keep the last 15 minutes.
  const last = into.t.length ? into.t[into.t.length - 1] : 0;
  let drop = 0;
  while (drop < into.t.length && into.t[drop] < last - KEEP_MS) drop++;
  if (drop > 0) {
    into.t.splice(0, drop);
    into.cpu.splice(0, drop);
    into.rss_bytes.splice(0, drop);
    for (const cols of Object.values(into.models)) for (const c of Object.values(cols)) c.splice(0, drop);
  }
  return into;
}

export function useStats() {
  const [state, setState] = useState({ stats: null, history: emptyHistory(), error: null, version: 0 });
  useEffect(() => {
    let since = 0;
    let history = emptyHistory();
    let timer = null;
    let stopped = false;
    const tick = async () => {
      try {
        const j = await getJSON(`/stats?since=${since}`, { auth: 'key' });
        mergeHistory(history, j.history);
        if (history.t.length) since = history.t[history.t.length - 1];
        setState((s) => ({ stats: j, history, error: null, version: s.version + 1 }));
      } catch (e) {
        setState((s) => ({ ...s, error: e }));
      }
      if (!stopped) timer = setTimeout(tick, POLL_MS);
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);
  return state;
}
