// The REST API client (docs/api.md). The token lives in sessionStorage only: it is sent in the
// Authorization header, never in a URL, and never written to the page.
import type { components, paths } from "./wire.gen";

const TOKEN_KEY = "starforge.token";

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}
export function setToken(t: string | null): void {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export type FieldError = components["schemas"]["FieldError"];

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly kind: string,
    message: string,
    readonly field?: string,
    readonly errors: FieldError[] = [],
  ) {
    super(message);
  }
}

// Called when the server says the token is not (or no longer) valid.
let onUnauthorized: () => void = () => {};
export function setUnauthorizedHandler(f: () => void): void {
  onUnauthorized = f;
}

// For requests made without request() (the upload's XMLHttpRequest): a 401 signs out.
export function unauthorized(): void {
  onUnauthorized();
}

export function authHeaders(t = token()): Record<string, string> {
  return t ? { Authorization: `Bearer ${t}` } : {};
}

export async function errorFrom(status: number, text: string): Promise<ApiError> {
  try {
    const j = JSON.parse(text) as Partial<ErrorBody>;
    return new ApiError(status, j.error ?? "Error", j.message ?? text, j.field, j.errors ?? []);
  } catch {
    return new ApiError(status, "Error", text || `HTTP ${status}`);
  }
}

export async function request(path: string, init: RequestInit = {}, t = token()): Promise<Response> {
  const res = await fetch(path, {
    ...init,
    headers: { ...authHeaders(t), ...(init.headers as Record<string, string>) },
    cache: "no-store",
  });
  if (!res.ok) {
    const err = await errorFrom(res.status, await res.text());
    if (res.status === 401 && t === token()) onUnauthorized();
    throw err;
  }
  return res;
}

export async function getJson<T>(path: string, t = token()): Promise<T> {
  return (await request(path, {}, t)).json() as Promise<T>;
}

export async function postJson<T>(path: string): Promise<T> {
  return (await request(path, { method: "POST" })).json() as Promise<T>;
}

// ---- the shapes the console reads: src/api/openapi.json's, generated into wire.gen.ts ----
// (npm run wire-types; src/wire.test.ts fails when wire.gen.ts is stale). Named here, not written
// here: only the kuberay capacity's detail, which the schema leaves open, is spelled out below.

type Schemas = components["schemas"];

export type ErrorBody = Schemas["Error"];
export type Phase = Schemas["Phase"];
// The phases in lifecycle order; a Record so that a phase the schema adds or drops fails to
// compile here.
const PHASE_ORDER: Record<Phase, null> = {
  Queued: null,
  Packaging: null,
  Submitting: null,
  Pending: null,
  Running: null,
  Succeeded: null,
  Failed: null,
  Cancelled: null,
};
export const PHASES = Object.keys(PHASE_ORDER) as Phase[];
export const TERMINAL: ReadonlySet<string> = new Set<Phase>(["Succeeded", "Failed", "Cancelled"]);

export type Transition = Schemas["Transition"];
// A job as listed and watched (GET /api/v1/jobs, its watch's `job` events, the cancel's answer).
export type Job = Schemas["Job"];
// One job (GET /api/v1/jobs/{id} and its watch's `job` event): with its spec and timeline.
export type JobDetail = Schemas["JobDetail"];
// POST /api/v1/jobs: the created job, with its canonical spec.
export type JobWithSpec = Schemas["JobWithSpec"];
export type JobList = Schemas["JobList"];
export type JobEvent = Schemas["Event"];
export type EventList = Schemas["EventList"];
export type Artifacts = Schemas["Artifacts"];
// GET /api/v1/jobs/{id}/capsule: the file list of the capsule's manifest.
export type CapsuleInfo = Schemas["CapsuleInfo"];
export type Whoami = Schemas["Whoami"];
export type LoginToken = Schemas["LoginToken"];
export type LogEnd = Schemas["LogEnd"];
// GET /api/v1/jobs/{id}/metrics (the schema's inline answer; each event of its follow).
export type MetricsAnswer = paths["/api/v1/jobs/{id}/metrics"]["get"]["responses"][200]["content"]["application/json"];

// GET /api/v1/capacity, and each event of its watch.
export type Capacity = Schemas["Capacity"];
export type FleetCapacity = Capacity["fleets"][number];
export type LocalFleetCapacity = Schemas["LocalFleetCapacity"];
export type FleetUnavailable = Schemas["FleetUnavailable"];
export type FleetCapacityError = Schemas["FleetCapacityError"];
// The kuberay fleet's numbers per card series. The schema leaves KubeRayFleetCapacity open
// (additionalProperties) beyond fleet and namespace, so what the console reads of it is spelled
// here, as src/kuberay/capacity.cc (ToJson) sends it, until openapi.json describes it.
export interface Gpus {
  capacity: number;
  allocatable: number;
  requested: number;
  free: number;
}
export interface NodeCapacity {
  name: string;
  gpus: Gpus;
  pods: number;
  schedulable: boolean;
  blocked: string[];
}
export interface SeriesCapacity {
  series: string;
  nodes: number;
  gpus: Gpus;
  blockedNodes: number;
  maxGpusPerNode: number;
  nodeDetail: NodeCapacity[];
}
export type KubeRayFleetCapacity = Schemas["KubeRayFleetCapacity"] & { gpuNodeLabel?: string; series?: SeriesCapacity[] };

// Which of the capacity answer's kinds of entry `f` is.
export function fleetUnavailable(f: FleetCapacity): f is FleetUnavailable {
  return "available" in f && f.available === false;
}
export function fleetError(f: FleetCapacity): f is FleetCapacityError {
  return !fleetUnavailable(f) && "error" in f && typeof f.error === "string";
}
export function kuberayFleet(f: FleetCapacity): f is KubeRayFleetCapacity {
  return !fleetUnavailable(f) && !fleetError(f) && f.fleet === "kuberay";
}
export function localFleet(f: FleetCapacity): f is LocalFleetCapacity {
  return !fleetUnavailable(f) && !fleetError(f) && f.fleet === "local";
}

// GET /api/v1/playgrounds/{id} (docs/api.md, Playgrounds); PlaygroundSpec is also the body of
// POST /api/v1/playgrounds.
export type PlaygroundSpec = Schemas["PlaygroundSpec"];
export type Playground = Schemas["Playground"];
export type PlaygroundList = Schemas["PlaygroundList"];
export type PlaygroundFleet = PlaygroundList["fleets"][number];
// GET /api/v1/playgrounds/{id}/events: the Kubernetes events of a playground that is not Ready.
export type PlaygroundEvent = Schemas["PlaygroundEvent"];
export type PlaygroundEventList = Schemas["PlaygroundEventList"];

export async function sendJson<T>(method: string, path: string, body: unknown): Promise<T> {
  return (
    await request(path, { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
  ).json() as Promise<T>;
}
