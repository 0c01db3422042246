// The console is served by `forge serve` from memory (src/api/console_assets.cc embeds dist/).
// Hashed names under /assets/ are cached for a year; index.html is revalidated.
import { defineConfig } from "vite";

// `npm run dev` with STARFORGE_API=http://127.0.0.1:8080 proxies the API to a running forge serve.
const api = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env
  .STARFORGE_API;

export default defineConfig({
  base: "/",
  server: api ? { proxy: { "/api": { target: api, changeOrigin: false } } } : {},
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // A strict CSP (script-src 'self') forbids inline scripts: no inlined module-preload
    // polyfill, and no asset is inlined as a data: URL script.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    target: "es2022",
    reportCompressedSize: true,
  },
});
