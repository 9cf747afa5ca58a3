// Talking to edgelm serve: JSON with the server's own error messages, the admin token and the
// API key kept in sessionStorage (typed once per tab, gone when it closes).

const store = {
  get: (k) => sessionStorage.getItem(k) || '',
  set: (k, v) => (v ? sessionStorage.setItem(k, v) : sessionStorage.removeItem(k)),
};
export const adminToken = { get: () => store.get('edgelm.admin'), set: (v) => store.set('edgelm.admin', v) };
export const apiKey = { get: () => store.get('edgelm.apikey'), set: (v) => store.set('edgelm.apikey', v) };

export class ApiError extends Error {
  constructor(status, message) {
    super(status ? `${status}: ${message}` : message);
    this.status = status;
  }
}

// The message of an error response: OpenAI's {"error": {"message"}} or the text itself.
export async function errorOf(res) {
  const text = await res.text();
  let msg = text.trim() || res.statusText;
  try {
    const j = JSON.parse(text);
    if (j && j.error) msg = typeof j.error === 'string' ? j.error : j.error.message || msg;
  } catch (_) {
    /* not JSON: the text as it is */
  }
  return new ApiError(res.status, msg);
}

function headersFor(auth, extra) {
  const h = { ...extra };
  if (auth === 'admin' && adminToken.get()) h.Authorization = `Bearer ${adminToken.get()}`;
  if (auth === 'key' && apiKey.get()) h.Authorization = `Bearer ${apiKey.get()}`;
  return h;
}

export async function request(method, url, { auth, body, headers } = {}) {
  let res;
  try {
    res = await fetch(url, {
      method,
      headers: headersFor(auth, body !== undefined ? { 'Content-Type': 'application/json', ...headers } : headers),
      body: body !== undefined ? JSON.stringify(body) : undefined,
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, `the server cannot be reached (${e.message})`);
  }
  if (!res.ok) throw await errorOf(res);
  return res.json();
}

export const getJSON = (url, opts) => request('GET', url, opts);
export const postJSON = (url, body, opts) => request('POST', url, { ...opts, body });

// POST /reload with a model file as multipart, reporting upload progress (0..1).
export function uploadModel(form, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', '/reload');
    xhr.setRequestHeader('Authorization', `Bearer ${adminToken.get()}`);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onerror = () => reject(new ApiError(0, 'the upload failed: the connection was lost'));
    xhr.onload = () => {
      let j = null;
      try {
        j = JSON.parse(xhr.responseText);
      } catch (_) {
        /* below */
      }
      if (xhr.status >= 200 && xhr.status < 300) return resolve(j);
      const msg = j && j.error ? j.error.message || String(j.error) : xhr.responseText || xhr.statusText;
      reject(new ApiError(xhr.status, msg));
    };
    xhr.send(form);
  });
}

// Streams /v1/chat/completions: calls onDelta(text) per content chunk; resolves with the route
// and cache headers, usage (when the server sends it) and the client-side timings.
export async function streamChat(body, { onDelta, signal, budgetMs }) {
  const t0 = performance.now();
  const headers = headersFor('key', { 'Content-Type': 'application/json' });
  if (budgetMs) headers['x-latency-budget-ms'] = String(budgetMs);
  let res;
  try {
    res = await fetch('/v1/chat/completions', { method: 'POST', headers, body: JSON.stringify(body), signal });
  } catch (e) {
    throw new ApiError(0, `the server cannot be reached (${e.message})`);
  }
  if (!res.ok) throw await errorOf(res);
  const info = {
    route: res.headers.get('x-edgelm-route') || '',
    cache: res.headers.get('x-edgelm-cache') || '',
    // The request's image decode + encode time (x-edgelm-image-ms; absent without images).
    imageMs: res.headers.get('x-edgelm-image-ms') === null ? null : Number(res.headers.get('x-edgelm-image-ms')),
    imagesCached: Number(res.headers.get('x-edgelm-images-cached') || 0),
    model: '',
    ttftMs: null,
    totalMs: null,
    chunks: 0,
    usage: null,
    finish: '',
  };
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '[DONE]') continue;
      const j = JSON.parse(data);
      if (j.error) throw new ApiError(0, j.error.message || 'the stream failed');
      if (j.model) info.model = j.model;
      if (j.usage) info.usage = j.usage;
      const choice = j.choices && j.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) info.finish = choice.finish_reason;
      const text = (choice.delta && (choice.delta.content || choice.delta.reasoning_content)) || '';
      if (text) {
        if (info.ttftMs === null) info.ttftMs = performance.now() - t0;
        info.chunks += 1;
        onDelta(text);
      }
    }
  }
  info.totalMs = performance.now() - t0;
  return info;
}
