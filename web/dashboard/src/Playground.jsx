// The playground: a streamed chat with the served model(s) through /v1/chat/completions, with
// the sampling parameters, a latency budget, an optional JSON schema and the API key; under
// each reply the route the server chose, the cache result, TTFT and tokens/s. Images (for a
// model served with --mmproj) attach by the file picker or by pasting into the prompt; they go
// as image_url data: URLs after the text, and the reply shows the server's image encode time.
import { useEffect, useRef, useState } from 'preact/hooks';
import { apiKey, getJSON, streamChat } from './api.js';
import { num } from './format.js';

function Field({ label, children, hint }) {
  return (
    <label class="field">
      <span>{label}</span>
      {children}
      {hint && <small class="muted">{hint}</small>}
    </label>
  );
}

export function Playground({ stats }) {
  const [models, setModels] = useState([]);
  const [model, setModel] = useState('');
  const [messages, setMessages] = useState([]);
  const [input, setInput] = useState('');
  const [images, setImages] = useState([]); // attached: { name, url } (data: URLs)
  const picker = useRef(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [key, setKey] = useState(apiKey.get());
  const [p, setP] = useState({ temperature: 0.8, top_p: 0.95, max_tokens: 64, seed: '', budget: '', schema: '' });
  const abort = useRef(null);
  const log = useRef(null);
  const needsKey = stats && stats.auth && stats.auth.api_keys;

  const loadModels = () =>
    getJSON('/v1/models', { auth: 'key' })
      .then((j) => {
        setModels(j.data.map((m) => m.id));
        setError(null);
      })
      .catch((e) => setError(e));
  // Once /stats said whether keys are configured: no call that is sure to fail with a 401.
  useEffect(() => {
    if (stats && (!needsKey || key)) loadModels();
  }, [!!stats, needsKey, key]);
  useEffect(() => {
    if (log.current) log.current.scrollTop = log.current.scrollHeight;
  }, [messages]);

  const set = (k) => (e) => setP({ ...p, [k]: e.currentTarget.value });

  // Image files -> data: URLs appended to the attachments; anything else is refused here.
  function attach(files) {
    for (const f of files) {
      if (!f.type.startsWith('image/')) {
        setError(new Error(`'${f.name || 'the pasted item'}' is not an image`));
        continue;
      }
      const reader = new FileReader();
      reader.onload = () => setImages((im) => [...im, { name: f.name || 'pasted image', url: reader.result }]);
      reader.onerror = () => setError(new Error(`'${f.name}' cannot be read`));
      reader.readAsDataURL(f);
    }
  }
  const onPaste = (e) => {
    const files = [...(e.clipboardData ? e.clipboardData.files : [])].filter((f) => f.type.startsWith('image/'));
    if (files.length) {
      e.preventDefault();
      attach(files);
    }
  };
  // The OpenAI content of a message: plain text, or text then its images.
  const contentOf = (m) =>
    m.images && m.images.length
      ? [{ type: 'text', text: m.content }, ...m.images.map((im) => ({ type: 'image_url', image_url: { url: im.url } }))]
      : m.content;

  async function send() {
    const text = input.trim();
    if (!text || busy) return;
    let schema = null;
    if (p.schema.trim()) {
      try {
        schema = JSON.parse(p.schema);
      } catch (e) {
        setError(new Error(`the JSON schema does not parse: ${e.message}`));
        return;
      }
    }
    const user = { role: 'user', content: text, images };
    const history = [...messages.filter((m) => !m.error), user].map((m) => ({ role: m.role, content: contentOf(m) }));
    const body = {
      messages: history,
      stream: true,
      stream_options: { include_usage: true },
      temperature: Number(p.temperature),
      top_p: Number(p.top_p),
      max_tokens: Number(p.max_tokens),
    };
    if (model) body.model = model;
    if (p.seed !== '') body.seed = Number(p.seed);
    if (schema) body.response_format = { type: 'json_schema', json_schema: { name: 'playground', schema, strict: true } };
    setError(null);
    setInput('');
    setImages([]);
    setBusy(true);
    const reply = { role: 'assistant', content: '', info: null };
    setMessages([...messages, user, reply]);
    abort.current = new AbortController();
    try {
      const info = await streamChat(body, {
        signal: abort.current.signal,
        budgetMs: p.budget ? Number(p.budget) : 0,
        onDelta: (d) => {
          reply.content += d;
          setMessages((ms) => [...ms.slice(0, -1), { ...reply }]);
        },
      });
      reply.info = info;
      setMessages((ms) => [...ms.slice(0, -1), { ...reply }]);
    } catch (e) {
      if (e.name !== 'AbortError') {
        setError(e);
        reply.error = true;
        setMessages((ms) => [...ms.slice(0, -1), { ...reply }]);
      }
    } finally {
      setBusy(false);
      abort.current = null;
    }
  }

  const onKey = (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  };

  return (
    <div class="playground">
      <div class="chat">
        <div class="log" ref={log} data-testid="chat-log" aria-live="polite">
          {!messages.length && <p class="muted">Type a prompt below; Enter sends, Shift+Enter starts a new line.</p>}
          {messages.map((m, i) => (
            <div key={i} class={`msg ${m.role}`}>
              <div class="who">{m.role === 'user' ? 'you' : m.info?.model || 'model'}</div>
              <div class="text" data-testid={m.role === 'assistant' ? 'reply' : undefined}>{m.content || (m.role === 'assistant' && busy && i === messages.length - 1 ? '…' : '')}</div>
              {m.images && m.images.length > 0 && (
                <div class="thumbs">{m.images.map((im, k) => <img key={k} src={im.url} alt={im.name} title={im.name} />)}</div>
              )}
              {m.info && <ReplyInfo info={m.info} />}
            </div>
          ))}
        </div>
        {error && <p class="error" role="alert" data-testid="chat-error">{error.message}</p>}
        <div class="composer">
          <div class="composer-input">
            <textarea aria-label="prompt" placeholder="Once upon a time (paste an image to attach it)" rows={3} value={input} onInput={(e) => setInput(e.currentTarget.value)} onKeyDown={onKey} onPaste={onPaste} data-testid="prompt" />
            {images.length > 0 && (
              <div class="thumbs attached" data-testid="attachments">
                {images.map((im, k) => (
                  <span key={k} class="thumb">
                    <img src={im.url} alt={im.name} title={im.name} />
                    <button aria-label={`remove ${im.name}`} onClick={() => setImages((all) => all.filter((_, j) => j !== k))}>×</button>
                  </span>
                ))}
              </div>
            )}
          </div>
          <div class="composer-buttons">
            <button class="primary" onClick={send} disabled={busy || !input.trim()}>Send</button>
            <button onClick={() => picker.current && picker.current.click()} disabled={busy} title="attach images (the model needs --mmproj)">Image…</button>
            <input ref={picker} type="file" accept="image/png,image/jpeg,image/webp" multiple hidden data-testid="image-picker" onChange={(e) => { attach([...e.currentTarget.files]); e.currentTarget.value = ''; }} />
            {busy && <button onClick={() => abort.current && abort.current.abort()}>Stop</button>}
            <button onClick={() => setMessages([])} disabled={busy || !messages.length}>Clear</button>
          </div>
        </div>
      </div>
      <aside class="params" aria-label="request parameters">
        <Field label="model">
          <select value={model} onChange={(e) => setModel(e.currentTarget.value)}>
            <option value="">default / routed</option>
            {models.map((m) => <option key={m} value={m}>{m}</option>)}
          </select>
        </Field>
        <Field label="temperature"><input type="number" min="0" max="2" step="0.1" value={p.temperature} onInput={set('temperature')} /></Field>
        <Field label="top_p"><input type="number" min="0" max="1" step="0.05" value={p.top_p} onInput={set('top_p')} /></Field>
        <Field label="max_tokens"><input type="number" min="1" step="1" value={p.max_tokens} onInput={set('max_tokens')} /></Field>
        <Field label="seed" hint="empty: random"><input type="number" step="1" value={p.seed} onInput={set('seed')} /></Field>
        <Field label="latency budget (ms)" hint="x-latency-budget-ms: the router picks a tier that fits"><input type="number" min="1" step="100" value={p.budget} onInput={set('budget')} /></Field>
        <Field label="JSON schema (optional)" hint="sent as response_format json_schema">
          <textarea rows={4} value={p.schema} onInput={set('schema')} placeholder='{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}' spellcheck={false} />
        </Field>
        <Field label={needsKey ? 'API key (required here)' : 'API key'} hint="kept in this tab only (sessionStorage)">
          <input type="password" autocomplete="off" value={key} onInput={(e) => { setKey(e.currentTarget.value); apiKey.set(e.currentTarget.value); }} />
        </Field>
      </aside>
    </div>
  );
}

function ReplyInfo({ info }) {
  const completion = info.usage ? info.usage.completion_tokens : info.chunks;
  // As the client saw it: every token over the whole request (TTFT included).
  const tokS = completion > 0 && info.totalMs > 0 ? (completion * 1000) / info.totalMs : null;
  return (
    <dl class="reply-info" data-testid="reply-info" data-chunks={info.chunks}>
      <div><dt>route</dt><dd>{info.route || 'default model'}</dd></div>
      <div><dt>cache</dt><dd>{info.cache || 'off'}</dd></div>
      <div><dt>TTFT</dt><dd>{info.ttftMs == null ? '–' : `${Math.round(info.ttftMs)} ms`}</dd></div>
      {info.imageMs != null && (
        <div data-testid="image-encode"><dt>image encode</dt><dd>{info.imagesCached > 0 && info.imageMs === 0 ? 'cached' : `${num(info.imageMs)} ms`}</dd></div>
      )}
      <div><dt>tokens/s</dt><dd>{tokS == null ? '–' : num(tokS)}</dd></div>
      <div><dt>tokens</dt><dd>{info.usage ? `${info.usage.prompt_tokens} in, ${info.usage.completion_tokens} out` : `${info.chunks} chunks`}</dd></div>
      {info.finish && <div><dt>finish</dt><dd>{info.finish}</dd></div>}
    </dl>
  );
}
