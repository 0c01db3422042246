#include "starforge/api/watch.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "starforge/api/convert.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/sha256.h"

namespace starforge::api {

namespace {

std::string Dump(const nlohmann::json& j) {
  // Invalid UTF-8 from a job (a reason, a message) must not throw here.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// What the store's name_contains matches: `part` in `name`, ignoring ASCII case.
bool ContainsIgnoringCase(std::string_view name, std::string_view part) {
  const auto lower = [](char ch) { return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch; };
  return std::search(name.begin(), name.end(), part.begin(), part.end(),
                     [&](char a, char b) { return lower(a) == lower(b); }) != name.end();
}

}  // namespace

std::string EncodeResourceVersion(std::string_view epoch, int64_t change) {
  return std::string(epoch) + "." + std::to_string(change);
}

std::optional<int64_t> DecodeResourceVersion(std::string_view rv, std::string_view epoch) {
  if (rv.size() <= epoch.size() + 1 || rv.substr(0, epoch.size()) != epoch ||
      rv[epoch.size()] != '.')
    return std::nullopt;
  return ParseCount(rv.substr(epoch.size() + 1));
}

std::string SseMessage(std::string_view name, std::string_view data, std::string_view id) {
  std::string out;
  if (!id.empty()) out.append("id: ").append(id).append("\n");
  out.append("event: ").append(name).append("\ndata: ").append(data).append("\n\n");
  return out;
}

std::string JobsWatch::Poll() {
  if (done_) return "";
  std::optional<std::vector<store::Change>> changes = store_.ChangesSince(after_);
  if (!changes) {
    done_ = true;
    return SseMessage("expired",
                      Dump({{"message",
                             "too many changes since this watch's resourceVersion: list the jobs "
                             "again and watch from the list's resourceVersion"}}));
  }
  if (changes->empty()) return "";
  after_ = changes->back().number;
  // Each job once, in the order of its newest change.
  std::set<std::string> seen;
  std::vector<std::string> ids;
  for (auto it = changes->rbegin(); it != changes->rend(); ++it)
    if (seen.insert(it->job_id).second) ids.push_back(it->job_id);
  std::string out;
  const std::string rv = EncodeResourceVersion(epoch_, after_);
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    std::optional<store::Job> job = store_.GetJob(*it);
    if (!job) continue;
    if ((filter_.owner && job->owner != *filter_.owner) ||
        (filter_.fleet && job->fleet != *filter_.fleet) ||
        (filter_.name && job->name != *filter_.name) ||
        (filter_.name_contains && !ContainsIgnoringCase(job->name, *filter_.name_contains)))
      continue;
    out += SseMessage("job", Dump(JobJson(*job)), rv);
  }
  return out;
}

std::string JobWatch::Poll() {
  if (done_) return "";
  // The journal position is taken before the job is read: a change made meanwhile is looked at
  // again by the next Poll (and sent only if it changed what was sent).
  std::optional<std::vector<store::Change>> changes;
  if (after_ >= 0) changes = store_.ChangesSince(after_);
  if (changes) {
    if (changes->empty()) return "";
    bool mine = false;
    for (const store::Change& c : *changes)
      mine = mine || c.job_id == id_;
    after_ = changes->back().number;
    if (!mine) return "";
  } else {
    after_ = store_.LastChange();  // the first Poll, or the journal lost track: look
  }
  std::optional<store::Job> job = store_.GetJob(id_);
  if (!job) {
    done_ = true;
    return SseMessage("end", Dump({{"phase", nullptr},
                                   {"reason", api_errors::kNotFound},
                                   {"message", "job " + id_ + " no longer exists"},
                                   {"exitCode", nullptr}}));
  }
  std::string out;
  if (job->version != version_) {
    version_ = job->version;
    std::vector<store::Transition> timeline = store_.ListTransitions(id_);
    nlohmann::json detail = JobJson(*job, /*with_spec=*/true, &timeline);
    if (detail_) detail_(detail, *job);
    out += SseMessage("job", Dump(detail));
  }
  nlohmann::json items = nlohmann::json::array();
  for (const store::Event& e : store_.ListEvents(id_))
    items.push_back(EventJson(e));
  std::string events = Dump({{"items", std::move(items)}});
  if (events != events_) {
    out += SseMessage("events", events);
    events_ = std::move(events);
  }
  if (store::IsTerminal(job->phase) && job->logs_archived && job->released) {
    done_ = true;
    out += SseEndEvent(*job);
  }
  return out;
}

std::string CapacityResourceVersion(const nlohmann::json& capacity) {
  return "c" + Sha256Hex(Dump(capacity)).substr(0, 16);
}

std::string CapacityWatch::Poll() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_read_) return "";
  next_read_ = now + every_;
  nlohmann::json body = read_();
  body.erase("resourceVersion");
  std::string rv = CapacityResourceVersion(body);
  if (rv == last_) return "";
  last_ = rv;
  body["resourceVersion"] = rv;
  return SseMessage("capacity", Dump(body), rv);
}

}  // namespace starforge::api
