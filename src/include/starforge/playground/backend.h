// Where playgrounds run: the kuberay fleet's cluster (one Pod + Service each) or this machine.
// Like fleet::Fleet, every method is idempotent and keyed by the playground's id, so the
// reconciler may repeat any call after a crash.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/api_errors.h"
#include "starforge/common/reasons.h"
#include "starforge/common/status.h"
#include "starforge/fleet/fleet.h"
#include "starforge/playground/spec.h"
#include "starforge/store/playground.h"

namespace starforge::playground {

struct Observation {
  store::PlaygroundState state = store::PlaygroundState::kPending;  // Pending | Ready | Failed
  std::string reason;
  std::string message;
  nlohmann::json events = nlohmann::json::array();  // diagnosis events (Kubernetes Events)
  bool retryable_error = false;                     // the observation itself failed; try again
};

// One request to the model server's OpenAI-compatible API.
struct ProxyCall {
  std::string method;  // GET | POST
  std::string path;    // "v1/chat/completions", "v1/completions", "v1/models"
  std::string body;
  std::string content_type;
};

struct ProxyReply {
  int status = 0;  // 0: the server was not reached (message says why)
  std::string content_type;
  std::string body;  // when not streamed (or not 2xx)
  std::string message;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string Kind() const = 0;
  // Whether `spec` could ever run here (the same accounting as jobs).
  virtual fleet::Admission Admit(const store::Playground& row, const Spec& spec) = 0;
  // Creates the model server, or finds it created. Not ok: retryable or not.
  virtual Status Create(const store::Playground& row, const Spec& spec) = 0;
  virtual Observation Observe(const store::Playground& row, const Spec& spec) = 0;
  // Deletes everything of it; ok once gone.
  virtual Status Delete(const store::Playground& row) = 0;
  // Forwards one request; a 2xx body goes to `on_data` when set (streaming), else into the reply.
  virtual ProxyReply Proxy(const store::Playground& row, const ProxyCall& call,
                           const std::function<bool(std::string_view)>& on_data,
                           const std::atomic<bool>* stop) = 0;
  // The server's log (the last `tail_lines` lines; 0 = all).
  virtual Status Logs(const store::Playground& row, int64_t tail_lines, std::string* out) = 0;
  // Requests sent to the cluster (the closing note's figure); 0 when not counted.
  virtual int64_t ApiRequests() const { return 0; }
  // Why this server cannot run a playground here at all, saying what to configure ("" when it
  // can): what the console shows instead of a start form.
  virtual std::string Unavailable() const { return ""; }
};

// `fleet`'s Admit() of the playground as a one-machine job, its field names turned into the
// request's (gpus, series, cpus, memory): the job's mean nothing to a playground's user.
fleet::Admission AdmitAsJob(fleet::Fleet& fleet, const jobspec::JobSpec& job);

// A kind this server cannot run playgrounds on: every start is refused with `message`.
class UnavailableBackend : public Backend {
 public:
  UnavailableBackend(std::string kind, std::string message)
      : kind_(std::move(kind)), message_(std::move(message)) {}
  std::string Kind() const override { return kind_; }
  fleet::Admission Admit(const store::Playground&, const Spec&) override {
    return {false, message_, "fleet"};
  }
  Status Create(const store::Playground&, const Spec&) override {
    return Status::Permanent(reasons::kRejected, message_);
  }
  Observation Observe(const store::Playground&, const Spec&) override {
    Observation o;
    o.retryable_error = true;
    o.message = message_;
    return o;
  }
  Status Delete(const store::Playground&) override { return Status::Ok(); }
  ProxyReply Proxy(const store::Playground&, const ProxyCall&,
                   const std::function<bool(std::string_view)>&,
                   const std::atomic<bool>*) override {
    return {0, "", "", message_};
  }
  Status Logs(const store::Playground&, int64_t, std::string*) override {
    return Status::Permanent(api_errors::kUnavailable, message_);
  }
  std::string Unavailable() const override { return message_; }

 private:
  std::string kind_;
  std::string message_;
};

}  // namespace starforge::playground
