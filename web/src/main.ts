// The console's shell: sign-in, navigation and a client-side router over the History API.
// Every page is a function that renders into <main> and returns a cleanup (stops its polling).
import "./style.css";
import { ApiError, errorFrom, getJson, setToken, setUnauthorizedHandler, token, type LoginToken, type Whoami } from "./api";
import { clear, h, link } from "./dom";
import { HELP } from "./help";
import { capacityPage } from "./pages/capacity";
import { jobPage } from "./pages/job";
import { jobsPage } from "./pages/jobs";
import { playgroundPage } from "./pages/playground";
import { playgroundsPage } from "./pages/playgrounds";
import { submitPage } from "./pages/submit";

export interface Ctx {
  me: Whoami;
  main: HTMLElement;
  navigate: (path: string) => void;
}
export type Cleanup = () => void;

const app = document.getElementById("app")!;
let me: Whoami | null = null;
let cleanup: Cleanup = () => {};

function navigate(path: string, replace = false): void {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  // After following a link, keyboard and screen-reader users land on the new page, not on the
  // old page's link (a fresh page, such as after signing in, starts at the top as usual).
  void render().then(() => {
    const main = document.getElementById("main");
    if (!replace && main && !main.contains(document.activeElement)) main.focus({ preventScroll: true });
  });
}

// Links marked data-route are followed without a reload.
document.addEventListener("click", (ev) => {
  const a = (ev.target as Element | null)?.closest?.("a[data-route]") as HTMLAnchorElement | null;
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey)
    return;
  ev.preventDefault();
  navigate(a.getAttribute("href")!);
});
window.addEventListener("popstate", () => void render());

setUnauthorizedHandler(() => {
  setToken(null);
  me = null;
  void render("Your token is no longer valid; sign in again.");
});

function signOut(): void {
  setToken(null);
  me = null;
  navigate("/signin");
}

function signIn(notice = ""): void {
  document.title = "Sign in · StarForge";
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
    placeholder: "sf_…",
    "aria-describedby": "token-help",
  });
  const error = h("p", { class: "error", role: "alert", id: "signin-error" }, notice);
  const form = h(
    "form",
    { class: "signin card", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title" }, "StarForge"),
    h("label", { for: "token" }, "API token"),
    input,
    h(
      "p",
      { id: "token-help", class: "muted" },
      "Ask an admin for one (forge token create --user NAME), or use the one scripts/up printed. ",
      "It is kept in this tab only and sent as a bearer header.",
    ),
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    error,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    error.textContent = "";
    try {
      const who = await getJson<Whoami>("/api/v1/whoami", t);
      setToken(t);
      me = who;
      const from = ["/", "/signin"].includes(location.pathname) ? "/jobs" : location.pathname;
      navigate(from + location.search, true);
    } catch (e) {
      error.textContent =
        e instanceof ApiError && e.status === 401
          ? "That token is not valid."
          : `Cannot sign in: ${(e as Error).message}`;
      input.focus();
    }
  });
  clear(app, h("main", { id: "main", class: "center" }, form));
  input.focus();
}

function shell(): HTMLElement {
  const path = location.pathname;
  const nav = (href: string, label: string) =>
    h(
      "li",
      null,
      h(
        "a",
        {
          href,
          "data-route": "1",
          "aria-current": path === href || path.startsWith(`${href}/`) ? "page" : null,
        },
        label,
      ),
    );
  const main = h("main", { id: "main", tabindex: "-1" });
  clear(
    app,
    h("a", { class: "skip", href: "#main" }, "Skip to content"),
    h(
      "header",
      { class: "top" },
      link("/jobs", h("span", { class: "logo", "aria-hidden": "true" }, "✦"), " StarForge"),
      h(
        "nav",
        { "aria-label": "Console" },
        h("ul", null, nav("/jobs", "Jobs"), nav("/submit", "Submit"), nav("/playgrounds", "Playgrounds"), nav("/capacity", "Capacity")),
      ),
      h(
        "div",
        { class: "who" },
        h("span", { id: "whoami" }, me!.user, me!.admin ? " (admin)" : ""),
        h("button", { type: "button", id: "signout", onclick: signOut }, "Sign out"),
      ),
    ),
    main,
  );
  return main;
}

async function render(notice = ""): Promise<void> {
  cleanup();
  cleanup = () => {};
  const path = location.pathname;
  if (!token()) {
    // The URL stays: after signing in, the page asked for is shown.
    return signIn(notice);
  }
  if (!me) {
    try {
      me = await getJson<Whoami>("/api/v1/whoami");
    } catch (e) {
      if (!token()) return; // the unauthorized handler already showed the sign-in form
      clear(app, h("main", { class: "center" }, h("p", { class: "error" }, `Cannot reach StarForge: ${(e as Error).message}`)));
      return;
    }
  }
  if (path === "/" || path === "/signin") {
    history.replaceState(null, "", "/jobs");
    return render();
  }
  const main = shell();
  const ctx: Ctx = { me, main, navigate: (p) => navigate(p) };
  const jobMatch = /^\/jobs\/([^/]+)$/.exec(path);
  const playgroundMatch = /^\/playgrounds\/([^/]+)$/.exec(path);
  const helpMatch = /^\/help\/([a-z-]+)$/.exec(path);
  if (path === "/jobs") cleanup = jobsPage(ctx);
  else if (jobMatch) cleanup = jobPage(ctx, decodeURIComponent(jobMatch[1]));
  else if (path === "/submit") cleanup = submitPage(ctx);
  else if (path === "/capacity") cleanup = capacityPage(ctx);
  else if (path === "/playgrounds") cleanup = playgroundsPage(ctx);
  else if (playgroundMatch) cleanup = playgroundPage(ctx, decodeURIComponent(playgroundMatch[1]));
  else if (helpMatch && Object.hasOwn(HELP, helpMatch[1])) {
    // A section of the repository's documents, as built into the console (help.ts).
    const page = HELP[helpMatch[1]];
    document.title = `${page.title} · StarForge`;
    clear(
      main,
      h("p", { class: "crumbs" }, link(page.crumb[0], page.crumb[1]), ` / ${page.title}`),
      h("h1", null, page.title),
      h("p", { class: "muted" }, page.from),
      h("pre", { class: "code reference", id: page.id, tabindex: "0", "aria-label": page.title }, page.text),
    );
  } else {
    document.title = "Not found · StarForge";
    clear(main, h("h1", null, "Not found"), h("p", null, "No such page. ", link("/jobs", "Go to the jobs.")));
  }
}

// A link from `forge console --login` carries a one-time code in its #fragment (never sent to
// the server, so never in a log): it is taken out of the address at once and redeemed by POST
// for the token of the CLI that asked for it.
async function loginFromLink(): Promise<void> {
  const m = /^#login=([a-z0-9]+)$/.exec(location.hash);
  if (!m) return render();
  history.replaceState(null, "", location.pathname + location.search);
  try {
    const res = await fetch("/api/v1/console/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ code: m[1] }),
      cache: "no-store",
    });
    if (!res.ok) throw await errorFrom(res.status, await res.text());
    setToken(((await res.json()) as LoginToken).token);
    me = null;
    return render();
  } catch (e) {
    return render((e as Error).message);
  }
}

void loginFromLink();
