// The console is served by `forge serve` from memory (src/api/console_assets.cc embeds dist/).
// Hashed names under /assets/ are cached for a year; index.html is revalidated.
import { defineConfig } from "vite";

// `npm run dev` with STARFORGE_API=http://127.0.0.1:8080 proxies the API to a running forge serve.
const api = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env
  .STARFORGE_API;

// The console's help pages (/help/…) are sections of the repository's documents, served by forge
// itself with the console: each document is imported with ?raw and cut here to its section, so
// the bundle carries only that. The JobSpec reference is the README's "JobSpec v1"; the fleets'
// setup pages are what docs/ says a server needs.
const HELP_SECTIONS: Record<string, string> = {
  "/README.md?raw": "## JobSpec v1",
  "/docs/kuberay-fleet.md?raw": "### When `forge serve` runs it",
  "/docs/settings.md?raw": "## Example: a KubeRay cluster",
  "/docs/playground.md?raw": "## On the local fleet",
};

// The section of `text` that starts at the line `heading`, up to the next heading of its level
// or a higher one.
export function cutSection(text: string, heading: string): string {
  const start = text.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`no "${heading}" section for the console's help`);
  const level = heading.indexOf(" ");
  let end = -1;
  for (const m of text.slice(start + heading.length + 1).matchAll(/\n(#+) /g)) {
    // Lines inside a fenced block are not headings.
    const before = text.slice(0, start + heading.length + 1 + (m.index ?? 0));
    if ((before.match(/\n```/g) ?? []).length % 2 === 1) continue;
    if (m[1].length <= level) {
      end = start + heading.length + 1 + (m.index ?? 0);
      break;
    }
  }
  return text.slice(start + 1, end < 0 ? undefined : end).trim();
}

const helpSections = {
  name: "starforge-help-sections",
  transform(code: string, id: string) {
    const suffix = Object.keys(HELP_SECTIONS).find((s) => id.endsWith(s));
    if (!suffix) return null;
    const text = JSON.parse(code.replace(/^export default /, "").replace(/;?\s*$/, "")) as string;
    return { code: `export default ${JSON.stringify(cutSection(text, HELP_SECTIONS[suffix]))};`, map: null };
  },
};

export default defineConfig({
  base: "/",
  plugins: [helpSections],
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
