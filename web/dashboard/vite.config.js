// The dashboard's build: one small bundle (Preact + uPlot), no CDN, embedded in edgelm serve by
// cmake/dashboard.cmake (which passes --outDir into the build folder).
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
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
