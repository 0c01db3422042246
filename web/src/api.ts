// The REST API client (docs/api.md). The token lives in sessionStorage only: it is sent in the
// Authorization header, never in a URL, and never written to the page.

const TOKEN_KEY = "starforge.token";

export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}
export function setToken(t: string | null): void {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export interface FieldError {
  field: string;
  message: string;
}

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
    const j = JSON.parse(text);
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

// ---- the shapes the console reads (docs/api.md) ----

export type Phase =
  | "Queued"
  | "Packaging"
  | "Submitting"
  | "Pending"
  | "Running"
  | "Succeeded"
  | "Failed"
  | "Cancelled";
export const PHASES: Phase[] = [
  "Queued",
  "Packaging",
  "Submitting",
  "Pending",
  "Running",
  "Succeeded",
  "Failed",
  "Cancelled",
];
export const TERMINAL: ReadonlySet<string> = new Set(["Succeeded", "Failed", "Cancelled"]);

export interface Transition {
  at: string;
  from: Phase | null;
  to: Phase;
  reason: string;
  message: string;
  cause: string;
}

export interface Job {
  id: string;
  name: string;
  owner: string;
  fleet: string;
  phase: Phase;
  reason: string;
  message: string;
  exitCode: number | null;
  capsule: { sha256: string; key: string } | null;
  cancelRequested: boolean;
  cleanup: { logsArchived: boolean; released: boolean };
  createdAt: string;
  updatedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  spec?: Record<string, unknown>;
  timeline?: Transition[];
}

export interface JobList {
  items: Job[];
  nextCursor: string | null;
}

export interface JobEvent {
  type: string;
  reason: string;
  message: string;
  source: string;
  count: number;
  firstAt: string;
  lastAt: string;
}

// GET /api/v1/jobs/{id}/capsule: the file list of the capsule's manifest.
export interface CapsuleInfo {
  sha256: string;
  key: string;
  size: number;
  userFiles: number;
  files: { path: string; size: number; sha256: string; executable: boolean; starforge: boolean }[];
}

export interface Whoami {
  user: string;
  admin: boolean;
}

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
export interface FleetCapacity {
  fleet: string;
  available?: boolean; // false: the fleet is not configured on this server
  message?: string;
  error?: string;
  // local
  host?: string;
  cpus?: number;
  gpus?: number;
  memoryBytes?: number;
  cpusInUse?: number;
  gpusInUse?: number;
  running?: number;
  waiting?: number;
  jobs?: { id: string; cpus: number; gpus: number; state: string }[];
  // kuberay
  namespace?: string;
  gpuNodeLabel?: string;
  series?: SeriesCapacity[];
}
