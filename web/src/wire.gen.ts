// GENERATED from src/api/openapi.json by openapi-typescript (web/scripts/wire-types.mjs):
// do not edit. Regenerate with `npm run wire-types` in web/; src/wire.test.ts fails when stale.
export interface paths {
    "/api/v1/jobs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List jobs, newest first; or watch them change (watch=1)
         * @description Without watch: a page of jobs and the list's `resourceVersion`. With watch=1: a `text/event-stream` of the jobs matching owner, fleet and name that are created or change after `resourceVersion` (or, without it, after the request): `id: <resourceVersion>` / `event: job` / `data: <Job>` (the job's state now, as in the list; a job changed several times between two looks is sent once); `: keep-alive` comments every 15 s of silence. When the server no longer holds every change since `resourceVersion`: `event: expired`, then the stream closes (list again, watch again from the new list). phase, limit and cursor are not taken with watch=1. Reconnect with Last-Event-ID. See docs/api.md, Watching jobs.
         */
        get: operations["listJobs"];
        put?: never;
        /**
         * Submit a job: its JobSpec and its code (a zip, a capsule, or a capsule's digest)
         * @description Parses the JobSpec with the server's defaults (FORGE_DEFAULT_FLEET_KIND, ...), checks the code, asks the job's fleet whether it could ever run it, and creates the job in phase Queued. The code comes one of three ways (docs/capsule.md, Submitting): `code`, a zip of the code directory, which the controller packs into a capsule; `capsule`, a capsule the client built (forge submit), checked like any upload (unsafe names, entries against the manifest, FORGE_CAPSULE_MAX_BYTES for the archive and for its files unpacked, all before anything is inflated) and stored as it is, or with the server's own JobSpec and runner put in when they differ (the user's entries are copied, not recompressed); `capsuleSha256`, the digest of a capsule an earlier job of the caller's ran with (GET /api/v1/capsules/{sha256}): nothing is uploaded.
         */
        post: operations["createJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/jobs/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * One job with its spec and transition timeline; or watch it and its events (watch=1)
         * @description With watch=1: a `text/event-stream` that starts with `event: job` (data: this route's JobDetail) and `event: events` (data: the EventList of /events), and sends each again whenever it changes; `: keep-alive` comments every 15 s of silence; once the job is terminal with its logs archived and its machines released, `event: end` with data `{"phase","reason","message","exitCode"}`, then the stream closes. See docs/api.md, Watching jobs.
         */
        get: operations["getJob"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/jobs/{id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Request a job's cancellation */
        post: operations["cancelJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/jobs/{id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** What happened to a job, oldest first */
        get: operations["listJobEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/jobs/{id}/logs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The job's driver log (or another file of its logs), or a Server-Sent Events stream of it
         * @description Without follow: the log as text (empty if none yet). With follow=1: `text/event-stream` of `id: <byte offset after the chunk>` / `event: log` / one `data:` line per log line; `: keep-alive` comments every 15 s of silence; when the job has ended and the whole log is sent, `event: end` with data `{"phase","reason","message","exitCode"}`, then the stream closes. A stream whose token is revoked or expires ends (within 15 s) without `end`. Resume with the Last-Event-ID header or offset.
         */
        get: operations["getJobLogs"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/jobs/{id}/artifacts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The files of the job's logs directory
         * @description The runner's driver.log and the fleet's archive (kuberay: ray-job.log, submitter.log, events.json, rayjob.json, not-archived.txt, collect-errors.txt; local: runner.log), each readable with GET /api/v1/jobs/{id}/logs?file=NAME. `warning` says when the job's driver.log cannot reach this server (a kuberay job without FORGE_K8S_STORAGE_PVC).
         */
        get: operations["listJobArtifacts"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/jobs/{id}/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The job's training metrics (the scalars of its metrics.jsonl)
         * @description The JSON lines the job wrote to $FORGE_JOB_DIR/metrics.jsonl (`{"step": 10, "loss": 0.31}`; the runner's starforge_runner.metrics.log writes them), from byte `offset` on, as series of [step, value] points (step null when the line had none). Every number other than step, time, timestamp and wall_time is a series; a line that is not a JSON object of numbers counts as skipped. Only complete lines are read until the job has ended; ask again with the answer's `offset` for the points written since. Limits (the job writes the file): at most 4 MiB read per answer (ask again while offset < size), the first 64 MiB of the file, lines up to 64 KiB, 100 series per answer; `warning` says when one was reached. A symlink or a FIFO is not read (an empty answer).
         */
        get: operations["getJobMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/jobs/{id}/capsule": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The job's capsule: digest, size and the file list of its manifest
         * @description Read from the stored capsule's own .starforge/manifest.json (never by listing the code again), then kept by the server (a capsule never changes). `files` are every entry of the manifest, sorted by path; `starforge: true` marks StarForge's own (.starforge/jobspec.json, runner.pyz); `userFiles` counts the others. 404 (field capsule) while the job has no capsule yet, or when it is not stored (any more).
         */
        get: operations["getJobCapsule"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/capacity": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * What each fleet has and uses; or watch it change (watch=1)
         * @description Without watch: the fleets' capacity as the caller may see it (a non-admin sees other users' jobs as counts only, never their ids) and its `resourceVersion`, a digest of the answer. With watch=1: a `text/event-stream` of `id: <resourceVersion>` / `event: capacity` / `data: <this route's answer, with its resourceVersion>`, first the answer as it is (unless it has the `resourceVersion` given), then again whenever it changes; the fleets are read once a second for all watches; `: keep-alive` comments every 15 s of silence; the stream ends when the token is revoked or expires. See docs/api.md, Watching capacity.
         */
        get: operations["getCapacity"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/doctor": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Check the cluster's prerequisites for the kuberay fleet (admins)
         * @description Runs every check of `forge doctor` with this server's settings and credentials: API server and version, identity, the permissions of deploy/rbac.yaml (SelfSubjectAccessReview), KubeRay CRDs and operator version, GPU nodes per card series, the storage and corpus PVCs, object storage and a presigned URL. Each check has a verdict (pass, warn, fail), what was found and, when not passed, the fix. 404 when the server has no kuberay fleet configured.
         */
        get: operations["runDoctor"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/whoami": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The user the token belongs to */
        get: operations["whoami"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/console/login-codes": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * A one-time code that signs the web console in as the caller (forge console --login)
         * @description The code is redeemed once, within 60 s, by POST /api/v1/console/login for the token that asked for it. Codes are kept in memory only. The link `forge console --login` prints carries it in the URL's #fragment, which browsers never send to a server.
         */
        post: operations["createConsoleLoginCode"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/console/login": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Redeems a one-time login code for the token that asked for it */
        post: operations["consoleLogin"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This document */
        get: operations["getOpenApi"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The process serves HTTP */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The store and the controller are up */
        get: operations["readyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Prometheus metrics (text format 0.0.4)
         * @description starforge_jobs{phase} (all 8 phases), starforge_transitions_total, starforge_reconcile_duration_seconds (histogram), starforge_reconciles_total, starforge_reconcile_errors_total, starforge_fleet_errors_total.
         */
        get: operations["metrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tokens": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List API tokens (admins only) */
        get: operations["listTokens"];
        put?: never;
        /** Create an API token for a user, made if missing (admins only) */
        post: operations["createToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/tokens/{id}/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Revoke an API token at once (admins only) */
        post: operations["revokeToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/capsules/{sha256}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Whether a capsule can be named instead of sent
         * @description 200 when one of the caller's last 1000 jobs (any user's for an admin) reached its fleet with this capsule: the object store holds it, and POST /api/v1/jobs may name it in capsuleSha256 (for the same JobSpec). forge submit asks before uploading, so unchanged code crosses the network once. Only the caller's own jobs count: a digest must not let anyone run another user's code.
         */
        get: operations["getCapsule"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/uploads": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Start a job whose capsule follows as a plain body
         * @description The first of two requests that submit a job with a capsule built by the client (docs/api.md, "Uploading a capsule"; forge submit's way). The body is the JobSpec; it is parsed and admitted (fleet, sandbox, resumeFrom, the fleet's admission) now, so a bad JobSpec costs no upload. The answer names where to PUT the capsule. An upload lives in the server's memory for 15 minutes, is used by one PUT (whatever its outcome) and is forgotten by a restart; at most 16 per user are open at once.
         */
        post: operations["createUpload"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/uploads/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /**
         * Send the capsule of a started upload; creates the job
         * @description The body is the capsule (application/zip; with Content-Length, or chunked when its length is not known yet, as when forge submit sends a capsule while it builds it). It is checked as it arrives exactly like the capsule part of POST /api/v1/jobs (docs/capsule.md, "Checked as it arrives"), stored as it is, and the job is created with the upload's JobSpec; the answer is POST /api/v1/jobs's. The upload is used up by this request whatever its outcome: after any error, start again with POST /api/v1/uploads. Nothing is left behind by a refused or interrupted PUT.
         */
        put: operations["putUpload"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/playgrounds": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Your playgrounds (an admin's: everyone's), newest first */
        get: operations["listPlaygrounds"];
        put?: never;
        /** Start a playground: a vLLM server for a model, reclaimed at its TTL */
        post: operations["createPlayground"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/playgrounds/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One playground */
        get: operations["getPlayground"];
        put?: never;
        post?: never;
        /** Stop a playground now: its pod and service are deleted */
        delete: operations["stopPlayground"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/playgrounds/{id}/extend": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Move a playground's end later */
        post: operations["extendPlayground"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/playgrounds/{id}/logs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The model server's log (the pod's) */
        get: operations["playgroundLogs"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/playgrounds/{id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** What Kubernetes says about a playground that is not Ready yet (the jobs' diagnosis events) */
        get: operations["playgroundEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/playgrounds/{id}/openai/v1/models": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The model the playground serves (OpenAI GET /v1/models)
         * @description Forwarded to the model server's OpenAI-compatible API through the Kubernetes API server's services/proxy; the body and the answer are vLLM's (with "stream": true the answer is text/event-stream, passed on as it arrives)
         */
        get: operations["playgroundModels"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/playgrounds/{id}/openai/v1/chat/completions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * OpenAI chat completions (POST /v1/chat/completions)
         * @description Forwarded to the model server's OpenAI-compatible API through the Kubernetes API server's services/proxy; the body and the answer are vLLM's (with "stream": true the answer is text/event-stream, passed on as it arrives)
         */
        post: operations["playgroundChatCompletions"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/v1/playgrounds/{id}/openai/v1/completions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * OpenAI completions (POST /v1/completions)
         * @description Forwarded to the model server's OpenAI-compatible API through the Kubernetes API server's services/proxy; the body and the answer are vLLM's (with "stream": true the answer is text/event-stream, passed on as it arrives)
         */
        post: operations["playgroundCompletions"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        Error: {
            /** @enum {string} */
            error: "BadRequest" | "Unauthorized" | "NotFound" | "MethodNotAllowed" | "Conflict" | "PayloadTooLarge" | "Invalid" | "Rejected" | "Internal" | "Unavailable" | "Forbidden" | "UnsupportedMediaType" | "TooManyRequests" | "BadGateway" | "InsufficientStorage" | "CapsuleNotFound" | "Expired";
            /** @description For people: what is wrong and how to fix it */
            message: string;
            /** @description JSON path of the field at fault, e.g. pools[0].gpusPerMachine */
            field?: string;
            errors?: components["schemas"]["FieldError"][];
        };
        FieldError: {
            field: string;
            message: string;
        };
        /** @enum {string} */
        Phase: "Queued" | "Packaging" | "Submitting" | "Pending" | "Running" | "Succeeded" | "Failed" | "Cancelled";
        Job: {
            /** @example j-k3v9x0a1b2 */
            id: string;
            name: string;
            owner: string;
            /** @example local */
            fleet: string;
            phase: components["schemas"]["Phase"];
            /** @description CamelCase, empty when none (e.g. Completed, AppFailed, Rejected, CancelledByUser) */
            reason: string;
            message: string;
            exitCode: number | null;
            /** @description null before Packaging ends */
            capsule: components["schemas"]["CapsuleRef"] | null;
            cancelRequested: boolean;
            cleanup: {
                logsArchived: boolean;
                released: boolean;
            };
            /**
             * Format: date-time
             * @description RFC 3339 UTC with milliseconds
             * @example 2026-11-29T12:00:00.123Z
             */
            createdAt: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC with milliseconds
             * @example 2026-11-29T12:00:00.123Z
             */
            updatedAt: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC with milliseconds
             * @example 2026-11-29T12:00:00.123Z
             */
            startedAt: string | null;
            /**
             * Format: date-time
             * @description RFC 3339 UTC with milliseconds
             * @example 2026-11-29T12:00:00.123Z
             */
            finishedAt: string | null;
        };
        /** @description The canonical JobSpec (README: JobSpec v1), every default filled in */
        JobSpec: {
            [key: string]: unknown;
        };
        JobWithSpec: components["schemas"]["Job"] & {
            spec?: components["schemas"]["JobSpec"];
        };
        JobDetail: components["schemas"]["JobWithSpec"] & {
            timeline?: components["schemas"]["Transition"][];
            /** @description In GET /api/v1/jobs/{id} and its watch's job events (not in lists). */
            resources?: components["schemas"]["JobResources"];
        };
        /** @description What the job asks of its fleet and what it used (docs/api.md, "A job's resources"). */
        JobResources: {
            /** @description The kuberay fleet only: the Ray pods the job's RayJob requests, from its JobSpec as the fleet renders it — the head (the primary pool's first machine), then a worker group for the primary pool's other machines and one per further pool. */
            pods?: components["schemas"]["PodRequest"][];
            /** @description What the job's processes used, as the runner recorded it in the job directory's status.json when the entrypoint ended (null before, or when it recorded none). */
            usage: components["schemas"]["ResourceUsage"] | null;
        };
        PodRequest: {
            /**
             * @description head, or the worker group's name (its pool's)
             * @example head
             */
            group: string;
            /** @example main */
            pool: string;
            /** @description how many pods of this group */
            pods: number;
            /** @description Each pod's Ray container requests (equal to its limits): cpu and memory as Kubernetes quantities when the pool sets them, gpus (nvidia.com/gpu; 0 when FORGE_K8S_GPU_PASSTHROUGH is off). */
            requests: {
                /** @example 8 */
                cpu?: string;
                /** @example 64Gi */
                memory?: string;
                gpus: number;
            };
        };
        ResourceUsage: {
            /**
             * @description CPU time (user + system) of the entrypoint and the processes under it that were waited for
             * @example 12.345
             */
            cpuSeconds: number;
            /**
             * @description the largest resident set any one of those processes reached
             * @example 104857600
             */
            maxRssBytes: number;
        };
        Transition: {
            /**
             * Format: date-time
             * @description RFC 3339 UTC with milliseconds
             * @example 2026-11-29T12:00:00.123Z
             */
            at: string;
            from: components["schemas"]["Phase"] | null;
            to: components["schemas"]["Phase"];
            reason: string;
            message: string;
            /** @example controller */
            cause: string;
        };
        JobList: {
            items: components["schemas"]["Job"][];
            nextCursor: string | null;
            /** @description Where this list stands in the server's changes: watch from it (watch=1&resourceVersion=…) to miss nothing. Opaque; valid for this run of the server. */
            resourceVersion: string;
        };
        Event: {
            /** @enum {string} */
            type: "Normal" | "Warning";
            reason: string;
            message: string;
            source: string;
            count: number;
            /**
             * Format: date-time
             * @description RFC 3339 UTC with milliseconds
             * @example 2026-11-29T12:00:00.123Z
             */
            firstAt: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC with milliseconds
             * @example 2026-11-29T12:00:00.123Z
             */
            lastAt: string;
        };
        EventList: {
            items: components["schemas"]["Event"][];
        };
        Capacity: {
            fleets: (components["schemas"]["LocalFleetCapacity"] | components["schemas"]["KubeRayFleetCapacity"] | components["schemas"]["FleetCapacityError"] | components["schemas"]["FleetUnavailable"])[];
            /** @description A digest of this answer: equal numbers, equal versions. Watch from it (watch=1&resourceVersion=…) to be sent only changes. */
            resourceVersion: string;
        };
        Whoami: {
            user: string;
            admin: boolean;
        };
        /** @description An API token as listed: never the token itself */
        Token: {
            /** @description Names the token in revocations */
            id: string;
            user: string;
            description: string;
            /** Format: date-time */
            createdAt: string;
            /**
             * Format: date-time
             * @description null: never
             */
            expiresAt: string | null;
            /** Format: date-time */
            revokedAt: string | null;
            /** @description Neither revoked nor expired */
            active: boolean;
        };
        TokenList: {
            items: components["schemas"]["Token"][];
        };
        CreatedToken: components["schemas"]["Token"] & {
            /** @description The token in clear: shown this once, never stored */
            token: string;
        };
        CapsuleInfo: {
            sha256: string;
            /** @description Its object-store key, capsules/sha256-<hex>.zip */
            key: string;
            /** @description Bytes of the capsule (the zip) */
            size: number;
            userFiles: number;
            files: {
                path: string;
                size: number;
                sha256: string;
                executable: boolean;
                starforge: boolean;
            }[];
        };
        PlaygroundSpec: {
            /** @description A directory one of your jobs wrote, relative to the storage root (jobs/<job id>/…; it must exist; mounted read-only), or a model name the image can load */
            model: string;
            /**
             * @description Default: FORGE_DEFAULT_FLEET_KIND
             * @enum {string}
             */
            fleet?: "kuberay" | "local";
            /** @description Card series (the FORGE_K8S_GPU_NODE_LABEL value); required with gpus > 0 on kuberay */
            series?: string;
            /** @default 1 */
            gpus: number;
            /**
             * @description At most FORGE_PLAYGROUND_MAX_TTL_S
             * @default 3600
             */
            ttlSeconds: number;
            /** @description Default FORGE_IMAGE_VLLM */
            image?: string;
            /** @description The model name clients send; default the model's last path segment */
            servedModelName?: string;
            /** @description More `vllm serve` arguments (not --host, --port, --served-model-name) */
            args?: string[];
            /** @description Kubernetes quantity */
            cpus?: string;
            /** @description Kubernetes quantity */
            memory?: string;
        };
        Playground: {
            id: string;
            owner: string;
            fleet: string;
            /** @enum {string} */
            state: "Starting" | "Pending" | "Ready" | "Stopped" | "Expired" | "Failed";
            /** @description CamelCase: why Pending (ImagePullFailed, Unschedulable, Starting …) or why it ended (TTLExpired, StoppedByUser, ServerExited …) */
            reason: string;
            message: string;
            spec: components["schemas"]["PlaygroundSpec"];
            /** Format: date-time */
            expiresAt: string;
            ttlRemainingSeconds: number;
            /** Format: date-time */
            createdAt: string;
            /** Format: date-time */
            readyAt: string | null;
            /** Format: date-time */
            finishedAt: string | null;
            /** @description Its pod and service are deleted */
            released: boolean;
            /** @description Path of its OpenAI-compatible API on this server (the openai client's base_url) */
            openaiBaseUrl: string;
        };
        PlaygroundList: {
            items: components["schemas"]["Playground"][];
            /** @description Each fleet kind of this server and whether it can run a playground; when not, message says what to configure */
            fleets: {
                fleet: string;
                available: boolean;
                message?: string;
            }[];
        };
        /** @description The local fleet: this machine's CPUs and GPUs, what jobs hold, and its queue */
        LocalFleetCapacity: {
            /** @enum {string} */
            fleet: "local";
            host: string;
            /** @description Whole CPUs jobs may use in all */
            cpus: number;
            gpus: number;
            memoryBytes: number;
            cpusInUse: number;
            gpusInUse: number;
            /** @description Jobs running */
            running: number;
            /** @description Jobs waiting for CPUs or GPUs */
            waiting: number;
            /** @description Playgrounds holding CPUs or GPUs */
            playgrounds: number;
            /** @description Jobs holding or waiting for resources (a non-admin sees only their own) */
            jobs: {
                id: string;
                cpus: number;
                gpus: number;
                /** @enum {string} */
                state: "starting" | "running" | "waiting";
            }[];
        };
        /** @description The kuberay fleet: per card series, nodes and GPUs free and used (docs/kuberay-fleet.md, capacity) */
        KubeRayFleetCapacity: {
            /** @enum {string} */
            fleet: "kuberay";
            namespace: string;
        } & {
            [key: string]: unknown;
        };
        /** @description A fleet whose capacity cannot be read now */
        FleetCapacityError: {
            fleet: string;
            namespace?: string;
            error: string;
        };
        Artifacts: {
            items: {
                name: string;
                size: number;
            }[];
            logsArchived: boolean;
            /** @description A kuberay job's driver.log cannot reach this server (no FORGE_K8S_STORAGE_PVC) */
            warning?: string;
        };
        CapsuleRef: {
            sha256: string;
            /** @description capsules/sha256-<hex>.zip, its object key */
            key: string;
        };
        Upload: {
            /** @description u- and 32 hex digits */
            id: string;
            /** @description /api/v1/uploads/{id} */
            url: string;
            /**
             * Format: date-time
             * @description After this the PUT answers 404
             */
            expiresAt: string;
            /** @description The JobSpec as this server reads it (its defaults filled in) */
            spec: components["schemas"]["JobSpec"];
        };
        LoginCode: {
            code: string;
            expiresInSeconds: number;
        };
        LoginToken: {
            token: string;
        };
        Doctor: {
            /** @description no check failed (warnings pass) */
            passed: boolean;
            checks: {
                id: string;
                title: string;
                /** @enum {string} */
                verdict: "pass" | "warn" | "fail";
                detail: string;
                fix?: string;
            }[];
        };
        PlaygroundEvent: {
            type: string;
            reason: string;
            message: string;
            object: string;
            source: string;
            count: number;
            /** Format: date-time */
            firstAt: string;
            /** Format: date-time */
            lastAt: string;
        };
        PlaygroundEventList: {
            items: components["schemas"]["PlaygroundEvent"][];
        };
        /** @description The data of a followed log's `end` event, and of a job watch's */
        LogEnd: {
            phase: components["schemas"]["Phase"];
            reason: string;
            message: string;
            exitCode: number | null;
        };
        /** @description A fleet of jobs kept in the store that is not configured on this server (its jobs wait for a server that has it) */
        FleetUnavailable: {
            fleet: string;
            /** @enum {boolean} */
            available: false;
            /** @description What this server needs to run the fleet: the settings to configure */
            message?: string;
        };
    };
    responses: {
        /** @description Malformed request or query (BadRequest) */
        BadRequest: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Missing or invalid token (Unauthorized); WWW-Authenticate: Bearer */
        Unauthorized: {
            headers: {
                "WWW-Authenticate"?: string;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description No such job, or another user's job (NotFound) */
        NotFound: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description A fault of the server (Internal); the message never carries internals */
        Internal: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Only an admin may do this */
        Forbidden: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
    };
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    listJobs: {
        parameters: {
            query?: {
                phase?: "Queued" | "Packaging" | "Submitting" | "Pending" | "Running" | "Succeeded" | "Failed" | "Cancelled";
                fleet?: string;
                /** @description JobSpec name */
                name?: string;
                /** @description Jobs whose name contains this, ignoring case (indexed) */
                nameContains?: string;
                /** @description Admins only; others always see only their own jobs */
                owner?: string;
                limit?: number;
                /** @description nextCursor of the previous page */
                cursor?: string;
                /** @description 1: stream changes as Server-Sent Events instead of answering a page */
                watch?: "1" | "0" | "true" | "false";
                /** @description With watch=1: send the changes after this list's resourceVersion (opaque) */
                resourceVersion?: string;
            };
            header?: {
                /** @description With watch=1: resume after this event (its id, a resourceVersion) */
                "Last-Event-ID"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of jobs, or (watch=1) the stream of their changes */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobList"];
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description watch=1 with a resourceVersion this server no longer holds the changes since (error Expired): list again */
            410: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The user has max_watches_per_user (16) watches open (error TooManyRequests, Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
        };
    };
    createJob: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "multipart/form-data": {
                    /** @description The JobSpec, YAML or JSON text */
                    spec: string;
                    /**
                     * Format: binary
                     * @description A zip of the code directory (at least one file). Exactly one of code, capsule and capsuleSha256; none: 422 Invalid, field code.
                     */
                    code?: string;
                    /**
                     * Format: binary
                     * @description A capsule built by the client (docs/capsule.md), sent instead of code. Refused (422 Invalid, field capsule) when it fails the checks; the job's capsule.sha256 is the digest of what was stored.
                     */
                    capsule?: string;
                    /** @description Instead of code or capsule: the SHA-256 of a capsule one of the caller's last 1000 jobs ran with, for the same JobSpec as this server reads it. 409 CapsuleNotFound otherwise: send the capsule. */
                    capsuleSha256?: string;
                };
            };
        };
        responses: {
            /** @description Created (phase Queued) */
            201: {
                headers: {
                    /** @description /api/v1/jobs/{id} */
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobWithSpec"];
                };
            };
            /** @description Not multipart, a missing spec part, or a JobSpec that is not YAML/JSON (BadRequest) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description CapsuleNotFound: capsuleSha256 names no capsule an earlier job of the caller's ran with this JobSpec; send the capsule itself */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The body is larger than FORGE_CAPSULE_MAX_BYTES (PayloadTooLarge) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Invalid: the JobSpec fails validation (errors lists every field), resumeFrom names a job that is not one of the caller's own on the same fleet (field resumeFrom[i]; another user's job is answered like one that does not exist), or the code archive or capsule is refused (field code or capsule). Rejected: the fleet can never run the job (message says why; no job is created). */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
        };
    };
    getJob: {
        parameters: {
            query?: {
                /** @description 1: stream the job and its events as Server-Sent Events */
                watch?: "1" | "0" | "true" | "false";
            };
            header?: never;
            path: {
                /** @description Job id, e.g. j-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The job */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobDetail"];
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The user has max_watches_per_user (16) watches open (error TooManyRequests, Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
        };
    };
    cancelJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Job id, e.g. j-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The job had already ended: unchanged */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description Cancel requested (cancelRequested true); the controller stops the job */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    listJobEvents: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Job id, e.g. j-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Events */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    getJobLogs: {
        parameters: {
            query?: {
                /** @description Another file of the job's logs directory, e.g. the kuberay fleet's archive after the end: ray-job.log, submitter.log, events.json, rayjob.json, not-archived.txt; the local fleet's runner.log. 404 when the job has no such file (driver.log is empty instead). */
                file?: string;
                /** @description Only the last N lines (with follow: start there) */
                tail?: number;
                follow?: "1" | "0" | "true" | "false";
                /** @description With follow: start at this byte offset */
                offset?: number;
            };
            header?: {
                /** @description With follow: resume after this event (a byte offset) */
                "Last-Event-ID"?: string;
            };
            path: {
                /** @description Job id, e.g. j-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The log */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    listJobArtifacts: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Job id, e.g. j-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The files */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Artifacts"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    getJobMetrics: {
        parameters: {
            query?: {
                /** @description The byte offset of metrics.jsonl to read from: 0, or an earlier answer's offset (ignored with cursor) */
                offset?: number;
                /** @description Where to read on: an earlier answer's cursor (opaque; covers metrics.jsonl and the TensorBoard event files). 400 when malformed */
                cursor?: string;
                /** @description 1: a Server-Sent Events stream instead: `event: metrics` (`id:` the cursor after it, `data:` an answer as above) whenever the job wrote points, `: keep-alive` after 15 s of silence, `event: end` once the answer is complete; resume with Last-Event-ID. One of the user's log follows (429 beyond). */
                follow?: "1" | "0" | "true" | "false";
            };
            header?: never;
            path: {
                /** @description Job id, e.g. j-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The points from offset on (with follow=1: a text/event-stream of such answers) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                    "application/json": {
                        series: {
                            name: string;
                            points: (number | null)[][];
                        }[];
                        /** @description Where the next read of metrics.jsonl starts (?offset=); cursor covers the event files too */
                        offset: number;
                        /** @description metrics.jsonl's size now */
                        size: number;
                        /** @description Lines of metrics.jsonl read in this answer */
                        lines: number;
                        /** @description Of which not a JSON object with a number, or too long */
                        skipped: number;
                        /** @description The job has ended and all that is read of its files has been: no more points will come */
                        complete: boolean;
                        warning?: string;
                        /** @description Where the next read starts, metrics.jsonl and every event file (pass it back as ?cursor=) */
                        cursor: string;
                        /** @description The TensorBoard event files (events.out.tfevents.*) read under the job directory, their scalars merged into series by tag */
                        eventFiles: {
                            /** @description Under the job directory */
                            path: string;
                            offset: number;
                            size: number;
                        }[];
                        /** @description This answer stopped at its size limit with more to read now: ask again from cursor at once */
                        more: boolean;
                    };
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    getJobCapsule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Job id, e.g. j-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The capsule */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CapsuleInfo"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    getCapacity: {
        parameters: {
            query?: {
                /** @description 1: stream the answer as Server-Sent Events whenever it changes, instead of answering once */
                watch?: "1" | "0" | "true" | "false";
                /** @description With watch=1: the resourceVersion of the answer the client has; it is not sent again, only a changed one (opaque) */
                resourceVersion?: string;
            };
            header?: {
                /** @description With watch=1: resume after this event (its id, a resourceVersion) */
                "Last-Event-ID"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One entry per configured fleet, or (watch=1) the stream of the answer as it changes */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Capacity"];
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description The user has max_watches_per_user (16) watches open (error TooManyRequests, Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
        };
    };
    runDoctor: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The checks */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Doctor"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    whoami: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The user */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Whoami"];
                };
            };
            401: components["responses"]["Unauthorized"];
        };
    };
    createConsoleLoginCode: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The code */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LoginCode"];
                };
            };
            401: components["responses"]["Unauthorized"];
        };
    };
    consoleLogin: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    code: string;
                };
            };
        };
        responses: {
            /** @description The token (once) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LoginToken"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
        };
    };
    getOpenApi: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description OpenAPI 3.0 document */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                };
            };
        };
    };
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description ok */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
        };
    };
    readyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description ok */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            /** @description Not ready */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
        };
    };
    metrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Metrics */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
        };
    };
    listTokens: {
        parameters: {
            query?: {
                /** @description Only this user's tokens */
                user?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Tokens, oldest first */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TokenList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
        };
    };
    createToken: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    user: string;
                    description?: string;
                    /** @description Unset: never expires */
                    expiresInSeconds?: number;
                    /** @description Set: grant (true) or take away (false) the user's admin rights */
                    admin?: boolean;
                };
            };
        };
        responses: {
            /** @description Created; the token is in the answer only */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedToken"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
        };
    };
    revokeToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Token id, e.g. tok-0123456789ab */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Revoked (revoking again keeps the first time) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Token"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    getCapsule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The capsule's SHA-256 */
                sha256: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Known */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CapsuleRef"];
                };
            };
            /** @description Not a SHA-256 (BadRequest) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description No job of the caller's ran with it: send the capsule (NotFound) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
        };
    };
    createUpload: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/yaml": string;
                "application/json": Record<string, never>;
            };
        };
        responses: {
            /** @description Started: PUT the capsule to url */
            201: {
                headers: {
                    /** @description /api/v1/uploads/{id} */
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Upload"];
                };
            };
            /** @description An empty body or a JobSpec that is not YAML/JSON (BadRequest) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            /** @description The JobSpec is larger than 1 MiB (PayloadTooLarge) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The body is not application/yaml or application/json (UnsupportedMediaType) */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Invalid: the JobSpec fails validation, or resumeFrom names a job that is not the caller's on the same fleet. Rejected: the fleet can never run the job. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The caller has 16 uploads started and not sent (TooManyRequests; Retry-After) */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
        };
    };
    putUpload: {
        parameters: {
            query?: {
                /** @description The capsule's SHA-256, when known before it is sent: bytes with another digest are refused (422, field sha256) */
                sha256?: string;
            };
            header?: never;
            path: {
                /** @description The upload's id (POST /api/v1/uploads) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/zip": string;
            };
        };
        responses: {
            /** @description Created (phase Queued) */
            201: {
                headers: {
                    /** @description /api/v1/jobs/{id} */
                    Location?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobWithSpec"];
                };
            };
            /** @description No body, a body cut short, or sha256 that is not a SHA-256 (BadRequest) */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            401: components["responses"]["Unauthorized"];
            /** @description No upload with this id of the caller's in progress: used already, expired, never started, another user's, or the server restarted (NotFound) */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The capsule is larger than FORGE_CAPSULE_MAX_BYTES (PayloadTooLarge) */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The body is not application/zip (UnsupportedMediaType) */
            415: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Invalid: the capsule is refused (field capsule: every problem in errors) or its SHA-256 is not the sha256 named (field sha256) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
            /** @description Other uploads hold the server's free disk space (Unavailable; Retry-After) */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description The server's disk is too full for this upload (InsufficientStorage) */
            507: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listPlaygrounds: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The playgrounds */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PlaygroundList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            500: components["responses"]["Internal"];
        };
    };
    createPlayground: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PlaygroundSpec"];
            };
        };
        responses: {
            /** @description Created (state Starting); the server creates its pod and follows it */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Playground"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            /** @description Invalid (a field's error) or Rejected (it can never run on the fleet: what exists is in the message) */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
        };
    };
    getPlayground: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Playground id, e.g. p-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The playground */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Playground"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    stopPlayground: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Playground id, e.g. p-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Stopped (or already ended) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Playground"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    extendPlayground: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Playground id, e.g. p-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": {
                    /** @description Seconds added to the later of its end and now; the whole life stays within FORGE_PLAYGROUND_MAX_TTL_S */
                    seconds: number;
                };
            };
        };
        responses: {
            /** @description The new end is expiresAt */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Playground"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The playground is not Ready (or has ended): the message says its state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description Beyond FORGE_PLAYGROUND_MAX_TTL_S */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
        };
    };
    playgroundLogs: {
        parameters: {
            query?: {
                /** @description Only the last N lines */
                tailLines?: number;
            };
            header?: never;
            path: {
                /** @description Playground id, e.g. p-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The log */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
            /** @description The cluster could not be asked; try again */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    playgroundEvents: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Playground id, e.g. p-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The events ([] once Ready or ended) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PlaygroundEventList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    playgroundModels: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Playground id, e.g. p-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description vLLM's answer */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                    "text/event-stream": string;
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The playground is not Ready (or has ended): the message says its state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
            /** @description The Kubernetes API server could not reach the model server */
            502: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    playgroundChatCompletions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Playground id, e.g. p-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": Record<string, never>;
            };
        };
        responses: {
            /** @description vLLM's answer */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                    "text/event-stream": string;
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The playground is not Ready (or has ended): the message says its state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
            /** @description The Kubernetes API server could not reach the model server */
            502: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    playgroundCompletions: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Playground id, e.g. p-k3v9x0a1b2 */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": Record<string, never>;
            };
        };
        responses: {
            /** @description vLLM's answer */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                    "text/event-stream": string;
                };
            };
            401: components["responses"]["Unauthorized"];
            404: components["responses"]["NotFound"];
            /** @description The playground is not Ready (or has ended): the message says its state */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            500: components["responses"]["Internal"];
            /** @description The Kubernetes API server could not reach the model server */
            502: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
}
