// The console in Chromium against `forge serve` on the local fleet: serving (CSP, types, SPA
// fallback), sign in / out, submitting a code folder and watching the job succeed with its log,
// validation errors at field paths, cancel from the detail page, another user's job not
// reachable by URL, the capacity page. Screenshots go to BUILD/test-artifacts/console/.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { gzipSync } from "node:zlib";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { BUILD, launchChromium, newContext, screenshot, signedIn, startForge, unlabelledControls, waitFor } from "./lib.mjs";

const SLEEPER = `name: sleeper
fleet: local
image: python:3.11-slim
entrypoint: python3 sleep.py
pools:
  - name: main
`;
const SLEEP_PY = `import time
for i in range(600):
    print(f"tick {i}", flush=True)
    time.sleep(0.5)
`;

describe("console on the local fleet", () => {
  let forge;
  let chrome;
  before(async () => {
    forge = await startForge();
    chrome = await launchChromium();
  });
  after(async () => {
    await chrome?.close();
    await forge?.stop();
  });

  test("the server serves the console with a strict CSP, right types and an SPA fallback", async () => {
    const root = await fetch(`${forge.url}/`);
    assert.equal(root.status, 200);
    assert.match(root.headers.get("content-type"), /^text\/html/);
    const csp = root.headers.get("content-security-policy");
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(root.headers.get("cache-control"), "no-cache");
    const html = await root.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, "no inline script in index.html");
    const js = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    assert.ok(js, "index.html loads a hashed script");
    const asset = await fetch(forge.url + js);
    assert.equal(asset.status, 200);
    assert.match(asset.headers.get("content-type"), /^text\/javascript/);
    assert.match(asset.headers.get("cache-control"), /immutable/);
    // The whole console (page, scripts, styles) stays within its 200 KB gzipped budget.
    const assets = [...html.matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1]);
    let gz = gzipSync(html).length;
    for (const a of assets) gz += gzipSync(Buffer.from(await (await fetch(forge.url + a)).arrayBuffer())).length;
    console.log(`console bundle: ${assets.length + 1} files, ${(gz / 1024).toFixed(1)} KiB gzipped`);
    assert.ok(gz < 200 * 1024, `the console is ${gz} bytes gzipped, over 200 KB`);
    // A client route gets the page; a missing asset and an unknown API path do not.
    const route = await fetch(`${forge.url}/jobs/j-whatever`);
    assert.equal(route.status, 200);
    assert.equal(await route.text(), html);
    assert.equal((await fetch(`${forge.url}/assets/nope.js`)).status, 404);
    const api = await fetch(`${forge.url}/api/v1/nope`);
    assert.equal(api.status, 404);
    assert.match(api.headers.get("content-type"), /^application\/json/);
  });

  test("sign in with a token, which stays out of the URL and the markup; sign out", async () => {
    const context = await newContext(chrome.browser);
    const page = await context.newPage();
    const cspViolations = [];
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    await page.goto(`${forge.url}/`);
    await page.getByLabel("API token").waitFor();
    await screenshot(page, "signin");
    await page.getByLabel("API token").fill("sf_not_a_valid_token_at_all");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("That token is not valid.").waitFor();
    // By keyboard: the token field has focus again; Enter signs in.
    await page.keyboard.press("Control+A");
    await page.keyboard.type(forge.tokens.alice);
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Your jobs" }).waitFor();
    assert.deepEqual(await unlabelledControls(page), []);
    // Tab order reaches the navigation; Enter on "Capacity" opens it.
    let reached = false;
    for (let i = 0; i < 10 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = await page.evaluate(() => document.activeElement?.textContent === "Capacity");
    }
    assert.ok(reached, "Capacity is reachable with Tab");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Capacity" }).waitFor();
    await page.goBack();
    await page.getByRole("heading", { name: "Your jobs" }).waitFor();
    assert.equal(await page.locator("#whoami").textContent(), "alice");
    assert.ok(!page.url().includes(forge.tokens.alice));
    assert.ok(!(await page.content()).includes(forge.tokens.alice), "the token is not in the DOM");
    assert.ok(!forge.log().includes(forge.tokens.alice), "the token is not in the server's log");
    // First paint of the jobs page on loopback, as Chromium measured it (a figure, not a test).
    await page.reload();
    await page.getByRole("heading", { name: "Your jobs" }).waitFor();
    const paint = await page.evaluate(() => {
      const fcp = performance.getEntriesByName("first-contentful-paint")[0];
      const nav = performance.getEntriesByType("navigation")[0];
      return { fcp: fcp?.startTime, domContentLoaded: nav?.domContentLoadedEventEnd };
    });
    console.log(`first contentful paint of /jobs on loopback: ${paint.fcp?.toFixed(0)} ms (DOMContentLoaded ${paint.domContentLoaded?.toFixed(0)} ms)`);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API token").waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    assert.deepEqual(cspViolations, []);
    await context.close();
  });

  test("forge console --login gives a link that signs in once, without the token in any URL", async () => {
    const link = forge.cli("alice", ["console", "--login"]).trim();
    assert.match(link, new RegExp(`^${forge.url}/#login=[a-z0-9]{32}$`));
    const context = await newContext(chrome.browser);
    const page = await context.newPage();
    await page.goto(link);
    await page.getByRole("heading", { name: "Your jobs" }).waitFor();
    assert.equal(await page.locator("#whoami").textContent(), "alice");
    assert.ok(!page.url().includes("#login"), "the code is taken out of the address");
    assert.ok(!forge.log().includes(link.split("=")[1]), "the code is not in the server's log");
    await context.close();
    // The same link again: used up.
    const again = await (await newContext(chrome.browser)).newPage();
    await again.goto(link);
    await again.getByText(/used up or expired/).waitFor();
    await again.context().close();
  });

  test("submit a code folder, see validation errors at their paths, then the job succeed with its log", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    const dir = mkdtempSync(join(tmpdir(), "console-code-"));
    mkdirSync(join(dir, "train"));
    mkdirSync(join(dir, "__pycache__"));
    writeFileSync(join(dir, "train", "main.py"), 'for i in range(3):\n    print(f"loss {1.0 / (i + 1):.3f}", flush=True)\nprint("trained from the console")\n');
    writeFileSync(join(dir, "__pycache__", "x.pyc"), "junk");
    await page.getByRole("link", { name: "Submit", exact: true }).click();
    assert.deepEqual(await unlabelledControls(page), []);
    await page.getByLabel("A folder").setInputFiles(dir);
    await page.locator("#code-info").getByText(/^1 file \(/).waitFor();
    // A JobSpec with two mistakes: both are listed with their field paths and lines.
    await page.getByLabel("JobSpec (YAML or JSON)").fill(`name: from-console
fleet: local
image: python:3.11-slim
entrypoint: python3 train/main.py
pools:
  - name: main
    gpusPerMachine: -1
    machinez: 1
`);
    await page.getByRole("button", { name: "Submit", exact: true }).click();
    const errors = page.locator("#spec-errors li");
    await errors.first().waitFor();
    const fields = await errors.evaluateAll((els) => els.map((e) => e.getAttribute("data-field")));
    assert.ok(fields.includes("pools[0].gpusPerMachine"), `errors at ${fields}`);
    assert.ok(fields.includes("pools[0].machinez"), `errors at ${fields}`);
    assert.match(await page.locator("#spec-errors").textContent(), /pools\[0\]\.gpusPerMachine \(line 7\)/);
    await screenshot(page, "submit-errors");
    // A valid job the local fleet can never run: the fleet's refusal, naming the field.
    await page.getByLabel("JobSpec (YAML or JSON)").fill(`name: from-console
fleet: local
image: python:3.11-slim
entrypoint: python3 train/main.py
pools:
  - name: main
    machines: 2
`);
    await page.getByRole("button", { name: "Submit", exact: true }).click();
    await page.locator("#spec-errors").getByText("The fleet refused this job:").waitFor();

    await page.getByLabel("JobSpec (YAML or JSON)").fill(`name: from-console
fleet: local
image: python:3.11-slim
entrypoint: python3 train/main.py
pools:
  - name: main
`);
    await page.getByRole("button", { name: "Submit", exact: true }).click();
    await page.waitForURL(/\/jobs\/j-/);
    await page.locator("#status-line").getByText("Succeeded").waitFor({ timeout: 60_000 });
    await page.locator("#log").getByText("trained from the console").waitFor({ timeout: 30_000 });
    assert.match(await page.locator("#log").textContent(), /loss 1\.000\nloss 0\.500\nloss 0\.333\n/);
    // The event view and the timeline are there; the job list shows it.
    await page.locator("#events tbody tr").first().waitFor();
    assert.ok((await page.locator("#timeline .seg").count()) >= 4);
    // The local fleet's runner log is among the files kept beside driver.log.
    await page.locator('#archive button[data-file="runner.log"]').waitFor({ timeout: 30_000 });
    // The capsule's file list, from its manifest: the folder's file, not what the page left out.
    await page.locator("#capsule-files summary").click();
    await page.locator("#capsule-files td", { hasText: "train/main.py" }).waitFor();
    const listed = await page.locator("#capsule-files").textContent();
    assert.match(listed, /\.starforge\/jobspec\.json/);
    assert.doesNotMatch(listed, /__pycache__/);
    assert.match(await page.locator("#capsule").textContent(), /Files1 of yours \+ \d+ of StarForge's/);
    await page.locator("#log-search").fill("0.5");
    await page.locator("#log-status").getByText("1 matching line").waitFor();
    await page.locator("#log-search").fill("");
    await page.locator("#log-status").getByText("4 lines; the job ended Succeeded (exit 0)").waitFor();
    await screenshot(page, "job-succeeded");
    await page.getByRole("link", { name: "Jobs", exact: true }).first().click();
    await page.locator("tr", { hasText: "from-console" }).getByText("Succeeded").waitFor();
    await screenshot(page, "jobs");
    await page.context().close();
  });

  test("cancel a running job from its detail page", async () => {
    const id = forge.submit("alice", SLEEPER, { "sleep.py": SLEEP_PY });
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.goto(`${forge.url}/jobs/${id}`);
    await page.locator("#log").getByText("tick 2").waitFor({ timeout: 60_000 });
    await page.getByRole("button", { name: "Cancel job…" }).click();
    await page.getByRole("button", { name: "Yes, cancel it" }).click();
    await page.locator("#status-line").getByText("Cancelled").waitFor({ timeout: 60_000 });
    await page.locator("#events").getByText("CancelRequested").waitFor();
    const job = JSON.parse((await forge.api("alice", `/api/v1/jobs/${id}`)).body);
    assert.equal(job.phase, "Cancelled");
    await page.context().close();
  });

  test("another user's job is not reachable by URL, nor listed", async () => {
    const bobs = forge.submit("bob", SLEEPER.replace("sleeper", "bobs-job"), { "sleep.py": "print('bob')\n" });
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.goto(`${forge.url}/jobs/${bobs}`);
    await page.getByRole("heading", { name: "Job not found" }).waitFor();
    assert.ok(!(await page.content()).includes("bobs-job"));
    await page.goto(`${forge.url}/jobs`);
    await page.locator("#jobs-status").getByText(/All \d+ jobs?\.|No jobs/).waitFor();
    assert.equal(await page.locator(`tr[data-job="${bobs}"]`).count(), 0);
    await page.context().close();
    // The admin sees it, and can filter by owner.
    const admin = await signedIn(chrome.browser, forge.url, forge.tokens.admin);
    await admin.goto(`${forge.url}/jobs?owner=bob`);
    await admin.locator(`tr[data-job="${bobs}"]`).waitFor();
    assert.equal(await admin.locator("tbody tr").count(), 1);
    await admin.context().close();
  });

  test("the jobs table and the job page follow the API's watch streams, without polling", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.locator("#jobs-status").getByText(/Live\./).waitFor();
    const reads = [];
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith("/api/v1/jobs") && !u.searchParams.has("watch")) reads.push(u.pathname + u.search);
    });
    // A job submitted elsewhere (the CLI) appears at the top and walks to Succeeded.
    const id = forge.submit("alice", SLEEPER.replace("sleeper", "watched"), { "sleep.py": "print('watched')\n" });
    const row = page.locator(`tr[data-job="${id}"]`);
    await row.getByText("Succeeded").waitFor({ timeout: 60_000 });
    assert.equal(await page.locator("tbody tr[data-job]").first().getAttribute("data-job"), id, "the new job is on top");
    assert.deepEqual(reads, [], "the table was not read again: the watch brought the changes");
    // Its page: the detail and the events come over the job's watch, not GET /jobs/{id} or /events.
    await row.getByRole("link").click();
    await page.locator("#status-line").getByText("Succeeded").waitFor();
    await page.locator("#events tbody tr").first().waitFor();
    await page.locator("#log").getByText("watched").waitFor();
    const detailReads = reads.filter((r) => r === `/api/v1/jobs/${id}` || r.endsWith("/events"));
    assert.deepEqual(detailReads, []);
    await page.context().close();
  });

  test("a hidden tab holds no watch stream, and catches up when shown again", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.locator("#jobs-status").getByText(/Live\./).waitFor();
    const setHidden = (hidden) =>
      page.evaluate((h) => {
        Object.defineProperty(document, "hidden", { value: h, configurable: true });
        document.dispatchEvent(new Event("visibilitychange"));
      }, hidden);
    const closed = page.waitForEvent("requestfailed", (r) => r.url().includes("watch=1"));
    await setHidden(true);
    await closed;
    // A job runs to its end while nobody looks: the hidden page does not hear of it.
    const id = forge.submit("alice", SLEEPER.replace("sleeper", "unseen"), { "sleep.py": "print('unseen')\n" });
    await waitFor("the job to end", async () => JSON.parse((await forge.api("alice", `/api/v1/jobs/${id}`)).body).cleanup?.released, 60);
    assert.equal(await page.locator(`tr[data-job="${id}"]`).count(), 0);
    const reopened = page.waitForRequest((r) => r.url().includes("watch=1"));
    await setHidden(false);
    await reopened;
    await page.locator(`tr[data-job="${id}"]`).getByText("Succeeded").waitFor();
    await page.locator("#jobs-status").getByText(/Live\./).waitFor();
    await page.context().close();
  });

  test("without the watch streams (an older server, a buffering proxy) the console polls", async () => {
    const context = await newContext(chrome.browser);
    // The API as a server without watches answers: 400 for the unknown parameter.
    await context.route(/\/api\/v1\/jobs[^?]*\?(.*&)?watch=1/, (r) =>
      r.fulfill({ status: 400, contentType: "application/json", body: '{"error":"BadRequest","message":"unknown query parameter \\"watch\\""}' }),
    );
    const page = await context.newPage();
    await page.goto(`${forge.url}/jobs`);
    await page.getByLabel("API token").fill(forge.tokens.alice);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#jobs-status").getByText(/every 2 s/).waitFor();
    const id = forge.submit("alice", SLEEPER.replace("sleeper", "polled"), { "sleep.py": "print('polled')\n" });
    await page.locator(`tr[data-job="${id}"]`).getByText("Succeeded").waitFor({ timeout: 60_000 });
    await page.goto(`${forge.url}/jobs/${id}`);
    await page.locator("#status-line").getByText("Succeeded").waitFor();
    await page.locator("#events tbody tr").first().waitFor();
    await context.close();
  });

  test("the capacity page shows the API's numbers and follows the capacity watch, without polling", async () => {
    const cap = JSON.parse((await forge.api("alice", "/api/v1/capacity")).body).fleets.find((f) => f.fleet === "local");
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    const reads = [];
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (u.pathname === "/api/v1/capacity" && !u.searchParams.has("watch")) reads.push(u.search);
    });
    await page.getByRole("link", { name: "Capacity" }).click();
    const card = page.locator('[data-fleet="local"]');
    await card.waitFor();
    assert.match(await card.textContent(), new RegExp(`/ ${cap.cpus} in use`));
    await page.locator("#capacity-status").getByText("Live.").waitFor();
    await card.getByText(/· 0 running/).waitFor();
    // A job started elsewhere (the CLI) takes a CPU: the page shows it with no request but the
    // watch's stream, and gives it back when the job is cancelled.
    const id = forge.submit("alice", SLEEPER.replace("sleeper", "capacity-held"), { "sleep.py": SLEEP_PY });
    await card.getByText(/· 1 running/).waitFor({ timeout: 60_000 });
    await card.locator("td", { hasText: id }).waitFor();
    await screenshot(page, "capacity-local");
    await forge.api("alice", `/api/v1/jobs/${id}/cancel`, { method: "POST" });
    await card.getByText(/· 0 running/).waitFor({ timeout: 60_000 });
    assert.deepEqual(reads, [], "capacity was not re-read: the watch brought the changes");
    await page.context().close();
  });

  test("without the capacity watch the capacity page polls", async () => {
    const context = await newContext(chrome.browser);
    // The API as a server without the capacity watch answers: 400 for the unknown parameter.
    await context.route(/\/api\/v1\/capacity\?(.*&)?watch=1/, (r) =>
      r.fulfill({ status: 400, contentType: "application/json", body: '{"error":"BadRequest","message":"unknown query parameter \\"watch\\""}' }),
    );
    const page = await context.newPage();
    await page.goto(`${forge.url}/capacity`);
    await page.getByLabel("API token").fill(forge.tokens.alice);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator("#capacity-status").getByText(/every 5 s/).waitFor();
    await page.locator('[data-fleet="local"]').getByText(/· 0 running/).waitFor();
    await context.close();
  });
});

// 10,000 jobs: the table loads pages of the API's cursor as it is scrolled and keeps only the rows
// in view in the page, so the last (oldest) job is reached with a bounded DOM.
describe("console with 10,000 jobs", () => {
  const N = 10_000;
  let forge;
  let chrome;
  // The store on tmpfs: 20,000 durable transactions to seed it cost little there.
  const state = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "console-10k-"));
  before(async () => {
    const seed = process.env.STARFORGE_SEED_JOBS ?? join(BUILD, "tests", "console_seed_jobs");
    forge = await startForge({ FORGE_STATE_DIR: state }, ["carol"], {
      before: () => execFileSync(seed, [join(state, "starforge.db"), "carol", String(N)]),
    });
    chrome = await launchChromium();
  });
  after(async () => {
    await chrome?.close();
    await forge?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  test("scrolling reaches the oldest of 10,000 jobs with at most a screenful of rows in the page", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.carol);
    const listReads = [];
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (u.pathname === "/api/v1/jobs" && !u.searchParams.has("watch")) listReads.push(Number(u.searchParams.get("limit")));
    });
    await page.locator("#jobs-status").getByText(/^200 newest jobs loaded/).waitFor();
    const rendered = () => page.locator("tbody tr[data-job]").count();
    assert.equal(await page.locator("tbody tr[data-job] a").first().textContent(), "seed-09999");
    const first = await rendered();
    assert.ok(first > 0 && first <= 60, `${first} rows in the page`);
    await screenshot(page, "jobs-10000", { fullPage: false });
    // Scroll to the end of what is loaded, again and again, until the oldest job is drawn.
    await page.waitForFunction(
      () => {
        const box = document.getElementById("jobs-scroll");
        box.scrollTop = box.scrollHeight;
        return [...document.querySelectorAll("tbody tr[data-job] a")].some((a) => a.textContent === "seed-00000");
      },
      null,
      { polling: 100, timeout: 300_000 },
    );
    await page.locator("#jobs-status").getByText(`All ${N} jobs.`).waitFor();
    const last = await rendered();
    assert.ok(last <= 60, `${last} rows in the page at the end`);
    assert.equal(await page.locator("tbody tr[data-job]").last().getAttribute("aria-rowindex"), String(N + 1));
    assert.equal(await page.locator("tbody tr[data-job] a").last().textContent(), "seed-00000");
    assert.equal(await page.locator("table.jobs").getAttribute("aria-rowcount"), String(N + 1));
    // Page by page, never everything at once.
    assert.ok(listReads.length >= N / 200 - 1, `${listReads.length} list requests`);
    assert.ok(listReads.every((l) => l === 200), `limits ${listReads}`);
    // Back at the top, the newest job is drawn again; a part of a name narrows the 10,000 to the
    // ten that contain it (the server's index: kept in the URL), newest first.
    await page.locator("#jobs-scroll").evaluate((box) => (box.scrollTop = 0));
    await page.locator("tbody tr[data-job] a", { hasText: "seed-09999" }).waitFor();
    await page.getByLabel("Name").fill("D-0424");
    await page.getByLabel("Name").press("Enter");
    await page.locator("#jobs-status").getByText("All 10 jobs.").waitFor();
    assert.equal(await rendered(), 10);
    assert.equal(await page.locator("tbody tr[data-job] a").first().textContent(), "seed-04249");
    assert.equal(await page.locator("tbody tr[data-job] a").last().textContent(), "seed-04240");
    assert.match(page.url(), /[?&]nameContains=D-0424(&|$)/);
    await page.getByLabel("Name").fill("seed-04242");
    await page.getByLabel("Name").press("Enter");
    await page.locator("#jobs-status").getByText("All 1 job.").waitFor();
    assert.equal(await rendered(), 1);
    await page.context().close();
  });
});
