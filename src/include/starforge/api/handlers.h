// The route handlers (routes.cc maps each route to one), by the file that holds them: one file
// per resource. Each answers c.res or throws ApiError (handler.h).
#pragma once

#include "starforge/api/handler.h"

namespace starforge::api {

// job_routes.cc: a job and what the store knows of it.
void ListJobs(Call& c);    // GET /api/v1/jobs (?watch=1: a stream of changes)
void GetJob(Call& c);      // GET /api/v1/jobs/{id} (?watch=1)
void CancelJob(Call& c);   // POST /api/v1/jobs/{id}/cancel
void JobEvents(Call& c);   // GET /api/v1/jobs/{id}/events
void JobCapsule(Call& c);  // GET /api/v1/jobs/{id}/capsule: the stored capsule's manifest

// upload_routes.cc: a job's JobSpec and code arriving.
void CreateJob(Call& c);     // POST /api/v1/jobs (multipart: spec and code, capsule or digest)
void CreateUpload(Call& c);  // POST /api/v1/uploads: the JobSpec, checked; the capsule follows
void PutUpload(Call& c);     // PUT /api/v1/uploads/{id}: the capsule, as a plain body
void GetCapsule(Call& c);    // GET /api/v1/capsules/{sha256}: may a resubmit name it?
// Removes uploads a crash interrupted (at start).
void CleanUploads(ServerState& s);

// log_routes.cc: what a job writes to its directory, read or followed.
void JobLogs(Call& c);       // GET /api/v1/jobs/{id}/logs (?follow=1: SSE)
void JobArtifacts(Call& c);  // GET /api/v1/jobs/{id}/artifacts: the logs directory's files
void JobMetrics(Call& c);    // GET /api/v1/jobs/{id}/metrics (?follow=1: SSE)

// capacity_routes.cc: what the fleets have, and what they need (doctor).
void Capacity(Call& c);  // GET /api/v1/capacity (?watch=1)
void Doctor(Call& c);    // GET /api/v1/doctor (admins)

// token_routes.cc: who the caller is; API tokens (admins).
void Whoami(Call& c);       // GET /api/v1/whoami
void ListTokens(Call& c);   // GET /api/v1/tokens
void CreateToken(Call& c);  // POST /api/v1/tokens
void RevokeToken(Call& c);  // POST /api/v1/tokens/{id}/revoke

// console_routes.cc: the web console's one-time login codes (login_codes.h). Its files are
// served by console_assets.cc for any other GET.
void ConsoleLoginCode(Call& c);  // POST /api/v1/console/login-codes
void ConsoleLogin(Call& c);      // POST /api/v1/console/login (no token: the code is one)

// health_routes.cc: probes, Prometheus metrics, the API's own description.
void Healthz(Call& c);  // GET /healthz
void Readyz(Call& c);   // GET /readyz
void Metrics(Call& c);  // GET /metrics
void OpenApi(Call& c);  // GET /api/v1/openapi.json

// playground_routes.cc: playgrounds (docs/playground.md) and their OpenAI-compatible proxy.
void CreatePlayground(Call& c);           // POST /api/v1/playgrounds
void ListPlaygrounds(Call& c);            // GET /api/v1/playgrounds
void GetPlayground(Call& c);              // GET /api/v1/playgrounds/{id}
void DeletePlayground(Call& c);           // DELETE /api/v1/playgrounds/{id}
void ExtendPlayground(Call& c);           // POST /api/v1/playgrounds/{id}/extend
void PlaygroundLogs(Call& c);             // GET /api/v1/playgrounds/{id}/logs
void PlaygroundEvents(Call& c);           // GET /api/v1/playgrounds/{id}/events
void PlaygroundModels(Call& c);           // GET …/{id}/openai/v1/models
void PlaygroundChatCompletions(Call& c);  // POST …/{id}/openai/v1/chat/completions
void PlaygroundCompletions(Call& c);      // POST …/{id}/openai/v1/completions

}  // namespace starforge::api
