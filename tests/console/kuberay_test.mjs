// The console against the kuberay fleet on kubesim (the API-server simulator with the KubeRay
// operator, scheduler and kubelet) and s3rver, set up as scripts/e2e/kuberay_loop.py does: a job
// whose image does not exist shows ImagePullFailed at the top and the kubelet's and scheduler's
// events in the event view; the capacity page shows the cordoned h200 node as blocked, with the
// same numbers as GET /api/v1/capacity; a playground is started from its page, becomes Ready,
// answers in the chat box token by token (kubesim's vLLM emulator in its pod) and is stopped; a
// playground whose image does not exist shows ImagePullFailed and the kubelet's events.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { BUILD, launchChromium, screenshot, signedIn, startForge, startPeer, unlabelledControls, waitFor } from "./lib.mjs";

const VLLM_IMAGE = "vllm/vllm-openai:v0.11.0";

const NODES = `- metadata: {name: h200-a, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h200-b, labels: {starforge/gpu-series: h200}}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h200-c, labels: {starforge/gpu-series: h200}}
  spec: {unschedulable: true}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
- metadata: {name: h100-a, labels: {starforge/gpu-series: h100}}
  status:
    capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}
    allocatable: {cpu: "63", memory: 500Gi, nvidia.com/gpu: "8"}
`;

async function k8s(url, method, path, body, type = "application/json") {
  const res = await fetch(url + path, { method, headers: { "Content-Type": type }, body: JSON.stringify(body) });
  if (!res.ok && res.status !== 409) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
}

// kubesim (operator, scheduler, kubelet) + s3rver + forge serve, as scripts/e2e/kuberay_loop.py starts
// them, and Chromium. `images`: more images that exist; `env`: more forge settings; `emulators`:
// kubesim's emulators (bin/vllm: its vLLM emulator) first on the pods' PATH, as e2e.playground has.
async function startStack({ images = [], env = {}, emulators = false } = {}) {
  const st = {};
  st.work = mkdtempSync(join(tmpdir(), "console-kuberay-"));
  const work = st.work;
  writeFileSync(join(work, "nodes.yaml"), NODES);
  writeFileSync(join(work, "images.yaml"), ['"python:*"', ...images.map((i) => `"${i}"`)].map((i) => `- ${i}\n`).join(""));
  mkdirSync(join(work, "pv", "starforge", "data"), { recursive: true });
  st.kubesim = await startPeer(
    "kubesim",
    join(BUILD, "bin", "kubesim"),
    ["--listen", "127.0.0.1:0", "--port-file", join(work, "kubesim.port"), "--nodes", join(work, "nodes.yaml"),
      "--controllers", "all", "--pv-root", join(work, "pv"), "--images", join(work, "images.yaml"), "--kubelet-backoff-ms", "500",
      ...(emulators ? ["--ray-bin-dir", resolve("tools/kubesim/ray/bin")] : [])],
    join(work, "kubesim.port"),
  );
  const k = st.kubesim.url;
  await k8s(k, "POST", "/api/v1/namespaces", { metadata: { name: "starforge" } });
  await k8s(k, "POST", "/api/v1/namespaces/starforge/persistentvolumeclaims", {
    metadata: { name: "data" },
    spec: { accessModes: ["ReadWriteMany"], resources: { requests: { storage: "1Gi" } } },
  });
  // kubesim, like kube-scheduler, places no pod on an unbound claim: bound as a provisioner would.
  await k8s(k, "PATCH", "/api/v1/namespaces/starforge/persistentvolumeclaims/data/status", { status: { phase: "Bound" } }, "application/merge-patch+json");
  st.s3 = await startPeer("s3peer", "node", ["tools/s3peer/s3peer.js", "--port-file", join(work, "s3.port"), "--bucket", "starforge"], join(work, "s3.port"));
  st.forge = await startForge({
    FORGE_STORAGE_ROOT: join(work, "pv", "starforge", "data"),
    FORGE_K8S_STORAGE_PVC: "data",
    FORGE_K8S_STORAGE_SHARED: "true",
    FORGE_K8S_API_SERVER: k,
    FORGE_K8S_NAMESPACE: "starforge",
    FORGE_KUBERAY_TTL_SECONDS: "60",
    FORGE_S3_ENDPOINT: st.s3.url,
    FORGE_S3_BUCKET: "starforge",
    FORGE_S3_ACCESS_KEY: "S3RVER",
    FORGE_S3_SECRET_KEY: "S3RVER",
    FORGE_DEFAULT_FLEET_KIND: "kuberay",
    ...env,
  });
  st.chrome = await launchChromium();
  st.stop = async () => {
    await st.chrome?.close();
    await st.forge?.stop();
    await st.s3?.stop();
    await st.kubesim?.stop();
    rmSync(work, { recursive: true, force: true });
  };
  return st;
}

describe("console on the kuberay fleet (kubesim)", () => {
  let stack, forge, chrome;
  before(async () => {
    stack = await startStack();
    ({ forge, chrome } = stack);
  });
  after(async () => {
    await stack?.stop();
  });

  test("a missing image shows ImagePullFailed and the Kubernetes events in the event view", async () => {
    const id = forge.submit(
      "alice",
      `name: bad-image
fleet: kuberay
image: registry.invalid/nope:1
entrypoint: python3 main.py
deadlines: {preRunningSeconds: 600}
pools:
  - {name: main, gpuSeries: h100, gpusPerMachine: 1}
`,
      { "main.py": "print('never')\n" },
    );
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.goto(`${forge.url}/jobs/${id}`);
    await page.locator("#status-line").getByText(/ImagePullFailed/).waitFor({ timeout: 90_000 });
    assert.match(await page.locator("#status-line").textContent(), /Pending/);
    // The kubelet's pull failure and the scheduler's placement, each with its object.
    const pull = page.locator("#events tbody tr", { hasText: /ErrImagePull|ImagePullBackOff|Failed to pull/ }).first();
    await pull.waitFor({ timeout: 30_000 });
    assert.match(await pull.textContent(), /Pod\//);
    await page.locator("#events tbody tr", { hasText: "Scheduled" }).first().waitFor({ timeout: 30_000 });
    await screenshot(page, "job-image-pull-failed", { fullPage: false }); // the top: line + events
    // What its pods request, as the API says and the RayJob asks: the head is the one machine.
    const head = page.locator('#pod-requests tr[data-group="head"]');
    await head.waitFor();
    const pods = JSON.parse((await forge.api("alice", `/api/v1/jobs/${id}`)).body).resources.pods;
    assert.deepEqual(pods.map((p) => [p.group, p.pool, p.pods]), [["head", "main", 1]]);
    assert.deepEqual(await head.locator("td").allTextContents(), ["head", "main", "1", "—", "—", String(pods[0].requests.gpus)]);
    await page.getByRole("button", { name: "Cancel job…" }).click();
    await page.getByRole("button", { name: "Yes, cancel it" }).click();
    await page.locator("#status-line").getByText("Cancelled").waitFor({ timeout: 90_000 });
    // After the end, the fleet's archive: the events it kept and the RayJob (shown as YAML).
    await page.locator('#archive button[data-file="events.json"]').waitFor({ timeout: 90_000 });
    await page.locator('#archive button[data-file="rayjob.json"]').click();
    await page.locator("#archive-view").getByText("kind: RayJob").waitFor();
    // The RayJob the fleet created asks for what the page said.
    const rayjob = JSON.parse((await forge.api("alice", `/api/v1/jobs/${id}/logs?file=rayjob.json`)).body);
    const requests = rayjob.spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].resources?.requests ?? {};
    assert.equal(Number(requests["nvidia.com/gpu"] ?? 0), pods[0].requests.gpus);
    assert.ok(!rayjob.spec.rayClusterSpec.workerGroupSpecs?.length, "one machine: the head alone");
    assert.doesNotMatch(await page.locator("#archive-view").textContent(), /X-Amz-Signature/i, "presigned URLs are redacted");
    // The capsule's file list, read from its manifest in S3 (s3rver), as on the local fleet.
    await page.locator("#capsule-files summary").click();
    await page.locator("#capsule-files td", { hasText: "main.py" }).first().waitFor();
    assert.match(await page.locator("#capsule").textContent(), /Files\d+ of yours \+ \d+ of StarForge.s/);
    await page.context().close();
  });

  test("a cordoned node shows its series as blocked, with the API's numbers", async () => {
    const api = JSON.parse((await forge.api("alice", "/api/v1/capacity")).body).fleets.find((f) => f.fleet === "kuberay");
    assert.ok(api && api.series, `kuberay capacity: ${JSON.stringify(api)}`);
    const h200 = api.series.find((s) => s.series === "h200");
    assert.equal(h200.blockedNodes, 1);
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.goto(`${forge.url}/capacity`);
    const series = page.locator('[data-series="h200"]');
    await series.waitFor();
    const num = async (k) => Number(await series.locator(`dd[data-k="${k}"]`).textContent());
    assert.equal(await num("blocked nodes"), h200.blockedNodes);
    assert.equal(await num("total"), h200.gpus.capacity);
    assert.equal(await num("allocatable"), h200.gpus.allocatable);
    assert.equal(await num("in use"), h200.gpus.requested);
    assert.equal(await num("free"), h200.gpus.free);
    assert.match(await series.locator('tr[data-node="h200-c"]').textContent(), /blocked: .*cordoned/);
    assert.match(await series.locator('tr[data-node="h200-a"]').textContent(), /schedulable/);
    await screenshot(page, "capacity-kuberay");
    await page.context().close();
  });

});

// Playgrounds on their own kubesim: the vLLM image exists there, and FORGE_IMAGE_VLLM names it.
describe("playgrounds in the console (kubesim)", () => {
  let stack, forge, chrome, kubesim;
  before(async () => {
    stack = await startStack({ images: [VLLM_IMAGE], env: { FORGE_IMAGE_VLLM: VLLM_IMAGE }, emulators: true });
    ({ forge, chrome, kubesim } = stack);
  });
  after(async () => {
    await stack?.stop();
  });

  test("a playground: started from its page, Ready, a chat answer streamed token by token, the TTL, extend, stop", async () => {
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    const cspViolations = [];
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    const chatRequests = [];
    page.on("request", (r) => {
      if (r.url().includes("/openai/v1/")) chatRequests.push({ url: r.url(), auth: r.headers().authorization ?? "" });
    });
    await page.getByRole("link", { name: "Playgrounds" }).click();
    await page.getByRole("heading", { name: "Start a playground" }).waitFor();
    assert.deepEqual(await unlabelledControls(page), []);
    // The form, filled and sent with the keyboard.
    await page.getByLabel("Model").fill("Qwen/Qwen2.5-0.5B-Instruct");
    await page.getByLabel("Card series").fill("h100");
    await page.getByLabel("GPUs").fill("1");
    await page.getByLabel("TTL").fill("10m");
    await page.getByLabel("TTL").press("Enter");
    await page.waitForURL(/\/playgrounds\/p-[a-z0-9]+$/);
    const id = /\/playgrounds\/(p-[a-z0-9]+)$/.exec(page.url())[1];
    await page.locator("#pg-status .phase", { hasText: "Ready" }).waitFor({ timeout: 180_000 });
    assert.deepEqual(await unlabelledControls(page), []);
    // The TTL counts down in the page.
    const left = async () => {
      const m = /Expires in (?:(\d+)h )?(?:(\d+)m )?(\d+)s/.exec(await page.locator("#pg-ttl-left").textContent());
      assert.ok(m, "the TTL is shown");
      return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3]);
    };
    const first = await left();
    assert.ok(first > 0 && first <= 600, `${first} s left of 10 min`);
    await waitFor("the TTL to count down", async () => (await left()) < first, 30);

    // A message sent with Enter; the answer grows in the page piece by piece as vLLM streams it.
    await page.evaluate(() => {
      window.__answers = [];
      new MutationObserver(() => {
        const a = [...document.querySelectorAll("#chat-log .chat-msg.assistant .chat-text")].pop();
        if (a && a.textContent && window.__answers.at(-1) !== a.textContent) window.__answers.push(a.textContent);
      }).observe(document.getElementById("chat-log"), { subtree: true, childList: true, characterData: true });
    });
    await page.getByLabel("Message").fill("hello console");
    await page.getByLabel("Message").press("Enter");
    await page.locator("#chat-log .chat-msg.assistant .chat-text", { hasText: "You said: hello console" }).waitFor({ timeout: 60_000 });
    await page.locator("#chat-send:not([disabled])").waitFor();
    const seen = await page.evaluate(() => window.__answers);
    assert.equal(seen.at(-1), "You said: hello console");
    assert.ok(seen.length >= 3, `the answer arrived in pieces, not at once: ${JSON.stringify(seen)}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].startsWith(seen[i - 1]), `each piece adds to the last: ${JSON.stringify(seen)}`);
    // Through the API's OpenAI route, the token in the header only.
    assert.ok(chatRequests.length >= 1);
    for (const r of chatRequests) {
      assert.match(r.url, new RegExp(`/api/v1/playgrounds/${id}/openai/v1/chat/completions$`));
      assert.ok(!r.url.includes(forge.tokens.alice), "the token is not in the URL");
      assert.equal(r.auth, `Bearer ${forge.tokens.alice}`);
    }
    assert.ok(!(await page.content()).includes(forge.tokens.alice), "the token is not in the page");
    await screenshot(page, "playground");

    // Extend: the end moves by the chosen time.
    const before = JSON.parse((await forge.api("alice", `/api/v1/playgrounds/${id}`)).body);
    await page.getByLabel("Extend by").selectOption({ label: "30 minutes" });
    await page.getByRole("button", { name: "Extend" }).click();
    await waitFor("the end to move", async () => {
      const now = JSON.parse((await forge.api("alice", `/api/v1/playgrounds/${id}`)).body);
      return Date.parse(now.expiresAt) - Date.parse(before.expiresAt) >= 1800 * 1000 - 1000;
    });
    await waitFor("the page to count from the new end", async () => (await left()) > 1800);

    // Another user cannot reach it by URL.
    const bob = await signedIn(chrome.browser, forge.url, forge.tokens.bob);
    await bob.goto(`${forge.url}/playgrounds/${id}`);
    await bob.getByRole("heading", { name: "Not found" }).waitFor();
    await bob.context().close();

    // The list shows it; then stop it from its page: its pod and service are deleted.
    await page.getByRole("link", { name: "Playgrounds" }).first().click();
    await page.locator(`tr[data-playground="${id}"]`).getByText("Ready").waitFor();
    await screenshot(page, "playgrounds");
    await page.locator(`tr[data-playground="${id}"] a`).click();
    await page.getByRole("button", { name: "Stop playground…" }).click();
    await page.getByRole("button", { name: "Yes, stop it" }).click();
    await page.locator("#pg-status .phase", { hasText: "Stopped" }).waitFor({ timeout: 60_000 });
    assert.ok(await page.locator("#chat-send").isDisabled(), "no chat with a stopped playground");
    await waitFor("the playground's pod and service to be deleted", async () => {
      const sel = encodeURIComponent(`starforge/playground-id=${id}`);
      const pods = await (await fetch(`${kubesim.url}/api/v1/namespaces/starforge/pods?labelSelector=${sel}`)).json();
      const svcs = await (await fetch(`${kubesim.url}/api/v1/namespaces/starforge/services?labelSelector=${sel}`)).json();
      return pods.items.length === 0 && svcs.items.length === 0;
    }, 60);
    assert.deepEqual(cspViolations, []);
    await page.context().close();
  });

  test("a playground whose image does not exist shows ImagePullFailed and the kubelet's events", async () => {
    const res = await forge.api("alice", "/api/v1/playgrounds", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "Qwen/Qwen2.5-0.5B-Instruct", series: "h100", gpus: 1, ttlSeconds: 600, image: "registry.invalid/vllm:0" }),
    });
    assert.equal(res.status, 201, res.body);
    const id = JSON.parse(res.body).id;
    const page = await signedIn(chrome.browser, forge.url, forge.tokens.alice);
    await page.goto(`${forge.url}/playgrounds/${id}`);
    await page.locator("#pg-status").getByText(/ImagePullFailed/).waitFor({ timeout: 90_000 });
    assert.match(await page.locator("#pg-status").textContent(), /Pending/);
    await page.locator("#pg-events tbody tr", { hasText: /ErrImagePull|ImagePullBackOff|Failed to pull/ }).first().waitFor({ timeout: 30_000 });
    assert.ok(await page.locator("#chat-input").isDisabled(), "no chat before Ready");
    await screenshot(page, "playground-image-pull-failed", { fullPage: false });
    await forge.api("alice", `/api/v1/playgrounds/${id}`, { method: "DELETE" });
    await page.locator("#pg-status .phase", { hasText: "Stopped" }).waitFor({ timeout: 60_000 });
    await page.context().close();
  });
});
