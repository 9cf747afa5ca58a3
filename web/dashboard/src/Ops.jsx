// Operations behind the admin token: reload a model (a path on the server, or an upload with
// progress), flush the response cache, view the effective configuration. Nothing is sent
// before a token is typed; every failure shows the server's message.
import { useState } from 'preact/hooks';
import { adminToken, getJSON, postJSON, uploadModel } from './api.js';

function Result({ r, testid }) {
  if (!r) return null;
  return r.error ? (
    <p class="error" role="alert" data-testid={testid}>{r.error}</p>
  ) : (
    <p class="ok-text" role="status" data-testid={testid}>{r.ok}</p>
  );
}

export function Ops({ onReloaded }) {
  const [token, setToken] = useState(adminToken.get());
  const [saved, setSaved] = useState(!!adminToken.get());
  const [path, setPath] = useState({ path: '', tokenizer: '', name: '' });
  const [reload, setReload] = useState(null);
  const [file, setFile] = useState(null);
  const [upName, setUpName] = useState('');
  const [progress, setProgress] = useState(null);
  const [upload, setUpload] = useState(null);
  const [flush, setFlush] = useState(null);
  const [config, setConfig] = useState(null);
  const [busy, setBusy] = useState('');

  const saveToken = (e) => {
    e.preventDefault();
    adminToken.set(token.trim());
    setSaved(!!token.trim());
  };
  const run = async (what, fn, setter) => {
    setBusy(what);
    setter(null);
    try {
      setter({ ok: await fn() });
    } catch (e) {
      setter({ error: e.message });
    } finally {
      setBusy('');
    }
  };
  const reloadPath = (e) => {
    e.preventDefault();
    const body = { path: path.path.trim() };
    if (path.tokenizer.trim()) body.tokenizer = path.tokenizer.trim();
    if (path.name.trim()) body.name = path.name.trim();
    run('reload', async () => {
      const j = await postJSON('/reload', body, { auth: 'admin' });
      onReloaded && onReloaded();
      return `reloaded: now serving ${j.model} (loaded in ${Math.round(j.load_ms)} ms)`;
    }, setReload);
  };
  const reloadUpload = (e) => {
    e.preventDefault();
    const form = new FormData();
    if (upName.trim()) form.append('name', upName.trim());
    form.append('model', file);
    setProgress(0);
    run('upload', async () => {
      const j = await uploadModel(form, setProgress);
      onReloaded && onReloaded();
      return `uploaded and reloaded: now serving ${j.model} (loaded in ${Math.round(j.load_ms)} ms)`;
    }, setUpload);
  };
  const doFlush = () =>
    run('flush', async () => {
      const j = await postJSON('/admin/cache/flush', {}, { auth: 'admin' });
      return j.cache === 'off' ? 'the response cache is off: nothing to flush' : `flushed ${j.entries} entries`;
    }, setFlush);
  const viewConfig = () =>
    run('config', async () => JSON.stringify((await getJSON('/admin/config', { auth: 'admin' })).config, null, 2), setConfig);

  const locked = !saved;
  return (
    <div class="ops">
      <form class="card" onSubmit={saveToken}>
        <h2>admin token</h2>
        <p class="muted">Kept in this tab's session storage; sent only with the calls below.</p>
        <div class="row">
          <input type="password" aria-label="admin token" autocomplete="off" value={token} onInput={(e) => setToken(e.currentTarget.value)} data-testid="admin-token" />
          <button type="submit" class="primary">Use token</button>
          {saved && <button type="button" onClick={() => { adminToken.set(''); setToken(''); setSaved(false); }}>Forget</button>}
        </div>
      </form>
      <form class="card" onSubmit={reloadPath}>
        <h2>reload a model from a path on the server</h2>
        <div class="grid2">
          <label class="field"><span>model file</span><input required value={path.path} onInput={(e) => setPath({ ...path, path: e.currentTarget.value })} placeholder="/models/model.gguf" data-testid="reload-path" /></label>
          <label class="field"><span>tokenizer (llama2.c checkpoints)</span><input value={path.tokenizer} onInput={(e) => setPath({ ...path, tokenizer: e.currentTarget.value })} data-testid="reload-tokenizer" /></label>
          <label class="field"><span>name (default: the file's stem)</span><input value={path.name} onInput={(e) => setPath({ ...path, name: e.currentTarget.value })} data-testid="reload-name" /></label>
        </div>
        <button type="submit" class="primary" disabled={locked || !!busy} data-testid="reload-button">{busy === 'reload' ? 'Reloading…' : 'Reload'}</button>
        {locked && <small class="muted"> type the admin token first</small>}
        <Result r={reload} testid="reload-result" />
      </form>
      <form class="card" onSubmit={reloadUpload}>
        <h2>upload a model and serve it</h2>
        <div class="grid2">
          <label class="field"><span>model file (GGUF)</span><input type="file" required onChange={(e) => setFile(e.currentTarget.files[0] || null)} data-testid="upload-file" /></label>
          <label class="field"><span>name</span><input value={upName} onInput={(e) => setUpName(e.currentTarget.value)} data-testid="upload-name" /></label>
        </div>
        <button type="submit" class="primary" disabled={locked || !!busy || !file} data-testid="upload-button">{busy === 'upload' ? 'Uploading…' : 'Upload and reload'}</button>
        {progress != null && busy === 'upload' && <progress max="1" value={progress} aria-label="upload progress">{Math.round(progress * 100)}%</progress>}
        <Result r={upload} testid="upload-result" />
      </form>
      <div class="card">
        <h2>response cache and configuration</h2>
        <div class="row">
          <button onClick={doFlush} disabled={locked || !!busy}>Flush the response cache</button>
          <button onClick={viewConfig} disabled={locked || !!busy} data-testid="config-button">View the effective configuration</button>
        </div>
        <Result r={flush} />
        {config && config.error && <Result r={config} />}
        {config && config.ok && <pre class="config" data-testid="config" tabIndex={0}>{config.ok}</pre>}
      </div>
    </div>
  );
}
