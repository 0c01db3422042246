// An informer: a reflector (list, then watch from the list's resourceVersion, resuming after a
// dropped stream and relisting after 410 Expired) feeding a cache of objects keyed by
// "namespace/name", with add/update/delete handlers. This is how controllers observe the
// cluster: one stream per resource instead of polling per object (client-go
// tools/cache/reflector.go). Like client-go's indexer (tools/cache/thread_safe_store.go), it can
// keep indexes (objects by a label's value, …) so that a reader touches only the objects it asks
// for, a transform that trims objects before they are cached (SharedInformer.SetTransform), and
// a filter that keeps out objects no reader needs any more.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "starforge/kube/client.h"

namespace starforge::kube {

struct InformerOptions {
  ResourceRef resource;
  std::string ns;  // "" = all namespaces (or a cluster-scoped resource)
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  // Each watch asks the server to end it after a random time in [min, 2*min) (client-go: 5 min),
  // so streams are renewed and stale connections cannot hang forever.
  std::chrono::seconds min_watch_timeout{300};
  // Backoff between failed list/watch attempts (client-go: 800 ms doubling to 30 s).
  std::chrono::milliseconds backoff_base{800};
  std::chrono::milliseconds backoff_cap{30000};
  // Applied to every listed or watched object before it is cached and handed to the handlers
  // (client-go SetTransform): drop what no reader needs, so that the cache holds less. Must keep
  // metadata.namespace, name and resourceVersion. Unset = objects as the server sent them.
  std::function<void(nlohmann::json& object)> transform;
  // Applied after the transform: an object it rejects is neither cached nor handed to the
  // handlers (one cached before leaves the cache, silently). For objects no reader will look at
  // again, e.g. the Events of a job already archived. Unset = every object. Runs on the
  // informer's thread (under the informer's lock) and in Refilter(): it must not call the
  // informer.
  std::function<bool(const nlohmann::json& object)> keep;
};

// The values an object is filed under in one index (client-go IndexFunc), e.g. a label's value;
// none = not in that index.
using IndexFunc = std::function<std::vector<std::string>(const nlohmann::json& object)>;
// A cached object, shared with the cache (no copy); null = absent. Never modified once cached.
using ObjectPtr = std::shared_ptr<const nlohmann::json>;

// Called on the informer's thread, after the cache was updated, never under the cache lock (a
// handler may read Snapshot()). A handler must not block for long: it delays later events.
struct InformerHandlers {
  std::function<void(const nlohmann::json& object)> on_add;
  std::function<void(const nlohmann::json& old_object, const nlohmann::json& new_object)> on_update;
  std::function<void(const nlohmann::json& last_state)> on_delete;
};

// Counters, mainly for tests: how many lists (initial + relists) and watches were started.
struct InformerStats {
  int64_t lists = 0;
  int64_t relists_after_expired = 0;
  int64_t watches = 0;
  int64_t errors = 0;
  std::string last_error;  // what() of the last failure ("" = none)
};

class Informer {
 public:
  // Does nothing until Start(). `client` must outlive the informer.
  Informer(Client& client, InformerOptions options, InformerHandlers handlers = {});
  ~Informer();  // Stop()s
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Adds index `name` computed by `fn` over every cached object. Call before Start().
  void AddIndex(const std::string& name, IndexFunc fn);

  // Starts the reflector thread.
  void Start();
  // Stops the thread and joins it; returns within about a second. Idempotent.
  void Stop();

  // Blocks until the first list has been applied and its on_add handlers have run (true), or
  // `timeout` passed (false).
  bool WaitForSync(std::chrono::milliseconds timeout);
  bool HasSynced() const;

  // A copy of the cache: key ("ns/name" or "name") -> object. Consistent: taken under one lock.
  std::map<std::string, nlohmann::json> Snapshot() const;
  // Copies of the cached objects `pred` accepts, taken under one lock: cheaper than Snapshot()
  // when few match. `pred` runs under the informer's lock and must not call back into it.
  std::vector<nlohmann::json> Select(const std::function<bool(const nlohmann::json&)>& pred) const;
  // Every cached object, without copies: what a reader that looks at all of them should use
  // (a Snapshot() of 1,000 RayJobs is some 20 MB copied at once).
  std::vector<ObjectPtr> List() const;
  // One cached object, if present.
  std::optional<nlohmann::json> Get(const std::string& key) const;
  // One cached object without a copy, or null.
  ObjectPtr Find(const std::string& key) const;
  // The cached objects index `index` files under `value`, by key, without copies (empty for an
  // unknown index or value). Costs what it returns, not the size of the cache.
  std::vector<ObjectPtr> ByIndex(const std::string& index, const std::string& value) const;
  // Asks `keep` again about the objects `index` files under `value`, and drops those it now
  // rejects: after what `keep` depends on changed. Costs what the value holds.
  void Refilter(const std::string& index, const std::string& value);
  // How many objects are cached.
  size_t Size() const;
  // The resourceVersion the reflector will resume from.
  std::string LastResourceVersion() const;
  InformerStats stats() const;

  // The cache key of an object: "metadata.namespace/metadata.name", or the name alone.
  static std::string KeyOf(const nlohmann::json& object);

 private:
  void Run();
  // Lists everything and replaces the cache, emitting the differences. False when stopped.
  bool Relist();
  // Watches from the last rv until the stream ends. Throws ApiError.
  void WatchOnce();
  void Apply(WatchEventType type, nlohmann::json object);
  // Files `key` under the indexes' values of `now` instead of those of `before` (null = none).
  // With `now`, `key` must be the cache's own key (the indexes keep views of it); call it before
  // that key leaves the cache.
  void ReindexLocked(std::string_view key, const nlohmann::json* before, const nlohmann::json* now);
  void Fail(const std::exception& e);
  // Sleeps `d` unless stopped first; false when stopped.
  bool SleepUnlessStopped(std::chrono::milliseconds d);

  Client& client_;
  InformerOptions options_;
  InformerHandlers handlers_;

  std::atomic<bool> stop_{false};
  std::thread thread_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::map<std::string, ObjectPtr, std::less<>> cache_;  // less<>: found by the indexes' views
  struct Index {
    IndexFunc fn;
    // value -> keys, as views of cache_'s keys: thousands of Events are each filed under
    // several values, and a copy of the key for each was a good part of the indexes' memory.
    std::unordered_map<std::string, std::set<std::string_view>> keys;
  };
  std::map<std::string, Index> indexes_;
  std::string last_rv_;
  bool synced_ = false;
  InformerStats stats_;
};

}  // namespace starforge::kube
