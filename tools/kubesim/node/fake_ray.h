// The Ray heads of --pods fake (node/fake_pods.h): each fake head pod's Ray dashboard Jobs API,
// answered in this process instead of by a Ray emulator listening on the pod's address. The
// operator's dashboard client (controllers/kuberay.cc) and the API server's service proxy
// (apiserver/proxy.cc) ask AnswerFakeRay before they dial: an address that no fake head holds
// gets nullopt, and they dial as usual. The answers follow the emulator's (ray/kubesim_ray/
// jobs.py, node.py), which follow Ray's dashboard (dashboard/modules/job/job_head.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kubesim::node {

struct FakeRayReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// An HTTP request to HOST (any port) when a fake head holds that address, else nullopt. Serves
// GET /api/gcs_healthz, GET /api/version, POST /api/jobs/, GET /api/jobs/<id>,
// GET /api/jobs/<id>/logs, POST /api/jobs/<id>/stop. Thread-safe.
std::optional<FakeRayReply> AnswerFakeRay(const std::string& host, const std::string& method,
                                          const std::string& path, const std::string& body);

// A fake head's life: its address is served from AddFakeRayHead until RemoveFakeRayHead (its
// jobs go with it, as a head pod's do). `cluster` ("ns/name") finds it for submitters.
void AddFakeRayHead(const std::string& ip, const std::string& cluster);
void RemoveFakeRayHead(const std::string& ip);
// The address of the fake head of cluster "ns/name", or "".
std::string FakeRayHeadIp(const std::string& cluster);

// A submission as `ray job submit --submission-id ID -- ENTRYPOINT` makes it: PENDING now,
// RUNNING at once (no runtime env to set up), SUCCEEDED `run_ms` later (computed from the clock
// when asked: no thread per job). False when the head is gone. An id already known is kept.
bool SubmitFakeRayJob(const std::string& ip, const std::string& id, const std::string& entrypoint,
                      int64_t run_ms);
// How long a fake job runs: env var KUBESIM_FAKE_JOB_MS of its runtime env (`runtime_env`, the
// JSON `ray job submit --runtime-env-json` posts: {"env_vars": {...}}) when it holds a whole
// number of milliseconds >= 0, else `fallback_ms`. Nothing runs in a fake job, so this stands in
// for how long the job's own code would take (a bench sets it per job; see docs/kubesim.md).
int64_t FakeJobRunMs(const nlohmann::json& runtime_env, int64_t fallback_ms);
// The job's status ("" = unknown job or head) and its log so far.
std::string FakeRayJobStatus(const std::string& ip, const std::string& id, std::string* log);

}  // namespace kubesim::node
