// The dashboard's build: one small bundle (Preact + uPlot), no CDN, embedded in edgelm serve by
// cmake/dashboard.cmake (which passes --outDir into the build folder).
import { defineConfig } from 'vite';

// `EDGELM_URL=http://127.0.0.1:8080 npx vite`: the page with live reload, its calls sent to a
// running server.
const server = process.env.EDGELM_URL;
const proxy = server ? Object.fromEntries(['/stats', '/v1', '/admin', '/reload'].map((p) => [p, server])) : undefined;

export default defineConfig({
  base: '/',
  server: { proxy },
  // Preact's automatic JSX runtime (Vite 8 transforms with Oxc).
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    target: 'es2020',
    sourcemap: false,
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 300,
    reportCompressedSize: false,
  },
});
