// The reflector loop and cache (client-go tools/cache/reflector.go, simplified).
#include "starforge/kube/informer.h"

#include <random>
#include <vector>

#include <fmt/format.h>

#include "starforge/net/http.h"

namespace starforge::kube {

using nlohmann::json;

namespace {

std::string RvOf(const json& object) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return {};
  return m->value("resourceVersion", "");
}

}  // namespace

std::string Informer::KeyOf(const json& object) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return {};
  return ObjectKey(m->value("namespace", ""), m->value("name", ""));
}

Informer::Informer(Client& client, InformerOptions options, InformerHandlers handlers)
    : client_(client), options_(std::move(options)), handlers_(std::move(handlers)) {}

Informer::~Informer() {
  Stop();
}

void Informer::Start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_; });
}

bool Informer::HasSynced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

void Informer::AddIndex(const std::string& name, IndexFunc fn) {
  std::lock_guard lock(mu_);
  Index& index = indexes_[name];
  index.fn = std::move(fn);
  index.keys.clear();
  for (const auto& [key, obj] : cache_)
    for (const std::string& v : index.fn(*obj))
      index.keys[v].insert(key);
}

void Informer::ReindexLocked(std::string_view key, const json* before, const json* now) {
  for (auto& [name, index] : indexes_) {
    if (before != nullptr) {
      for (const std::string& v : index.fn(*before)) {
        auto it = index.keys.find(v);
        if (it == index.keys.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) index.keys.erase(it);
      }
    }
    if (now != nullptr) {
      for (const std::string& v : index.fn(*now))
        index.keys[v].insert(key);
    }
  }
}

std::map<std::string, json> Informer::Snapshot() const {
  std::lock_guard lock(mu_);
  std::map<std::string, json> out;
  for (const auto& [key, obj] : cache_)
    out.emplace_hint(out.end(), key, *obj);
  return out;
}

std::vector<json> Informer::Select(const std::function<bool(const json&)>& pred) const {
  std::vector<json> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, obj] : cache_)
    if (pred(*obj)) out.push_back(*obj);
  return out;
}

std::vector<ObjectPtr> Informer::List() const {
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(cache_.size());
  for (const auto& [key, obj] : cache_)
    out.push_back(obj);
  return out;
}

std::optional<json> Informer::Get(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return std::nullopt;
  return *it->second;
}

ObjectPtr Informer::Find(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = cache_.find(key);
  return it == cache_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Informer::ByIndex(const std::string& index, const std::string& value) const {
  std::vector<ObjectPtr> out;
  std::lock_guard lock(mu_);
  auto i = indexes_.find(index);
  if (i == indexes_.end()) return out;
  auto v = i->second.keys.find(value);
  if (v == i->second.keys.end()) return out;
  out.reserve(v->second.size());
  for (std::string_view key : v->second) {
    if (auto it = cache_.find(key); it != cache_.end()) out.push_back(it->second);
  }
  return out;
}

void Informer::Refilter(const std::string& index, const std::string& value) {
  if (!options_.keep) return;
  for (const ObjectPtr& obj : ByIndex(index, value)) {
    if (options_.keep(*obj)) continue;
    const std::string key = KeyOf(*obj);
    std::lock_guard lock(mu_);
    // Only the object asked about: a newer version may have come meanwhile.
    auto it = cache_.find(key);
    if (it == cache_.end() || it->second != obj) continue;
    ReindexLocked(key, obj.get(), nullptr);
    cache_.erase(it);
  }
}

size_t Informer::Size() const {
  std::lock_guard lock(mu_);
  return cache_.size();
}

std::string Informer::LastResourceVersion() const {
  std::lock_guard lock(mu_);
  return last_rv_;
}

InformerStats Informer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool Informer::SleepUnlessStopped(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_.load(); });
}

void Informer::Fail(const std::exception& e) {
  std::lock_guard lock(mu_);
  ++stats_.errors;
  stats_.last_error = e.what();
}

bool Informer::Relist() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.stop = &stop_;
  json list = client_.ListAll(options_.resource, options_.ns, lo, options_.page_size);
  if (stop_) return false;
  std::map<std::string, ObjectPtr, std::less<>> fresh;
  for (auto& item : list["items"]) {
    if (options_.transform) options_.transform(item);
    std::string key = KeyOf(item);
    fresh[key] = std::make_shared<const json>(std::move(item));
  }
  // The differences between the old cache and the list are what a watcher would have seen.
  struct Change {
    WatchEventType type;
    ObjectPtr old_object;
    ObjectPtr object;
  };
  std::vector<Change> changes;
  {
    std::lock_guard lock(mu_);
    // `keep` asked under the lock, as in Apply.
    for (auto it = fresh.begin(); options_.keep && it != fresh.end();) {
      it = options_.keep(*it->second) ? std::next(it) : fresh.erase(it);
    }
    for (const auto& [key, obj] : fresh) {
      auto it = cache_.find(key);
      if (it == cache_.end()) {
        changes.push_back({WatchEventType::kAdded, nullptr, obj});
      } else if (RvOf(*it->second) != RvOf(*obj) || *it->second != *obj) {
        changes.push_back({WatchEventType::kModified, it->second, obj});
      }
    }
    for (const auto& [key, obj] : cache_) {
      if (!fresh.count(key)) changes.push_back({WatchEventType::kDeleted, obj, obj});
    }
    cache_ = std::move(fresh);
    for (auto& [name, index] : indexes_) {
      index.keys.clear();
      for (const auto& [key, obj] : cache_)
        for (const std::string& v : index.fn(*obj))
          index.keys[v].insert(key);
    }
    if (auto m = list.find("metadata"); m != list.end() && m->is_object()) {
      last_rv_ = m->value("resourceVersion", "");
    }
    ++stats_.lists;
  }
  for (const auto& c : changes) {
    try {
      if (c.type == WatchEventType::kAdded && handlers_.on_add) handlers_.on_add(*c.object);
      if (c.type == WatchEventType::kModified && handlers_.on_update) {
        handlers_.on_update(*c.old_object, *c.object);
      }
      if (c.type == WatchEventType::kDeleted && handlers_.on_delete) handlers_.on_delete(*c.object);
    } catch (const std::exception& e) {
      Fail(e);  // a handler's bug must not stop the informer
    }
  }
  // Synced only once the handlers have seen the first list, so a caller that waited for sync
  // may rely on its on_add calls having happened.
  {
    std::lock_guard lock(mu_);
    synced_ = true;
  }
  cv_.notify_all();
  return true;
}

void Informer::Apply(WatchEventType type, json object) {
  std::string rv = RvOf(object);
  if (type == WatchEventType::kBookmark) {
    std::lock_guard lock(mu_);
    if (!rv.empty()) last_rv_ = rv;
    return;
  }
  if (options_.transform) options_.transform(object);
  std::string key = KeyOf(object);
  ObjectPtr old;
  auto now = std::make_shared<const json>(std::move(object));
  bool kept = true;
  {
    std::lock_guard lock(mu_);
    // Asked under the lock: a Refilter() after what `keep` reads changed then finds whatever
    // this adds (asked before the lock, it could add an object that Refilter had just missed).
    kept = !options_.keep || options_.keep(*now);
    auto it = cache_.find(key);
    if (it != cache_.end()) old = it->second;
    if (type == WatchEventType::kDeleted || !kept) {
      if (it != cache_.end()) {
        ReindexLocked(key, old.get(), nullptr);
        cache_.erase(it);
      }
    } else {
      auto stored = cache_.insert_or_assign(it, key, now);
      ReindexLocked(stored->first, old.get(), now.get());
    }
    if (!rv.empty()) last_rv_ = rv;
  }
  if (!kept) return;  // silently: for the handlers, the object never was
  try {
    if (type == WatchEventType::kDeleted) {
      if (handlers_.on_delete) handlers_.on_delete(*now);
    } else if (old) {
      if (handlers_.on_update) handlers_.on_update(*old, *now);
    } else if (handlers_.on_add) {
      handlers_.on_add(*now);
    }
  } catch (const std::exception& e) {
    Fail(e);
  }
}

void Informer::WatchOnce() {
  WatchOptions wo;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.resource_version = LastResourceVersion();
  wo.allow_bookmarks = true;
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  int64_t min = options_.min_watch_timeout.count();
  wo.timeout_seconds =
      min + std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(0, min - 1))(rng);
  {
    std::lock_guard lock(mu_);
    ++stats_.watches;
  }
  client_.Watch(
      options_.resource, options_.ns, wo,
      [this](WatchEvent& e) {
        Apply(e.type, std::move(e.object));
        return !stop_.load();
      },
      &stop_);
}

void Informer::Run() {
  bool need_list = true;
  int failures = 0;
  std::mt19937_64 rng{std::random_device{}()};
  auto backoff = [&]() {
    const double uniform01 = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    return net::Backoff(failures, options_.backoff_base, options_.backoff_cap, uniform01);
  };
  while (!stop_) {
    try {
      if (need_list) {
        if (!Relist()) break;
        need_list = false;
      }
      auto started = std::chrono::steady_clock::now();
      std::string rv_before = LastResourceVersion();
      WatchOnce();
      if (stop_) break;
      // A stream that ended at once without progress means the server is unwell (client-go's
      // "very short watch"): back off instead of spinning.
      bool short_watch = std::chrono::steady_clock::now() - started < std::chrono::seconds(1) &&
                         LastResourceVersion() == rv_before;
      failures = short_watch ? failures + 1 : 0;
      if (short_watch && !SleepUnlessStopped(backoff())) break;
    } catch (const ApiError& e) {
      if (stop_) break;
      if (IsExpired(e)) {
        // Our resourceVersion fell out of the server's history: only a fresh list can tell
        // what changed meanwhile.
        std::lock_guard lock(mu_);
        ++stats_.relists_after_expired;
        need_list = true;
        continue;
      }
      Fail(e);
      ++failures;
      if (!SleepUnlessStopped(backoff())) break;
    } catch (const std::exception& e) {
      if (stop_) break;
      Fail(e);
      ++failures;
      need_list = true;  // an unparseable stream: start over from a clean list
      if (!SleepUnlessStopped(backoff())) break;
    }
  }
}

}  // namespace starforge::kube
