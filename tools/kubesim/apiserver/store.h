// The object store: every object in memory keyed by storage/namespace/name, ONE global
// resourceVersion counter, a bounded history of watch events, and the deletion machinery
// (finalizers, deletionTimestamp, graceful pod deletion, ownerReference garbage collection).
// All members must be used with `mu` held; writers notify `cv` so watches wake up.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/common/format.h"

namespace kubesim {

struct WatchEvent {
  uint64_t rv = 0;
  std::string type;  // ADDED, MODIFIED, DELETED
  std::string storage;
  nlohmann::json object;  // the new state (the last state for DELETED)
  nlohmann::json old;     // the previous state (null for ADDED)
  // The object as each resource presents it, encoded once for every watch of it (a pod event
  // used to be encoded once per watcher: kubesim's controllers and forge serve watch pods six
  // times over). Keyed by the ResourceInfo; written and read with Store::mu held.
  mutable std::vector<std::pair<const void*, std::string>> encoded;
};

enum class Propagation { kBackground, kForeground, kOrphan };

using starforge::NowRfc3339;  // common/format.h
std::string NewUid();

class Store {
 public:
  explicit Store(size_t history_cap);

  std::mutex mu;
  std::condition_variable cv;

  uint64_t CurrentRv() const { return rv_; }
  // Watches starting at rv >= OldestRv() can be served from history.
  uint64_t OldestRv() const { return oldest_; }
  const std::deque<WatchEvent>& History() const { return history_; }

  // The stored object, or null. Read-only: writes go through Create / Update / Delete, which keep
  // the garbage collector's indexes.
  const nlohmann::json* Get(const std::string& storage, const std::string& ns,
                            const std::string& name) const;
  // Objects of `storage` in key order, restricted to `ns` unless empty.
  std::vector<const nlohmann::json*> List(const std::string& storage, const std::string& ns) const;
  // The same restricted to objects whose label `key` is the string `value`, from an index kept
  // on every write (a controller's list by `ray.io/cluster=X` used to scan every pod).
  std::vector<const nlohmann::json*> ListByLabel(const std::string& storage, const std::string& ns,
                                                 const std::string& key,
                                                 const std::string& value) const;
  bool NamespaceExists(const std::string& ns);

  // Stores a new object (metadata fully prepared except resourceVersion); returns it.
  nlohmann::json Create(const std::string& storage, nlohmann::json obj);
  // Replaces an existing object; removes it instead when it is being deleted and has no
  // finalizers left (and no graceful deletion pending). Returns the stored (or last) state.
  nlohmann::json Update(const std::string& storage, nlohmann::json obj);

  struct DeleteResult {
    nlohmann::json object;  // the last state
    bool gone = false;
  };
  // DELETE semantics; runs garbage collection afterwards.
  DeleteResult Delete(const std::string& storage, const std::string& ns, const std::string& name,
                      Propagation policy, int64_t grace_seconds /* -1 = default */);

  // Removes objects whose graceful deletion period ended; call periodically.
  void Tick();
  // Drops the whole watch history (later watches from older rvs get 410 Expired).
  void Compact();
  // Ends every open watch stream.
  void CloseWatches() {
    ++watch_epoch_;
    cv.notify_all();
  }
  uint64_t WatchEpoch() const { return watch_epoch_; }
  bool stopping = false;

 private:
  using Ref = std::pair<std::string, std::string>;  // storage, namespace/name key

  uint64_t NextRv() { return ++rv_; }
  void Record(const std::string& type, const std::string& storage, const nlohmann::json& obj,
              const nlohmann::json& old);
  void Remove(std::string storage, std::string key);  // by value: callers pass map keys
  // Stores `obj` over the existing object at `key` with a new resourceVersion, records MODIFIED.
  void Replace(const std::string& storage, const std::string& key, nlohmann::json obj);
  bool DeleteOne(const std::string& storage, const std::string& key, Propagation policy,
                 int64_t grace_seconds);
  // Garbage collection of what the writes since the last run affected (check_refs_,
  // check_owners_); runs until nothing more changes.
  void RunGc();
  void CollectDangling(const Ref& ref);      // dependents whose owners are gone
  void FinishOwnerDeletion(const Ref& ref);  // orphan / foregroundDeletion finalizers
  // Keeps the indexes below in step with one object's change: `old` and `now` are its states
  // before and after (null when absent). Called on every write to objects_.
  void Index(const std::string& storage, const std::string& key, const nlohmann::json* old,
             const nlohmann::json* now);

  uint64_t rv_ = 1000;
  uint64_t oldest_ = 1000;
  size_t history_cap_;
  uint64_t watch_epoch_ = 0;
  std::deque<WatchEvent> history_;
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;
  std::map<std::string, std::chrono::steady_clock::time_point> grace_until_;  // storage|key

  // The garbage collector's dependency graph, kept by Index() on every write the way
  // Kubernetes' collector builds its graph from informer events, so that a write costs the
  // objects it affects rather than a scan of every object.
  // metadata.uid -> the stored objects carrying it ("is this owner still there?").
  std::unordered_map<std::string, std::set<Ref>> by_uid_;
  // owner uid -> the objects whose ownerReferences name it (present or not).
  std::unordered_map<std::string, std::set<Ref>> dependents_;
  // Objects being deleted that hold the `orphan` or `foregroundDeletion` finalizer.
  std::set<Ref> owners_deleting_;
  // Work for RunGc: objects that may name a missing owner; owners of owners_deleting_ whose
  // own state or dependents changed.
  std::set<Ref> check_refs_;
  std::set<Ref> check_owners_;

  // storage \0 label key \0 value -> the keys (namespace/name) of the objects carrying that
  // label with that string value, in key order; kept by Index().
  std::unordered_map<std::string, std::set<std::string>> by_label_;
};

}  // namespace kubesim
