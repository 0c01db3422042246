// The job routes: a job, its list, its cancellation and what the store knows of it. Submission
// is upload_routes.cc; what a job writes (logs, metrics) is log_routes.cc.
#include "starforge/api/handlers.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "starforge/api/capsule_info.h"
#include "starforge/api/convert.h"
#include "starforge/api/watch.h"
#include "starforge/capsule/capsule.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/format.h"
#include "starforge/common/reasons.h"
#include "starforge/fleet/job_resources.h"
#include "starforge/jobspec/parse.h"

namespace starforge::api {

namespace {

constexpr int kDefaultListLimit = 50;
constexpr int kMaxListLimit = 500;
constexpr size_t kMaxNameContains = 256;

std::string PhaseList() {
  std::string s;
  for (int p = 0; p <= static_cast<int>(store::Phase::kCancelled); ++p)
    s += std::string(p ? ", " : "") + std::string(store::ToString(static_cast<store::Phase>(p)));
  return s;
}

// The fleet, name and owner filters of a list or a watch (store::JobFilter, JobsWatchFilter).
template <typename Filter>
void FleetNameOwner(const Call& c, Filter& filter) {
  if (auto f = Param(c, "fleet"); !f.empty()) filter.fleet = f;
  if (auto n = Param(c, "name"); !n.empty()) filter.name = n;
  if (auto n = Param(c, "nameContains"); !n.empty()) {
    if (n.size() > kMaxNameContains)
      throw BadRequest("nameContains is longer than " + std::to_string(kMaxNameContains) +
                           " characters: no job name is that long",
                       "nameContains");
    filter.name_contains = n;
  }
  // Only an admin may look at others' jobs; everyone else always sees only their own.
  if (!c.user.admin) {
    filter.owner = c.user.name;
  } else if (auto o = Param(c, "owner"); !o.empty()) {
    filter.owner = o;
  }
}

// GET /api/v1/jobs?watch=1: the jobs that change, as they change (watch.h, JobsWatch).
void WatchJobs(Call& c) {
  ServerState& s = c.server;
  for (const char* p : {"phase", "limit", "cursor"})
    if (c.req.has_param(p))
      throw BadRequest(std::string(p) +
                           " cannot be watched: a watch sends every change of the jobs that "
                           "match owner, fleet and name; filter the phase of what it sends",
                       p);
  JobsWatchFilter filter;
  FleetNameOwner(c, filter);
  // From the list's resourceVersion (or, on a reconnect, the last event's id); else from now.
  std::string rv = c.req.get_header_value("Last-Event-ID");
  if (rv.empty()) rv = Param(c, "resourceVersion");
  int64_t after = s.store.LastChange();
  if (!rv.empty()) {
    std::optional<int64_t> n = DecodeResourceVersion(rv, s.epoch);
    if (!n || !s.store.ChangesSince(*n))
      throw ApiError{410, api_errors::kExpired,
                     "resourceVersion " + rv +
                         " is too old or from an earlier run of the server: list the jobs "
                         "again and watch from the list's resourceVersion",
                     "resourceVersion"};
    after = *n;
  }
  StreamEvents(c, WatchLimit(s),
               std::make_shared<JobsWatch>(s.store, s.epoch, after, std::move(filter)));
}

// A job's `resources` (docs/api.md, "A job's resources"): on the kuberay fleet the pods its
// RayJob requests (from its canonical JobSpec, as kuberay::Render builds them); on any fleet the
// use the runner recorded in <job dir>/status.json when the entrypoint ended (null until then).
void AddResources(nlohmann::json& detail, const store::Job& job, const ServerOptions& options) {
  nlohmann::json resources = {{"usage", nullptr}};
  if (job.fleet == "kuberay") {
    const nlohmann::json doc = nlohmann::json::parse(job.spec_json, nullptr, false);
    jobspec::ParseResult spec = jobspec::FromJson(doc, jobspec::Defaults{});
    if (spec.ok()) resources["pods"] = fleet::KubeRayPodRequests(*spec.spec, options.config);
  }
  if (auto usage = fleet::RecordedUsage(options.storage_root / "jobs" / job.id))
    resources["usage"] = std::move(*usage);
  detail["resources"] = std::move(resources);
}

}  // namespace

void ListJobs(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {"phase", "fleet", "name", "nameContains", "owner", "limit", "cursor", "watch",
                 "resourceVersion"});
  if (BoolParam(c, "watch")) return WatchJobs(c);
  if (c.req.has_param("resourceVersion"))
    throw BadRequest("resourceVersion needs watch=1", "resourceVersion");
  // Taken before the query: a change made meanwhile is in the list and sent again by a watch
  // from this resourceVersion (the same state twice, never a change missed).
  const int64_t change = s.store.LastChange();
  store::JobFilter filter;
  if (auto p = Param(c, "phase"); !p.empty()) {
    filter.phase = store::ParsePhase(p);
    if (!filter.phase)
      throw BadRequest("unknown phase \"" + p + "\"; one of " + PhaseList(), "phase");
  }
  FleetNameOwner(c, filter);
  int limit = kDefaultListLimit;
  if (c.req.has_param("limit")) {
    auto l = ParseCount(Param(c, "limit"));
    if (!l || *l < 1 || *l > kMaxListLimit)
      throw BadRequest("limit must be an integer from 1 to " + std::to_string(kMaxListLimit),
                       "limit");
    limit = static_cast<int>(*l);
  }
  if (auto cur = Param(c, "cursor"); !cur.empty()) {
    auto seq = DecodeCursor(cur);
    if (!seq) throw BadRequest("cursor: not a nextCursor this server returned", "cursor");
    filter.before_seq = *seq;
  }
  filter.limit = limit + 1;  // one more tells whether there is a next page
  std::vector<store::Job> jobs = s.store.ListJobs(filter);
  nlohmann::json items = nlohmann::json::array();
  for (size_t i = 0; i < jobs.size() && i < static_cast<size_t>(limit); ++i)
    items.push_back(JobJson(jobs[i]));
  nlohmann::json next = nullptr;
  if (jobs.size() > static_cast<size_t>(limit))
    next = EncodeCursor(jobs[static_cast<size_t>(limit) - 1].seq);
  SetJson(c.res, 200,
          {{"items", std::move(items)},
           {"nextCursor", std::move(next)},
           {"resourceVersion", EncodeResourceVersion(s.epoch, change)}});
}

void GetJob(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {"watch"});
  store::Job job = VisibleJob(c, c.Path());
  // ?watch=1: this answer, then again whenever the job or its events change (watch.h).
  if (BoolParam(c, "watch")) {
    const ServerOptions* options = &s.options;
    return StreamEvents(c, WatchLimit(s),
                        std::make_shared<JobWatch>(
                            s.store, job.id, [options](nlohmann::json& d, const store::Job& j) {
                              AddResources(d, j, *options);
                            }));
  }
  std::vector<store::Transition> timeline = s.store.ListTransitions(job.id);
  nlohmann::json detail = JobJson(job, /*with_spec=*/true, &timeline);
  AddResources(detail, job, s.options);
  SetJson(c.res, 200, detail);
}

void CancelJob(Call& c) {
  ServerState& s = c.server;
  NoBody(c);
  OnlyParams(c, {});
  store::Job job = VisibleJob(c, c.Path());
  if (store::IsTerminal(job.phase)) return SetJson(c.res, 200, JobJson(job));
  bool first = false;
  const std::optional<store::Job> updated = s.store.UpdateJob(job.id, [&](store::Job& j) {
    first = !j.cancel_requested;
    if (first) {
      j.cancel_requested = true;
      j.cancel_requested_at = NowMs();
    }
  });
  if (!updated) throw ApiError{404, api_errors::kNotFound, "job " + job.id + " not found", {}, {}};
  if (first) {
    s.store.RecordEvent(job.id, "Normal", reasons::kCancelRequested,
                        "cancel requested by " + c.user.name, "api");
    spdlog::info("job {}: cancel requested by {}", job.id, c.user.name);
  }
  s.controller.Enqueue(job.id);
  SetJson(c.res, store::IsTerminal(updated->phase) ? 200 : 202, JobJson(*updated));
}

void JobEvents(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {});
  store::Job job = VisibleJob(c, c.Path());
  nlohmann::json items = nlohmann::json::array();
  for (const auto& e : s.store.ListEvents(job.id))
    items.push_back(EventJson(e));
  SetJson(c.res, 200, {{"items", std::move(items)}});
}

// GET /api/v1/jobs/{id}/capsule: the capsule's size and its manifest's file list, read from the
// stored capsule (capsule_info.h), for the job page.
void JobCapsule(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {});
  store::Job job = VisibleJob(c, c.Path());
  if (job.capsule_sha256.empty())
    throw ApiError{404, api_errors::kNotFound,
                   "job " + job.id + " has no capsule yet: it is built while the job is Packaging",
                   "capsule"};
  StatusOr<CapsuleInfo> info = Status::FailedPrecondition("this server has no object store");
  if (s.options.objects)
    info = LoadCapsuleInfo(*s.options.objects, s.options.state_dir / "capsule-manifests",
                           job.capsule_sha256);
  if (!info) {
    spdlog::warn("job {}: reading its capsule's manifest: {}", job.id, info.status().message());
    throw ApiError{404, api_errors::kNotFound,
                   "the capsule of job " + job.id +
                       " is not stored (yet), or cannot be read; the server's log says why",
                   "capsule"};
  }
  nlohmann::json files = nlohmann::json::array();
  size_t user_files = 0;
  for (const capsule::ManifestEntry& e : info->manifest.files) {
    const bool own = e.path.starts_with(std::string(capsule::kStarforgeDir) + "/");
    user_files += !own;
    files.push_back({{"path", e.path},
                     {"size", e.size},
                     {"sha256", e.sha256},
                     {"executable", e.executable},
                     {"starforge", own}});
  }
  SetJson(c.res, 200,
          {{"sha256", job.capsule_sha256},
           {"key", capsule::ObjectKey(job.capsule_sha256)},
           {"size", info->size},
           {"userFiles", user_files},
           {"files", std::move(files)}});
}

}  // namespace starforge::api
