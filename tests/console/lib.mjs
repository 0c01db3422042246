// Shared by the console's browser tests: a `forge serve` of their own on a loopback port with a
// fresh storage root, tokens for an admin and two users, and Debian's Chromium driven by
// playwright-core (never a downloaded browser). Chromium missing is a failure, not a skip.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.STARFORGE_CHROMIUM ?? "/usr/bin/chromium";
export const BUILD = process.env.STARFORGE_BUILD_DIR ?? "build/debug";
export const FORGE = join(BUILD, "bin", "forge");
export const ARTIFACTS = join(BUILD, "test-artifacts", "console");

export async function waitFor(what, f, seconds = 30) {
  const end = Date.now() + seconds * 1000;
  let last;
  while (Date.now() < end) {
    try {
      const v = await f();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out after ${seconds} s waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

// Starts `forge serve` with `env` (FORGE_* settings) and returns {url, tokens, submit, stop}.
// `before(env)` runs first, with the environment forge will have (e.g. to fill its store).
export async function startForge(env = {}, users = ["alice", "bob"], { before } = {}) {
  if (!existsSync(FORGE)) throw new Error(`${FORGE} is missing: build first (scripts/bootstrap)`);
  const work = mkdtempSync(join(tmpdir(), "console-test-"));
  const base = {
    ...process.env,
    HOME: join(work, "home"),
    FORGE_STORAGE_ROOT: join(work, "root"),
    ...env,
  };
  delete base.XDG_CONFIG_HOME;
  delete base.FORGE_TOKEN;
  delete base.FORGE_SERVER;
  mkdirSync(base.HOME, { recursive: true });
  if (before) before(base);
  const token = (user, admin = false) =>
    execFileSync(FORGE, ["token", "create", "--user", user, ...(admin ? ["--admin"] : [])], { env: base })
      .toString()
      .trim();
  const tokens = { admin: token("admin", true) };
  for (const u of users) tokens[u] = token(u);
  const portFile = join(work, "port");
  const log = join(work, "serve.log");
  const server = spawn(
    FORGE,
    ["serve", "--listen", "127.0.0.1:0", "--port-file", portFile, "--resync-ms", "200", "--cancel-grace-s", "3"],
    { env: base, stdio: ["ignore", "ignore", "pipe"] },
  );
  const errChunks = [];
  server.stderr.on("data", (d) => errChunks.push(d));
  let exited = null;
  server.on("exit", (code, sig) => (exited = `${code ?? sig}`));
  const port = await waitFor("forge serve's port file", () => {
    if (exited) throw new Error(`forge serve exited (${exited}): ${Buffer.concat(errChunks).toString().slice(-2000)}`);
    return existsSync(portFile) && readFileSync(portFile, "utf8").trim();
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor("readyz", async () => (await fetch(`${url}/readyz`)).ok);

  // Submits through the CLI (the same API the console uses) as `user`.
  const submit = (user, spec, files) => {
    const dir = mkdtempSync(join(work, "code-"));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    writeFileSync(join(dir, "job.yaml"), spec);
    const out = execFileSync(FORGE, ["submit", join(dir, "job.yaml"), "--code", dir, "-o", "name"], {
      env: { ...base, FORGE_SERVER: url, FORGE_TOKEN: tokens[user] },
    });
    return out.toString().trim().replace(/^job\//, "");
  };
  // Runs `forge ARGS` as `user` against this server; returns its standard output.
  const cli = (user, args) =>
    execFileSync(FORGE, args, { env: { ...base, FORGE_SERVER: url, FORGE_TOKEN: tokens[user] } }).toString();
  const api = async (user, path, init = {}) => {
    const res = await fetch(url + path, { ...init, headers: { Authorization: `Bearer ${tokens[user]}`, ...(init.headers ?? {}) } });
    return { status: res.status, headers: res.headers, body: await res.text() };
  };
  const stop = async () => {
    if (!exited) {
      server.kill("SIGTERM");
      await waitFor("forge serve to stop", () => exited !== null, 30).catch(() => server.kill("SIGKILL"));
    }
    rmSync(work, { recursive: true, force: true });
  };
  return { url, tokens, submit, cli, api, stop, work, log: () => Buffer.concat(errChunks).toString() };
}

export async function launchChromium() {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `${CHROMIUM} is missing: the console's browser tests need Debian's chromium package (scripts/bootstrap installs it from scripts/deps.txt)`,
    );
  // playwright-core gives every launch() a fresh, empty profile (--user-data-dir) of its own.
  // Chromium logs to a file of its own, printed if the browser goes away before the test closes
  // it: a test failing with "browser has been closed" then says why (a crash, a signal).
  const logDir = mkdtempSync(join(tmpdir(), "console-chromium-"));
  const logFile = join(logDir, "chrome.log");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--enable-logging",
      `--log-file=${logFile}`,
    ],
  });
  let closing = false;
  browser.on("disconnected", () => {
    if (closing) return;
    const log = existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n").slice(-40).join("\n") : "(no log)";
    console.error(`chromium went away before the test closed it; the end of its log:\n${log}`);
  });
  const close = async () => {
    closing = true;
    await browser.close();
    rmSync(logDir, { recursive: true, force: true });
  };
  return { browser, close };
}

// A browser context as the tests use it: a laptop-sized window, and waits long enough for a
// machine busy with the rest of the suite (ctest -j2).
export async function newContext(browser, opts = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, ...opts });
  context.setDefaultTimeout(60_000);
  return context;
}

// A page signed in as `token` (through the sign-in form, as a person would).
export async function signedIn(browser, url, token, opts = {}) {
  const context = await newContext(browser, opts);
  const page = await context.newPage();
  page.on("pageerror", (e) => console.error(`page error: ${e.message}`));
  await page.goto(`${url}/jobs`);
  await page.getByLabel("API token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("button", { name: "Sign out" }).waitFor();
  return page;
}

export async function screenshot(page, name, opts = { fullPage: true }) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, ...opts });
  return file;
}

// Starts a peer that writes its port to `portFile`; returns {url, stop}.
export async function startPeer(what, cmd, args, portFile, env = process.env) {
  const child = spawn(cmd, args, { env, stdio: ["ignore", "ignore", "pipe"] });
  const err = [];
  child.stderr.on("data", (d) => err.push(d));
  let exited = null;
  child.on("exit", (code, sig) => (exited = `${code ?? sig}`));
  const port = await waitFor(`${what}'s port file`, () => {
    if (exited) throw new Error(`${what} exited (${exited}): ${Buffer.concat(err).toString().slice(-2000)}`);
    return existsSync(portFile) && readFileSync(portFile, "utf8").trim();
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      if (exited) return;
      child.kill("SIGTERM");
      await waitFor(`${what} to stop`, () => exited !== null, 20).catch(() => child.kill("SIGKILL"));
    },
  };
}

// Controls with no name a screen reader could say (no <label>, aria-label or aria-labelledby).
export async function unlabelledControls(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea, button")]
      .filter((el) => !el.labels?.length && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby") && !(el.tagName === "BUTTON" && el.textContent.trim()))
      .map((el) => el.outerHTML.slice(0, 80)),
  );
}
