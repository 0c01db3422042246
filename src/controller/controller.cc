#include "starforge/controller/controller.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <tuple>

#include "starforge/capsule/capsule.h"
#include "starforge/capsule/extract.h"
#include "starforge/common/format.h"
#include "starforge/jobspec/parse.h"

namespace starforge::controller {

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using store::Job;
using store::Phase;
using store::PhaseChange;
namespace reasons = store::reasons;

constexpr const char* kCause = "controller";
constexpr const char* kSource = "controller";

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty()) out += "; ";
    out += l;
  }
  return out;
}

// What one reconcile decided.
struct Outcome {
  enum Kind { kDone, kAfter, kRetry } kind = kAfter;
  milliseconds delay{0};
  std::string error;     // kRetry: why (for the log)
  bool cleanup = false;  // the job is terminal: its next step is archive and release
};

Outcome Done() {
  return {Outcome::kDone, milliseconds(0), ""};
}
Outcome After(milliseconds d) {
  return {Outcome::kAfter, d, ""};
}
Outcome Now() {
  return After(milliseconds(0));
}
Outcome Retry(std::string why) {
  return {Outcome::kRetry, milliseconds(0), std::move(why)};
}

using SpecPtr = std::shared_ptr<const jobspec::JobSpec>;

// One job's reconcile: reads of the job row, calls to its fleet, writes through the store.
// A new one per reconcile; it holds no state between them (level-triggered) but the caches it is
// given, which only save work: the store decides.
class Reconciler {
 public:
  Reconciler(store::Store& store, fleet::Fleet* fleet, objstore::ObjectStore& objects,
             const Options& options, Metrics& metrics, RecordedFleetEvents& recorded_events,
             ParsedSpecs& specs)
      : store_(store),
        fleet_(fleet),
        objects_(objects),
        options_(options),
        metrics_(metrics),
        recorded_events_(recorded_events),
        specs_(specs) {}

  Outcome Run(Job job) {
    if (store::IsTerminal(job.phase)) {
      Outcome o = Cleanup(job);
      o.cleanup = true;
      return o;
    }
    if (fleet_ == nullptr) {
      return Finish(job, Phase::kFailed, reasons::kRejected,
                    fmt::format("this server has no fleet of kind \"{}\"", job.fleet));
    }
    switch (job.phase) {
      case Phase::kQueued:
        return Queued(job);
      case Phase::kPackaging:
        return Packaging(job);
      case Phase::kSubmitting:
        return Submitting(job);
      case Phase::kPending:
      case Phase::kRunning:
        return Observing(job);
      default:
        return Cleanup(job);
    }
  }

 private:
  // Moves the job to `to` (with `mutate` in the same transaction) and records a matching event.
  // A refusal (the job moved on meanwhile) just means: look again.
  std::optional<Job> Move(const Job& job, Phase to, const std::string& reason,
                          const std::string& message,
                          const std::function<void(Job&)>& mutate = nullptr) {
    auto stored = store_.UpdateJob(job.id, mutate, PhaseChange{to, reason, message, kCause});
    if (stored && stored->phase == to && to != job.phase) {
      store_.RecordEvent(
          job.id, to == Phase::kFailed ? "Warning" : "Normal",
          reason.empty() ? std::string(store::ToString(to)) : reason,
          message.empty() ? fmt::format("{} → {}", store::ToString(job.phase), store::ToString(to))
                          : message,
          kSource);
    }
    return stored;
  }

  // Ends the job; its cleanup follows at once.
  Outcome Finish(const Job& job, Phase to, const std::string& reason, const std::string& message,
                 const std::function<void(Job&)>& mutate = nullptr) {
    Move(job, to, reason, message, mutate);
    Failpoint("terminal-recorded");
    Outcome o = Now();
    o.cleanup = true;  // ahead of live jobs' observes (work_queue.h)
    return o;
  }

  Outcome CancelledBeforeSubmit(const Job& job) {
    return Finish(job, Phase::kCancelled, reasons::kCancelledByUser,
                  "cancelled before it was submitted to the fleet");
  }

  // The spec of a job not yet submitted, or null with *stop set when the job ends here
  // instead: a cancel was requested, or its stored spec no longer parses.
  SpecPtr SpecBeforeSubmit(const Job& job, Outcome* stop) {
    if (job.cancel_requested) {
      *stop = CancelledBeforeSubmit(job);
      return nullptr;
    }
    StatusOr<SpecPtr> spec = specs_.Get(job);
    if (!spec.ok()) {
      *stop = Finish(job, Phase::kFailed, reasons::kPackagingFailed,
                     "the stored JobSpec is not valid: " + spec.status().message());
      return nullptr;
    }
    return *spec;
  }

  fs::path WorkDir(const Job& job) const { return options_.state_dir / "work" / job.id; }

  // Removes the packaging scratch and the uploaded archive once the capsule holds the code (or
  // the job ended). The path is forgotten only after the file is gone, so a crash between the
  // two repeats a harmless remove.
  void DiscardUpload(const Job& job) {
    std::error_code ec;
    fs::remove_all(WorkDir(job), ec);
    if (job.upload_path.empty()) return;
    fs::remove(job.upload_path, ec);
    if (ec) return;  // kept on record: retried at the next cleanup
    store_.UpdateJob(job.id, [](Job& j) { j.upload_path.clear(); });
  }

  Outcome Queued(const Job& job) {
    Outcome stop;
    const auto spec = SpecBeforeSubmit(job, &stop);
    if (!spec) return stop;
    // Admitted at submit already; the fleet may have changed since (e.g. a restart with
    // other settings).
    const fleet::Admission admission = fleet_->Admit(*spec);
    if (!admission.possible) {
      return Finish(
          job, Phase::kFailed, reasons::kRejected,
          admission.field.empty() ? admission.message : admission.field + ": " + admission.message);
    }
    Move(job, Phase::kPackaging, "", "");
    return Now();
  }

  Outcome Packaging(const Job& job) {
    Outcome stop;
    const auto spec = SpecBeforeSubmit(job, &stop);
    if (!spec) return stop;
    if (!job.capsule_sha256.empty()) return StoreBuiltCapsule(job);
    if (job.upload_path.empty()) {
      return Finish(job, Phase::kFailed, reasons::kPackagingFailed,
                    "no code was uploaded with the job: submit it with --code DIR");
    }
    const fs::path work = WorkDir(job);
    const fs::path code = work / "code";
    std::error_code ec;
    fs::remove_all(work, ec);  // a previous attempt's leftovers (a crash mid-packaging)
    fs::create_directories(work, ec);
    if (ec) {
      return RetryUntilSubmitDeadline(
          job, fmt::format("cannot create {}: {}", work.string(), ec.message()));
    }

    capsule::ExtractLimits limits;
    limits.max_total_bytes = static_cast<uint64_t>(options_.capsule_max_bytes);
    // Held until this step returns (work/ is emptied by then, or the capsule moved on): the
    // unpacked code, and the capsule built from it, at most about as large again. Without it two
    // packagings could each pass the free-space check and then fill the disk together.
    DiskBudget::Reservation space;
    if (options_.disk_budget != nullptr) {
      limits.hold_space = [&](uint64_t declared) -> std::string {
        const int64_t bytes = 2 * static_cast<int64_t>(declared);  // ≤ 2 × capsule_max_bytes
        switch (options_.disk_budget->Reserve(space, bytes)) {
          case DiskBudget::Refusal::kNone:
            return "";
          case DiskBudget::Refusal::kBusy:
            return fmt::format(
                "waiting for disk space: unpacking and packing this code needs {}, held now by "
                "other uploads and packagings",
                capsule::FormatBytes(static_cast<uint64_t>(bytes)));
          case DiskBudget::Refusal::kFull:
            break;
        }
        return fmt::format(
            "the state directory's disk has less than the {} free that unpacking and packing "
            "this code needs; free some space",
            capsule::FormatBytes(static_cast<uint64_t>(bytes)));
      };
    }
    const capsule::ExtractResult extracted = capsule::ExtractZip(job.upload_path, code, limits);
    if (extracted.local_errno != 0) {
      // Our disk, not the user's archive: retried with backoff while the operator frees space
      // (or other packagings and uploads give theirs back), with an event that says why.
      fs::remove_all(work, ec);
      const std::string why = "unpacking the upload: " + Join(extracted.errors);
      store_.RecordEvent(job.id, "Warning", reasons::kPackagingWarning, why, kSource);
      return RetryUntilSubmitDeadline(job, why);
    }
    if (!extracted.ok()) {
      fs::remove_all(work, ec);
      return Finish(job, Phase::kFailed, reasons::kPackagingFailed,
                    "the uploaded code archive cannot be unpacked: " + Join(extracted.errors));
    }
    const capsule::CollectResult collected = capsule::Collect(code);
    for (const auto& warning : collected.warnings) {
      store_.RecordEvent(job.id, "Warning", reasons::kPackagingWarning, warning, kSource);
    }
    if (!collected.ok()) {
      fs::remove_all(work, ec);
      return Finish(job, Phase::kFailed, reasons::kPackagingFailed, Join(collected.errors));
    }
    capsule::BuildOptions build_options;
    build_options.output_dir = work;
    build_options.max_bytes = options_.capsule_max_bytes;
    const capsule::BuildResult built = capsule::Build(collected.files, *spec, build_options);
    if (!built.ok()) {
      fs::remove_all(work, ec);
      return Finish(job, Phase::kFailed, reasons::kPackagingFailed, Join(built.errors));
    }
    Failpoint("packaging-built");

    const std::string key = capsule::ObjectKey(built.sha256);
    auto put = objects_.PutFile(key, built.path.string());
    if (!put) {
      fs::remove_all(work, ec);
      return CapsuleNotStored(job, key, put.status());
    }
    Failpoint("capsule-stored");

    // The digest is on record before anything uses the capsule.
    const std::string sha = built.sha256;
    auto moved = Move(job, Phase::kSubmitting, "",
                      fmt::format("capsule {} ({}, {} files)", key,
                                  capsule::FormatBytes(built.size), built.user_files),
                      [&](Job& j) { j.capsule_sha256 = sha; });
    if (moved) DiscardUpload(*moved);
    return Now();
  }

  // Retried (with an event) while the object store may come back, up to the submit deadline;
  // otherwise the job fails.
  Outcome CapsuleNotStored(const Job& job, const std::string& key, const Status& error) {
    const std::string message = fmt::format("cannot store the capsule as {} in {}: {}", key,
                                            objects_.Describe(), error.message());
    if (error.retryable()) {
      store_.RecordEvent(job.id, "Warning", reasons::kCapsuleStoreRetrying, message, kSource);
      return RetryUntilSubmitDeadline(job, message);
    }
    return Finish(job, Phase::kFailed, reasons::kStorageFailed, message);
  }

  // A capsule the client built (the API checked it: capsule/accept.h) is stored as it is; one
  // named by digest must still be in the object store.
  Outcome StoreBuiltCapsule(const Job& job) {
    // The client built it and the API checked it: the same point of the job's life as a capsule
    // this controller has just built (crash tests kill the server here too).
    Failpoint("packaging-built");
    const std::string key = capsule::ObjectKey(job.capsule_sha256);
    std::string detail;
    if (!job.upload_path.empty()) {
      // The API checked it and made it durable; the upload is removed once the job moves on.
      auto put = objects_.PutFinishedFile(key, job.upload_path);
      if (!put) return CapsuleNotStored(job, key, put.status());
      detail = fmt::format("capsule {} (built by the client)", key);
    } else {
      auto head = objects_.Head(key);
      if (!head) {
        const std::string message = fmt::format("cannot look up the capsule {} in {}: {}", key,
                                                objects_.Describe(), head.status().message());
        if (head.status().retryable()) return RetryUntilSubmitDeadline(job, message);
        return Finish(job, Phase::kFailed, reasons::kStorageFailed, message);
      }
      if (!head->has_value()) {
        return Finish(job, Phase::kFailed, reasons::kPackagingFailed,
                      fmt::format("the capsule {} is no longer in {}: submit again with the code "
                                  "(forge submit sends it when the server lacks it)",
                                  key, objects_.Describe()));
      }
      detail = fmt::format("capsule {} (already stored: nothing uploaded)", key);
    }
    Failpoint("capsule-stored");
    auto moved = Move(job, Phase::kSubmitting, "", detail);
    if (moved) DiscardUpload(*moved);
    return Now();
  }

  fleet::SubmitRequest Request(const Job& job, const jobspec::JobSpec& spec) const {
    fleet::SubmitRequest request;
    request.job_id = job.id;
    request.spec = spec;
    request.capsule_sha256 = job.capsule_sha256;
    request.capsule_key = capsule::ObjectKey(job.capsule_sha256);
    request.queued_at = job.created_at;
    const auto owner = store_.GetUser(job.owner);
    request.owner_admin = owner && owner->admin;
    return request;
  }

  Outcome Submitting(const Job& job) {
    if (!job.upload_path.empty()) DiscardUpload(job);  // a crash right after Packaging
    // No handle is on record yet: whatever the fleet may hold is freed by Release, by job id.
    if (job.cancel_requested) return CancelledBeforeSubmit(job);
    const StatusOr<SpecPtr> spec = specs_.Get(job);
    if (!spec.ok()) {
      return Finish(job, Phase::kFailed, reasons::kSubmissionFailed,
                    "the stored JobSpec is not valid: " + spec.status().message());
    }
    const fleet::SubmitResult r = fleet_->Submit(Request(job, **spec));
    if (!r.status.ok()) {
      ++metrics_.fleet_errors;
      const Status& s = r.status;
      const std::string reason = s.reason().empty() ? reasons::kSubmissionFailed : s.reason();
      if (s.retryable()) {
        store_.RecordEvent(job.id, "Warning", reason, s.message(), FleetSource());
        return RetryUntilSubmitDeadline(job, s.message());
      }
      return Finish(job, Phase::kFailed, reason, s.message());
    }
    Failpoint("submitted");
    const std::string handle = r.handle;
    Move(job, Phase::kPending, "",
         fmt::format("submitted to the {} fleet as {}", job.fleet, handle),
         [&](Job& j) { j.fleet_handle = handle; });
    return Now();
  }

  std::string FleetSource() const { return "fleet:" + fleet_->Kind(); }

  // When to look at a live job again: at the resync of a polled fleet; for a fleet that notifies
  // every change, at its sync period (±10 %, so that jobs started together do not come due
  // together) — unless `deadline_ms` (Unix ms, 0 = none), when a deadline of the job passes,
  // comes first.
  milliseconds Resync(int64_t now, int64_t deadline_ms = 0) const {
    if (!fleet_->NotifiesChanges()) return options_.resync;
    thread_local std::minstd_rand rng(std::random_device{}());
    const int64_t period = options_.sync_period.count();
    int64_t wait =
        period - period / 10 + static_cast<int64_t>(rng() % static_cast<uint64_t>(period / 5 + 1));
    if (deadline_ms > 0) wait = std::min(wait, std::max<int64_t>(deadline_ms - now, 0) + 1);
    return milliseconds(std::max<int64_t>(wait, 1));
  }

  // Records the fleet's events idempotently: the observation lists everything since submit, so
  // only occurrences beyond what is already counted are recorded.
  void RecordFleetEvents(const Job& job, const std::vector<fleet::FleetEvent>& events) {
    if (events.empty() || recorded_events_.Same(job.id, events)) return;
    using Key = std::tuple<std::string, std::string, std::string, std::string>;
    std::map<Key, int> recorded;
    for (const auto& e : store_.ListEvents(job.id)) {
      recorded[{e.type, e.reason, e.message, e.source}] = e.count;
    }
    std::map<Key, int> seen;
    for (const auto& e : events) {
      const std::string source = e.source.empty() ? FleetSource() : e.source;
      const std::string type = e.type.empty() ? "Normal" : e.type;
      const Key key{type, e.reason, e.message, source};
      if (++seen[key] > recorded[key]) {
        store_.RecordEvent(job.id, type, e.reason, e.message, source);
        ++recorded[key];
      }
    }
    recorded_events_.Remember(job.id, events);
  }

  // When the job last entered `phase` (created_at if it never did).
  int64_t EnteredAt(const Job& job, Phase phase) {
    int64_t since = job.created_at;
    for (const auto& t : store_.ListTransitions(job.id)) {
      if (t.to == phase) since = t.at;
    }
    return since;
  }

  // A transient failure before the fleet holds the job: retried with backoff until
  // FORGE_SUBMIT_DEADLINE_S has passed since Packaging began, then the job fails saying what kept
  // failing (instead of sitting in Packaging or Submitting forever).
  Outcome RetryUntilSubmitDeadline(const Job& job, const std::string& what) {
    const int64_t limit_s = options_.submit_deadline.count();
    if (limit_s > 0) {
      const int64_t since = EnteredAt(job, Phase::kPackaging);
      if (NowMs() - since > limit_s * 1000) {
        return Finish(job, Phase::kFailed, reasons::kSubmitDeadlineExceeded,
                      fmt::format("{} kept failing for more than {} s (FORGE_SUBMIT_DEADLINE_S); "
                                  "last error: {}",
                                  job.phase == Phase::kPackaging ? "packaging" : "submitting",
                                  limit_s, what));
      }
    }
    return Retry(what);
  }

  // When the fleet's queue (Kueue) last took the job and last let it go, from the job's events
  // (Unix ms, 0 = never): kept in the store, so a restarted controller keeps the clocks.
  struct QueueTimes {
    int64_t queued = 0;
    int64_t admitted = 0;
    bool Waiting() const { return queued > 0 && queued >= admitted; }
  };
  QueueTimes Queue(const Job& job) {
    // Read on every look at a pending job: two indexed lookups, not every event of the job
    // (reading them all was 6 % of forge serve's CPU at 1,000 jobs).
    QueueTimes q;
    q.queued = store_.LastEventAt(job.id, reasons::kQueued, kSource);
    q.admitted = store_.LastEventAt(job.id, reasons::kAdmitted, kSource);
    return q;
  }

  Outcome CancelOnFleet(const Job& job, int64_t since_ms) {
    const Status s = fleet_->Cancel(job.id, job.fleet_handle, since_ms);
    if (!s.ok()) {
      ++metrics_.fleet_errors;
      if (s.retryable()) return Retry("cancel: " + s.message());
      // Trying again will not stop it: say so, and let the deadlines and cleanup go on.
      store_.RecordEvent(job.id, "Warning", reasons::kCancelFailed, s.message(), kSource);
    }
    return Now();
  }

  Outcome Observing(const Job& job) {
    // Parsed at the job's first reconcile and kept (ParsedSpecs); the fleet, Resubmit and the
    // deadlines all use this one.
    const StatusOr<SpecPtr> spec = specs_.Get(job);
    static const jobspec::JobSpec kNoSpec;
    const fleet::Observation obs =
        fleet_->Observe(job.id, job.fleet_handle, spec.ok() ? **spec : kNoSpec);
    if (obs.retryable_error) {
      ++metrics_.fleet_errors;
      return Retry("observe: " + obs.message);
    }
    RecordFleetEvents(job, obs.events);
    const int64_t now = NowMs();
    const bool ended = obs.state == fleet::State::kSucceeded ||
                       obs.state == fleet::State::kFailed || obs.state == fleet::State::kCancelled;

    if (job.cancel_requested) {
      if (ended || obs.state == fleet::State::kUnknown) {
        const std::optional<int> exit_code = obs.exit_code;
        return Finish(
            job, Phase::kCancelled, reasons::kCancelledByUser,
            exit_code ? fmt::format("cancelled; the entrypoint ended with exit code {}", *exit_code)
                      : "cancelled",
            [&](Job& j) { j.exit_code = exit_code; });
      }
      Outcome o = CancelOnFleet(job, std::max<int64_t>(0, now - job.cancel_requested_at));
      if (o.kind == Outcome::kRetry) return o;
      return After(std::min(options_.resync, milliseconds(500)));
    }

    // A short entrypoint can start and end between two observations (a loaded machine, a long
    // resync): the job still ran, so it passes through Running, and its start, duration and
    // phases say so as they would had it been seen running. Its started_at is then the moment
    // its end was seen, the first moment it is known to have started.
    const bool ran = obs.state == fleet::State::kSucceeded ||
                     (obs.state == fleet::State::kFailed && obs.exit_code.has_value());
    if (ran && job.phase == Phase::kPending) {
      const std::optional<Job> running = Move(job, Phase::kRunning, "", "");
      if (!running || running->phase != Phase::kRunning) return Now();  // moved on: look again
      return Follow(*running, obs, spec, now);
    }
    return Follow(job, obs, spec, now);
  }

  // What the fleet's observation of a job not being cancelled leads to.
  Outcome Follow(const Job& job, const fleet::Observation& obs, const StatusOr<SpecPtr>& spec,
                 int64_t now) {
    const SpecPtr parsed = spec.ok() ? *spec : nullptr;
    switch (obs.state) {
      case fleet::State::kSucceeded: {
        const int code = obs.exit_code.value_or(0);
        return Finish(job, Phase::kSucceeded, reasons::kCompleted, obs.message,
                      [&](Job& j) { j.exit_code = code; });
      }
      case fleet::State::kFailed: {
        const std::optional<int> exit_code = obs.exit_code;
        std::string message = obs.message;
        if (message.empty()) {
          message = exit_code ? fmt::format("the entrypoint exited with code {}", *exit_code)
                              : "the job failed";
        }
        return Finish(job, Phase::kFailed, obs.reason.empty() ? reasons::kAppFailed : obs.reason,
                      message, [&](Job& j) { j.exit_code = exit_code; });
      }
      case fleet::State::kCancelled: {
        const std::optional<int> exit_code = obs.exit_code;
        return Finish(job, Phase::kCancelled,
                      obs.reason.empty() ? reasons::kCancelledByUser : obs.reason,
                      obs.message.empty() ? "the fleet cancelled the job" : obs.message,
                      [&](Job& j) { j.exit_code = exit_code; });
      }
      case fleet::State::kUnknown:
        if (job.phase == Phase::kRunning) {
          return Finish(job, Phase::kFailed, reasons::kRunnerLost,
                        obs.message.empty()
                            ? "the fleet lost the running job (no record of it any more)"
                            : obs.message);
        }
        return Resubmit(job, spec);
      case fleet::State::kPending:
        return Pending(job, parsed, obs, now);
      case fleet::State::kRunning:
        return Running(job, parsed, now);
    }
    return After(Resync(now));
  }

  // Pending, but the fleet has no record (e.g. its queue was in memory and it restarted):
  // submit again; the same job id yields the same handle.
  Outcome Resubmit(const Job& job, const StatusOr<SpecPtr>& spec) {
    if (!spec.ok()) return Retry("the stored JobSpec is not valid: " + spec.status().message());
    const fleet::SubmitResult r = fleet_->Submit(Request(job, **spec));
    if (!r.status.ok()) {
      ++metrics_.fleet_errors;
      const Status& s = r.status;
      if (s.retryable()) return Retry(s.message());
      return Finish(job, Phase::kFailed,
                    s.reason().empty() ? reasons::kSubmissionFailed : s.reason(), s.message());
    }
    if (r.handle != job.fleet_handle) {
      const std::string handle = r.handle;
      store_.UpdateJob(job.id, [&](Job& j) { j.fleet_handle = handle; });
    }
    store_.RecordEvent(job.id, "Normal", reasons::kResubmitted,
                       "the fleet had no record of the pending job: submitted again", kSource);
    return After(options_.resync);
  }

  Outcome Pending(const Job& job, const SpecPtr& spec, const fleet::Observation& obs, int64_t now) {
    if (job.phase != Phase::kPending) return After(Resync(now));  // never back from Running
    // Time in the fleet's queue is waiting for a turn, not failing to start: the pre-running
    // clock stops there and restarts at admission (the RayJob's own activeDeadlineSeconds
    // likewise counts from its startTime, which KubeRay sets again when it is unsuspended).
    const QueueTimes queue = Queue(job);
    if (obs.queued && !queue.Waiting()) {
      store_.RecordEvent(job.id, "Normal", reasons::kQueued,
                         obs.message.empty() ? "waiting in the fleet's queue" : obs.message,
                         kSource);
    } else if (!obs.queued && queue.Waiting()) {
      store_.RecordEvent(job.id, "Normal", reasons::kAdmitted,
                         "admitted from the queue: deadlines.preRunningSeconds counts from here",
                         kSource);
    }
    int64_t deadline = 0;  // the next one, for Resync
    if (obs.queued && spec && spec->queue_seconds > 0) {
      const int64_t queued_at = queue.Waiting() ? queue.queued : now;
      deadline = queued_at + spec->queue_seconds * 1000;
      if (now - queued_at > spec->queue_seconds * 1000) {
        Outcome o = CancelOnFleet(job, 0);
        if (o.kind == Outcome::kRetry) return o;
        return Finish(
            job, Phase::kFailed, reasons::kQueueDeadlineExceeded,
            fmt::format("not admitted from the fleet's queue {} s after it was queued "
                        "(deadlines.queueSeconds); last status: {}",
                        spec->queue_seconds, obs.message.empty() ? "queued" : obs.message));
      }
    }
    const int64_t admitted = obs.queued ? 0 : (queue.Waiting() ? now : queue.admitted);
    const int64_t since = std::max(EnteredAt(job, Phase::kPending), admitted);
    if (!obs.queued && spec && spec->pre_running_seconds > 0)
      deadline = since + spec->pre_running_seconds * 1000;
    if (!obs.queued && spec && spec->pre_running_seconds > 0 &&
        now - since > spec->pre_running_seconds * 1000) {
      Outcome o = CancelOnFleet(job, 0);
      if (o.kind == Outcome::kRetry) return o;
      const std::string why = !obs.message.empty() ? obs.message : job.message;
      const std::string reason = !obs.reason.empty() ? obs.reason : job.reason;
      return Finish(job, Phase::kFailed, reasons::kPreRunningDeadlineExceeded,
                    fmt::format("not running {} s after it was {} (deadlines.preRunningSeconds); "
                                "last status: {}{}{}",
                                spec->pre_running_seconds,
                                admitted > 0 ? "admitted from the queue" : "submitted", reason,
                                reason.empty() ? "" : ": ", why.empty() ? "pending" : why));
    }
    // What the fleet says about the wait is what the user sees; silence keeps the last word.
    const bool says_something = !obs.reason.empty() || !obs.message.empty();
    if (says_something && (obs.reason != job.reason || obs.message != job.message)) {
      const std::string reason = obs.reason, message = obs.message;
      store_.UpdateJob(job.id, [&](Job& j) {
        j.reason = reason;
        j.message = message;
      });
    }
    return After(Resync(now, deadline));
  }

  Outcome Running(const Job& job, const SpecPtr& spec, int64_t now) {
    if (job.phase == Phase::kPending) {
      Move(job, Phase::kRunning, "", "");
      Failpoint("running-observed");
      return Now();  // deadlines count from the stored started_at
    }
    if (spec && spec->running_seconds > 0 && job.started_at > 0 &&
        now - job.started_at > spec->running_seconds * 1000) {
      Outcome o = CancelOnFleet(job, 0);
      if (o.kind == Outcome::kRetry) return o;
      return Finish(job, Phase::kFailed, reasons::kDeadlineExceeded,
                    fmt::format("still running after {} s (deadlines.runningSeconds): stopped",
                                spec->running_seconds));
    }
    const bool timed = spec && spec->running_seconds > 0 && job.started_at > 0;
    return After(Resync(now, timed ? job.started_at + spec->running_seconds * 1000 : 0));
  }

  // Terminal: archive the logs, then give the machines back; each recorded before the next.
  Outcome Cleanup(const Job& job) {
    recorded_events_.Forget(job.id);  // no more looks at the fleet's events
    specs_.Forget(job.id);            // nor uses of the spec
    DiscardUpload(job);
    if (fleet_ == nullptr) {  // nothing ever ran anywhere
      if (!job.logs_archived || !job.released) {
        store_.UpdateJob(job.id, [](Job& j) { j.logs_archived = j.released = true; });
      }
      return Done();
    }
    if (!job.logs_archived) {
      const fs::path logs = options_.storage_root / "jobs" / job.id / "logs";
      std::error_code ec;
      // The job writes its directory: a `logs` symlink would make the archive land (as us)
      // wherever it points.
      if (fs::is_symlink(fs::symlink_status(logs, ec))) fs::remove(logs, ec);
      fs::create_directories(logs, ec);
      const Status s = fleet_->CollectLogs(job.id, job.fleet_handle, logs);
      if (!s.ok()) {
        ++metrics_.fleet_errors;
        store_.RecordEvent(job.id, "Warning", reasons::kLogCollectionFailed, s.message(), kSource);
        // A permanent fault: what could not be archived stays missing; cleanup goes on.
        if (s.retryable()) return Retry("collect logs: " + s.message());
      }
      store_.UpdateJob(job.id, [](Job& j) { j.logs_archived = true; });
      Failpoint("logs-archived");
    }
    if (!job.released) {
      const Status s = fleet_->Release(job.id, job.fleet_handle);
      if (s.in_progress()) {
        // Nothing wrong, nothing to retry: one event (recording it again only bumps its count),
        // and the fleet's notification of the objects' removal brings the job back; the sync
        // period (or a polled fleet's resync) is the safety net.
        store_.RecordEvent(job.id, "Normal", s.reason(), s.message(), FleetSource());
        return After(Resync(NowMs()));
      }
      if (!s.ok()) {
        ++metrics_.fleet_errors;
        store_.RecordEvent(job.id, "Warning", reasons::kReleaseFailed, s.message(), kSource);
        // A permanent fault needs a person (the event says what): retrying will not help.
        if (s.retryable()) return Retry("release: " + s.message());
      }
      store_.UpdateJob(job.id, [](Job& j) { j.released = true; });
    }
    return Done();
  }

  store::Store& store_;
  fleet::Fleet* fleet_;
  objstore::ObjectStore& objects_;
  const Options& options_;
  Metrics& metrics_;
  RecordedFleetEvents& recorded_events_;
  ParsedSpecs& specs_;
};

}  // namespace

bool RecordedFleetEvents::Same(const std::string& job_id,
                               const std::vector<fleet::FleetEvent>& events) {
  std::lock_guard lock(mu_);
  auto it = by_job_.find(job_id);
  return it != by_job_.end() && it->second == events;
}

void RecordedFleetEvents::Remember(const std::string& job_id,
                                   const std::vector<fleet::FleetEvent>& events) {
  std::lock_guard lock(mu_);
  by_job_[job_id] = events;
}

void RecordedFleetEvents::Forget(const std::string& job_id) {
  std::lock_guard lock(mu_);
  by_job_.erase(job_id);
}

StatusOr<std::shared_ptr<const jobspec::JobSpec>> ParsedSpecs::Get(const store::Job& job) {
  {
    std::lock_guard lock(mu_);
    auto it = by_job_.find(job.id);
    if (it != by_job_.end() && it->second.text == job.spec_json) return it->second.spec;
  }
  // Parsed outside the lock: workers reconcile other jobs meanwhile.
  try {
    jobspec::ParseResult r =
        jobspec::FromJson(nlohmann::json::parse(job.spec_json), jobspec::Defaults{});
    if (r.ok()) {
      auto spec = std::make_shared<const jobspec::JobSpec>(std::move(*r.spec));
      std::lock_guard lock(mu_);
      by_job_[job.id] = {job.spec_json, spec};
      return spec;
    }
    std::vector<std::string> lines;
    for (const auto& e : r.errors)
      lines.push_back(e.path + ": " + e.message);
    return Status::Invalid(Join(lines));
  } catch (const nlohmann::json::exception& e) {
    return Status::Invalid(e.what());
  }
}

void ParsedSpecs::Forget(const std::string& job_id) {
  std::lock_guard lock(mu_);
  by_job_.erase(job_id);
}

void Failpoint(const char* point) {
  const char* env = std::getenv("STARFORGE_FAILPOINT");
  if (env != nullptr && std::strcmp(env, point) == 0) ::raise(SIGKILL);
}

Controller::Controller(store::Store& store, std::map<std::string, fleet::Fleet*> fleets,
                       objstore::ObjectStore& objects, Options options)
    : store_(store),
      fleets_(std::move(fleets)),
      objects_(objects),
      options_(std::move(options)),
      queue_(options_.backoff_base, options_.backoff_max) {
  for (auto& [kind, fleet] : fleets_) {
    if (fleet == nullptr) continue;
    fleet->SetNotify([this](const std::string& id) { Enqueue(id); });
    // A job the fleet saw end goes with the ended jobs (cleanup lane, its own workers): its
    // Observe, then its archive, are not queued behind a burst of other jobs' changes.
    fleet->SetNotifyEnded([this](const std::string& id) { queue_.Add(id, Lane::kCleanup); });
  }
}

Controller::~Controller() {
  Stop();
  for (auto& [kind, fleet] : fleets_) {
    if (fleet != nullptr) {
      fleet->SetNotify(nullptr);
      fleet->SetNotifyEnded(nullptr);
    }
  }
}

void Controller::Start() {
  if (running_.exchange(true)) return;
  store::JobFilter filter;
  filter.only_unfinished = true;
  std::vector<store::Job> jobs = store_.ListJobs(filter);
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it)
    queue_.Add(it->id);  // oldest first
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { Worker(Lane::kResync); });
  }
  for (int i = 0; i < options_.cleanup_workers; ++i) {
    workers_.emplace_back([this] { Worker(Lane::kCleanup); });
  }
}

void Controller::Stop() {
  queue_.ShutDown();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
  running_ = false;
}

void Controller::Enqueue(const std::string& job_id) {
  queue_.Add(job_id);
}

fleet::Fleet* Controller::FleetFor(const std::string& kind) {
  auto it = fleets_.find(kind);
  return it == fleets_.end() ? nullptr : it->second;
}

std::optional<milliseconds> Controller::Reconcile(const std::string& job_id) {
  Lane lane = Lane::kResync;
  return ReconcileStep(job_id, &lane);
}

std::optional<milliseconds> Controller::ReconcileStep(const std::string& job_id, Lane* lane) {
  const auto start = std::chrono::steady_clock::now();
  ++metrics_.reconciles;
  Outcome outcome;
  try {
    std::optional<Job> job = store_.GetJob(job_id);
    if (!job) {
      specs_.Forget(job_id);
      outcome = Done();  // nothing to do for a job that does not exist
    } else {
      outcome = Reconciler(store_, FleetFor(job->fleet), objects_, options_, metrics_,
                           recorded_events_, specs_)
                    .Run(std::move(*job));
    }
  } catch (const std::exception& e) {
    outcome = Retry(e.what());
  }

  const auto elapsed = std::chrono::steady_clock::now() - start;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  for (size_t i = 0; i < std::size(Metrics::kBuckets); ++i) {
    if (seconds <= Metrics::kBuckets[i]) ++metrics_.latency_buckets[i];
  }
  ++metrics_.latency_count;
  metrics_.latency_sum_us += std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  *lane = outcome.cleanup ? Lane::kCleanup : Lane::kResync;

  switch (outcome.kind) {
    case Outcome::kDone:
      queue_.Forget(job_id);
      return std::nullopt;
    case Outcome::kAfter:
      queue_.Forget(job_id);
      return outcome.delay;
    case Outcome::kRetry:
      break;
  }
  ++metrics_.reconcile_errors;
  std::fprintf(stderr, "controller: job %s: %s (will retry)\n", job_id.c_str(),
               outcome.error.c_str());
  // The queue owns the per-job backoff; the delay returned is the one it applies.
  return queue_.AddRateLimited(job_id, *lane);
}

void Controller::Worker(Lane worst) {
  // The controller's steps (unpacking, packaging, the store writes of each phase) are background
  // work: below the API's request threads, so a burst of submits is answered first and packaged
  // a moment later, rather than every request waiting behind the packaging of the ones before
  // it (RocksDB lowers its compaction threads the same way). Raising one's own nice needs no
  // privilege; a failure leaves the thread as it was. The cleanup workers stay as the server:
  // their archive and release are short, mostly waiting on the cluster, and what gives the
  // machines back — niced, they waited behind a busy machine's other work at N = 1,000.
  if (options_.worker_nice > 0 && worst != Lane::kCleanup) {
    const auto tid = static_cast<id_t>(::gettid());
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, tid);  // -1 is a valid nice value: errno tells
    if (errno == 0) ::setpriority(PRIO_PROCESS, tid, std::min(19, nice + options_.worker_nice));
  }
  while (std::optional<std::string> key = queue_.Get(worst)) {
    Lane lane = Lane::kResync;
    std::optional<milliseconds> next = ReconcileStep(*key, &lane);
    // After a failure this repeats the backoff AddRateLimited scheduled: AddAfter keeps the
    // earliest, so it is the same retry, not a second one. A next step at once (a phase
    // change) is an event: ahead of the periodic looks.
    if (next) {
      queue_.AddAfter(*key, *next,
                      lane == Lane::kCleanup || next->count() > 0 ? lane : Lane::kEvent);
    }
    queue_.Done(*key);
  }
}

}  // namespace starforge::controller
