// The console is served by `forge serve` from memory (src/api/console_assets.cc embeds dist/).
// Hashed names under /assets/ are cached for a year; index.html is revalidated.
import { defineConfig } from "vite";

// `npm run dev` with STARFORGE_API=http://127.0.0.1:8080 proxies the API to a running forge serve.
const api = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env
  .STARFORGE_API;

// The console's JobSpec reference (/help/jobspec) is the README's "JobSpec v1" section: the
// README is imported with ?raw and cut to that section here, so the bundle carries only it.
const jobspecReference = {
  name: "starforge-jobspec-reference",
  transform(code: string, id: string) {
    if (!id.endsWith("/README.md?raw")) return null;
    const text = JSON.parse(code.replace(/^export default /, "").replace(/;?\s*$/, "")) as string;
    const start = text.indexOf("\n## JobSpec v1");
    const end = start < 0 ? -1 : text.indexOf("\n## ", start + 5);
    if (start < 0) throw new Error("README.md has no \"## JobSpec v1\" section for the console's reference");
    return { code: `export default ${JSON.stringify(text.slice(start + 1, end < 0 ? undefined : end).trim())};`, map: null };
  },
};

export default defineConfig({
  base: "/",
  plugins: [jobspecReference],
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
