#include "store.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <set>

namespace kubesim {

using nlohmann::json;

std::string NewUid() {
  static std::mt19937_64 rng{std::random_device{}()};
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  uint64_t a = rng();
  uint64_t b = rng();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

namespace {

std::string Key(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}
std::string KeyOf(const json& obj) {
  return Key(obj["metadata"].value("namespace", ""), obj["metadata"].value("name", ""));
}
bool HasFinalizer(const json& obj, const std::string& f) {
  const json& md = obj["metadata"];
  if (!md.contains("finalizers") || !md["finalizers"].is_array()) return false;
  return std::find(md["finalizers"].begin(), md["finalizers"].end(), f) != md["finalizers"].end();
}
bool NoFinalizers(const json& obj) {
  const json& md = obj["metadata"];
  return !md.contains("finalizers") || !md["finalizers"].is_array() || md["finalizers"].empty();
}
void RemoveFinalizer(json& obj, const std::string& f) {
  json& fs = obj["metadata"]["finalizers"];
  fs.erase(std::remove(fs.begin(), fs.end(), json(f)), fs.end());
  if (fs.empty()) obj["metadata"].erase("finalizers");
}

// The uids an object's ownerReferences name, each once.
std::set<std::string> OwnerUids(const json* obj) {
  std::set<std::string> out;
  if (obj == nullptr) return out;
  const json& md = (*obj)["metadata"];
  if (!md.contains("ownerReferences") || !md["ownerReferences"].is_array()) return out;
  for (const auto& ref : md["ownerReferences"])
    out.insert(ref.value("uid", ""));
  return out;
}
std::string UidOf(const json& obj) {
  return obj["metadata"].value("uid", "");
}
// Being deleted and waiting for the collector: orphan its dependents or delete them first.
bool AwaitsCollector(const json& obj) {
  return obj["metadata"].contains("deletionTimestamp") &&
         (HasFinalizer(obj, "orphan") || HasFinalizer(obj, "foregroundDeletion"));
}

}  // namespace

Store::Store(size_t history_cap) : history_cap_(history_cap) {}

const json* Store::Get(const std::string& storage, const std::string& ns,
                       const std::string& name) const {
  auto s = objects_.find(storage);
  if (s == objects_.end()) return nullptr;
  auto it = s->second.find(Key(ns, name));
  return it == s->second.end() ? nullptr : &it->second;
}

std::vector<const json*> Store::List(const std::string& storage, const std::string& ns) const {
  std::vector<const json*> out;
  auto s = objects_.find(storage);
  if (s == objects_.end()) return out;
  if (ns.empty()) {
    for (const auto& [key, obj] : s->second)
      out.push_back(&obj);
    return out;
  }
  // Keys are "namespace/name": a namespace's objects are one run of the map.
  const std::string prefix = ns + "/";
  for (auto it = s->second.lower_bound(prefix);
       it != s->second.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out.push_back(&it->second);
  }
  return out;
}

std::vector<const json*> Store::ListByLabel(const std::string& storage, const std::string& ns,
                                            const std::string& key,
                                            const std::string& value) const {
  std::vector<const json*> out;
  auto s = objects_.find(storage);
  if (s == objects_.end()) return out;
  std::string ix = storage;
  ix += '\0';
  ix += key;
  ix += '\0';
  ix += value;
  auto keys = by_label_.find(ix);
  if (keys == by_label_.end()) return out;
  const std::string prefix = ns.empty() ? "" : ns + "/";
  for (const std::string& k : keys->second) {
    if (!prefix.empty() && k.compare(0, prefix.size(), prefix) != 0) continue;
    auto it = s->second.find(k);
    if (it != s->second.end()) out.push_back(&it->second);
  }
  return out;
}

bool Store::NamespaceExists(const std::string& ns) {
  return Get("namespaces", "", ns) != nullptr;
}

void Store::Record(const std::string& type, const std::string& storage, const json& obj,
                   const json& old) {
  history_.push_back(WatchEvent{rv_, type, storage, obj, old, {}});
  while (history_.size() > history_cap_) {
    oldest_ = history_.front().rv;
    history_.pop_front();
  }
  cv.notify_all();
}

namespace {

// The string-valued labels of an object (what the label index files it under).
std::map<std::string, std::string> StringLabels(const json* obj) {
  std::map<std::string, std::string> out;
  if (obj == nullptr) return out;
  const auto md = obj->find("metadata");
  if (md == obj->end() || !md->is_object()) return out;
  const auto labels = md->find("labels");
  if (labels == md->end() || !labels->is_object()) return out;
  for (const auto& [k, v] : labels->items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

}  // namespace

void Store::Index(const std::string& storage, const std::string& key, const json* old,
                  const json* now) {
  const Ref self{storage, key};
  {
    const auto old_labels = StringLabels(old);
    const auto new_labels = StringLabels(now);
    auto ix = [&storage](const std::string& k, const std::string& v) {
      std::string s = storage;
      s += '\0';
      s += k;
      s += '\0';
      s += v;
      return s;
    };
    for (const auto& [k, v] : old_labels) {
      auto n = new_labels.find(k);
      if (n != new_labels.end() && n->second == v) continue;
      auto it = by_label_.find(ix(k, v));
      if (it == by_label_.end()) continue;
      it->second.erase(key);
      if (it->second.empty()) by_label_.erase(it);
    }
    for (const auto& [k, v] : new_labels) {
      auto o = old_labels.find(k);
      if (o != old_labels.end() && o->second == v) continue;
      by_label_[ix(k, v)].insert(key);
    }
  }
  const std::string old_uid = old != nullptr ? UidOf(*old) : "";
  const std::string new_uid = now != nullptr ? UidOf(*now) : "";
  if (old != nullptr && (now == nullptr || old_uid != new_uid)) {
    auto it = by_uid_.find(old_uid);
    if (it != by_uid_.end()) {
      it->second.erase(self);
      if (it->second.empty()) {
        // The last object with this uid is gone: whatever names it as owner is now dangling.
        by_uid_.erase(it);
        auto deps = dependents_.find(old_uid);
        if (deps != dependents_.end()) check_refs_.insert(deps->second.begin(), deps->second.end());
      }
    }
  }
  if (now != nullptr && (old == nullptr || old_uid != new_uid)) by_uid_[new_uid].insert(self);

  const std::set<std::string> old_owners = OwnerUids(old);
  const std::set<std::string> new_owners = OwnerUids(now);
  for (const auto& uid : old_owners) {
    if (new_owners.count(uid) != 0) continue;
    auto it = dependents_.find(uid);
    if (it == dependents_.end()) continue;
    it->second.erase(self);
    if (it->second.empty()) dependents_.erase(it);
  }
  for (const auto& uid : new_owners) {
    dependents_[uid].insert(self);
    if (by_uid_.count(uid) == 0) check_refs_.insert(self);  // created or patched dangling
  }
  // An owner waiting for its dependents looks again whenever one of them changes or goes.
  auto wake = [&](const std::string& uid) {
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end()) return;
    for (const Ref& owner : it->second) {
      if (owners_deleting_.count(owner) != 0) check_owners_.insert(owner);
    }
  };
  for (const auto& uid : old_owners)
    wake(uid);
  for (const auto& uid : new_owners) {
    if (old_owners.count(uid) == 0) wake(uid);
  }

  if (now != nullptr && AwaitsCollector(*now)) {
    owners_deleting_.insert(self);
    check_owners_.insert(self);
  } else {
    owners_deleting_.erase(self);
    check_owners_.erase(self);
  }
}

json Store::Create(const std::string& storage, json obj) {
  obj["metadata"]["resourceVersion"] = std::to_string(NextRv());
  const std::string key = KeyOf(obj);
  json& slot = objects_[storage][key];
  const json old = slot;
  slot = obj;
  Index(storage, key, old.is_null() ? nullptr : &old, &slot);
  Record("ADDED", storage, obj, json());
  // An object may be created with ownerReferences to owners that are already gone.
  RunGc();
  return obj;
}

json Store::Update(const std::string& storage, json obj) {
  const std::string key = KeyOf(obj);
  json& slot = objects_[storage][key];
  json old = slot;
  obj["metadata"]["resourceVersion"] = std::to_string(NextRv());
  slot = obj;
  Index(storage, key, old.is_null() ? nullptr : &old, &slot);
  Record("MODIFIED", storage, obj, old);
  if (obj["metadata"].contains("deletionTimestamp") && NoFinalizers(obj) &&
      grace_until_.count(storage + "|" + key) == 0) {
    Remove(storage, key);
  }
  // Only the objects this write affected (Index queued them) are looked at.
  RunGc();
  return obj;
}

void Store::Replace(const std::string& storage, const std::string& key, json obj) {
  json& slot = objects_[storage][key];
  const json old = slot;
  obj["metadata"]["resourceVersion"] = std::to_string(NextRv());
  slot = obj;
  Index(storage, key, &old, &slot);
  Record("MODIFIED", storage, obj, old);
}

void Store::Remove(std::string storage, std::string key) {
  auto& objs = objects_[storage];
  auto it = objs.find(key);
  if (it == objs.end()) return;
  json last = it->second;
  objs.erase(it);
  Index(storage, key, &last, nullptr);
  grace_until_.erase(storage + "|" + key);
  last["metadata"]["resourceVersion"] = std::to_string(NextRv());
  Record("DELETED", storage, last, last);
  if (storage == "namespaces") {
    // The namespace controller's job, done at once: delete everything in the namespace.
    const std::string ns = last["metadata"].value("name", "");
    for (auto& [st, m] : objects_) {
      std::vector<std::string> keys;
      for (const auto& [k, o] : m) {
        if (o["metadata"].value("namespace", "") == ns) keys.push_back(k);
      }
      for (const auto& k : keys) {
        auto f = m.find(k);
        if (f == m.end()) continue;
        json gone = f->second;
        m.erase(f);
        Index(st, k, &gone, nullptr);
        grace_until_.erase(st + "|" + k);
        gone["metadata"]["resourceVersion"] = std::to_string(NextRv());
        Record("DELETED", st, gone, gone);
      }
    }
  }
}

bool Store::DeleteOne(const std::string& storage, const std::string& key, Propagation policy,
                      int64_t grace_seconds) {
  auto& objs = objects_[storage];
  auto it = objs.find(key);
  if (it == objs.end()) return true;
  json obj = it->second;
  json& md = obj["metadata"];
  if (md.contains("deletionTimestamp")) {
    // Already being deleted. A pod's grace period may only shrink: the kubelet's final DELETE
    // with gracePeriodSeconds=0 (its processes are gone) removes it now.
    const std::string gk = storage + "|" + key;
    if (storage != "pods" || grace_seconds < 0 || grace_until_.count(gk) == 0 ||
        grace_seconds >= md.value("deletionGracePeriodSeconds", int64_t{0})) {
      return false;
    }
    if (grace_seconds == 0) {
      grace_until_.erase(gk);
      if (NoFinalizers(obj)) {
        Remove(storage, key);
        return true;
      }
    } else {
      grace_until_[gk] = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
    }
    md["deletionGracePeriodSeconds"] = grace_seconds;
    Replace(storage, key, std::move(obj));
    return false;
  }
  if (policy == Propagation::kOrphan && !HasFinalizer(obj, "orphan")) {
    md["finalizers"].push_back("orphan");
  } else if (policy == Propagation::kForeground && !HasFinalizer(obj, "foregroundDeletion")) {
    md["finalizers"].push_back("foregroundDeletion");
  }
  // Pods are deleted gracefully when bound to a node and not terminal.
  int64_t grace = 0;
  if (storage == "pods") {
    const std::string phase = obj.contains("status") ? obj["status"].value("phase", "") : "";
    const bool bound = obj.contains("spec") && !obj["spec"].value("nodeName", "").empty();
    if (bound && phase != "Succeeded" && phase != "Failed") {
      grace = grace_seconds >= 0 ? grace_seconds
                                 : obj["spec"].value("terminationGracePeriodSeconds", int64_t{30});
    }
  }
  if (NoFinalizers(obj) && grace == 0) {
    Remove(storage, key);
    return true;
  }
  md["deletionTimestamp"] = NowRfc3339();
  md["deletionGracePeriodSeconds"] = grace;
  if (grace > 0) {
    grace_until_[storage + "|" + key] =
        std::chrono::steady_clock::now() + std::chrono::seconds(grace);
  }
  Replace(storage, key, std::move(obj));
  return false;
}

Store::DeleteResult Store::Delete(const std::string& storage, const std::string& ns,
                                  const std::string& name, Propagation policy,
                                  int64_t grace_seconds) {
  DeleteResult res;
  const json* obj = Get(storage, ns, name);
  if (obj == nullptr) return res;
  const std::string key = Key(ns, name);
  res.gone = DeleteOne(storage, key, policy, grace_seconds);
  if (!res.gone) {
    res.object = objects_[storage][key];
  } else {
    res.object = history_.empty() ? json() : history_.back().object;
    for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
      if (it->type == "DELETED" && it->storage == storage && KeyOf(it->object) == key) {
        res.object = it->object;
        break;
      }
    }
  }
  RunGc();
  const json* still = Get(storage, ns, name);
  if (!res.gone && still == nullptr) res.gone = true;
  if (still != nullptr) res.object = *still;
  return res;
}

void Store::Tick() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> due;
  for (const auto& [k, t] : grace_until_) {
    if (t <= now) due.push_back(k);
  }
  for (const auto& k : due) {
    grace_until_.erase(k);
    const auto bar = k.find('|');
    const std::string storage = k.substr(0, bar);
    const std::string key = k.substr(bar + 1);
    auto& objs = objects_[storage];
    auto it = objs.find(key);
    if (it != objs.end() && NoFinalizers(it->second)) Remove(storage, key);
  }
  RunGc();
}

void Store::Compact() {
  history_.clear();
  oldest_ = rv_;
  cv.notify_all();
}

void Store::RunGc() {
  // Every step either changes nothing or moves an object towards its end (a deletion started,
  // a reference or finalizer dropped), and only changes queue more work: this ends. Dangling
  // references go first, as an owner's foreground wait depends on its dependents' deletion.
  while (!check_refs_.empty() || !check_owners_.empty()) {
    if (!check_refs_.empty()) {
      const Ref ref = *check_refs_.begin();
      check_refs_.erase(check_refs_.begin());
      CollectDangling(ref);
    } else {
      const Ref ref = *check_owners_.begin();
      check_owners_.erase(check_owners_.begin());
      FinishOwnerDeletion(ref);
    }
  }
}

void Store::CollectDangling(const Ref& ref) {
  const auto& [st, k] = ref;
  auto s = objects_.find(st);
  if (s == objects_.end()) return;
  auto it = s->second.find(k);
  if (it == s->second.end()) return;
  const json& md = it->second["metadata"];
  if (!md.contains("ownerReferences") || !md["ownerReferences"].is_array()) return;
  const json& refs = md["ownerReferences"];
  size_t dangling = 0;
  for (const auto& r : refs) {
    if (by_uid_.count(r.value("uid", "")) == 0) ++dangling;
  }
  if (dangling == 0) return;
  if (dangling == refs.size()) {
    // Every owner is gone: delete it in the background (unless already being deleted).
    if (!md.contains("deletionTimestamp")) DeleteOne(st, k, Propagation::kBackground, -1);
    return;
  }
  // Some owners remain: drop the references to the ones that are gone.
  json obj = it->second;
  json kept = json::array();
  for (const auto& r : refs) {
    if (by_uid_.count(r.value("uid", "")) != 0) kept.push_back(r);
  }
  obj["metadata"]["ownerReferences"] = std::move(kept);
  Replace(st, k, std::move(obj));
}

void Store::FinishOwnerDeletion(const Ref& ref) {
  const auto& [st, k] = ref;
  auto s = objects_.find(st);
  if (s == objects_.end()) return;
  auto it = s->second.find(k);
  if (it == s->second.end() || !AwaitsCollector(it->second)) return;
  const bool orphan = HasFinalizer(it->second, "orphan");
  const std::string uid = UidOf(it->second);
  std::vector<Ref> dependents;
  if (auto d = dependents_.find(uid); d != dependents_.end()) {
    dependents.assign(d->second.begin(), d->second.end());
  }
  if (orphan) {
    for (const auto& [dst, dk] : dependents) {
      auto dit = objects_[dst].find(dk);
      if (dit == objects_[dst].end()) continue;
      json d = dit->second;
      json refs = json::array();
      for (const auto& r : d["metadata"]["ownerReferences"]) {
        if (r.value("uid", "") != uid) refs.push_back(r);
      }
      d["metadata"]["ownerReferences"] = std::move(refs);
      Replace(dst, dk, std::move(d));
    }
  } else if (!dependents.empty()) {
    // Foreground: delete the dependents (foreground too) and wait; each dependent's change or
    // removal queues this owner again.
    for (const auto& [dst, dk] : dependents)
      DeleteOne(dst, dk, Propagation::kForeground, -1);
    return;
  }
  auto again = objects_[st].find(k);
  if (again == objects_[st].end()) return;
  json obj = again->second;
  RemoveFinalizer(obj, orphan ? "orphan" : "foregroundDeletion");
  Replace(st, k, obj);
  if (NoFinalizers(obj) && grace_until_.count(st + "|" + k) == 0) Remove(st, k);
}

}  // namespace kubesim
