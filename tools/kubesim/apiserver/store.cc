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

}  // namespace

Store::Store(size_t history_cap) : history_cap_(history_cap) {}

json* Store::Get(const std::string& storage, const std::string& ns, const std::string& name) {
  auto s = objects_.find(storage);
  if (s == objects_.end()) return nullptr;
  auto it = s->second.find(Key(ns, name));
  return it == s->second.end() ? nullptr : &it->second;
}

std::vector<const json*> Store::List(const std::string& storage, const std::string& ns) const {
  std::vector<const json*> out;
  auto s = objects_.find(storage);
  if (s == objects_.end()) return out;
  for (const auto& [key, obj] : s->second) {
    if (ns.empty() || obj["metadata"].value("namespace", "") == ns) out.push_back(&obj);
  }
  return out;
}

bool Store::NamespaceExists(const std::string& ns) {
  return Get("namespaces", "", ns) != nullptr;
}

void Store::Record(const std::string& type, const std::string& storage, const json& obj,
                   const json& old) {
  history_.push_back(WatchEvent{rv_, type, storage, obj, old});
  while (history_.size() > history_cap_) {
    oldest_ = history_.front().rv;
    history_.pop_front();
  }
  cv.notify_all();
}

void Store::CountUid(const json& obj, bool add) {
  const std::string uid = obj["metadata"].value("uid", "");
  if (add) {
    ++uids_[uid];
    return;
  }
  auto it = uids_.find(uid);
  if (it != uids_.end() && --it->second == 0) uids_.erase(it);
}

json Store::Create(const std::string& storage, json obj) {
  obj["metadata"]["resourceVersion"] = std::to_string(NextRv());
  json& slot = objects_[storage][KeyOf(obj)];
  if (!slot.is_null()) CountUid(slot, false);
  slot = obj;
  CountUid(obj, true);
  Record("ADDED", storage, obj, json());
  // An object may be created with ownerReferences to owners that are already gone; a new object
  // cannot leave others dangling, so collection runs only then.
  const json& refs = obj["metadata"].contains("ownerReferences")
                         ? obj["metadata"]["ownerReferences"]
                         : json::array();
  for (const auto& ref : refs.is_array() ? refs : json::array()) {
    if (uids_.count(ref.value("uid", "")) == 0) {
      RunGc();
      break;
    }
  }
  return obj;
}

json Store::Update(const std::string& storage, json obj) {
  const std::string key = KeyOf(obj);
  json& slot = objects_[storage][key];
  json old = slot;
  obj["metadata"]["resourceVersion"] = std::to_string(NextRv());
  if (!old.is_null()) CountUid(old, false);
  CountUid(obj, true);
  slot = obj;
  Record("MODIFIED", storage, obj, old);
  bool gc = false;
  if (obj["metadata"].contains("deletionTimestamp") && NoFinalizers(obj) &&
      grace_until_.count(storage + "|" + key) == 0) {
    Remove(storage, key);
    gc = true;
  }
  // Garbage collection scans every object: only writes that can change its outcome run it
  // (an object removed, owner references changed, finalizers of an object being deleted).
  const json& om = old.is_object() && old.contains("metadata") ? old["metadata"] : json();
  const json& nm = obj["metadata"];
  auto field = [](const json& m, const char* k) {
    return m.is_object() && m.contains(k) ? m[k] : json();
  };
  if (gc || nm.contains("deletionTimestamp") ||
      field(om, "ownerReferences") != field(nm, "ownerReferences") ||
      field(om, "finalizers") != field(nm, "finalizers")) {
    RunGc();
  }
  return obj;
}

void Store::Remove(std::string storage, std::string key) {
  auto& objs = objects_[storage];
  auto it = objs.find(key);
  if (it == objs.end()) return;
  json last = it->second;
  objs.erase(it);
  CountUid(last, false);
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
    json old = it->second;
    md["resourceVersion"] = std::to_string(NextRv());
    it->second = obj;
    Record("MODIFIED", storage, obj, old);
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
  json old = it->second;
  md["resourceVersion"] = std::to_string(NextRv());
  it->second = obj;
  Record("MODIFIED", storage, obj, old);
  return false;
}

Store::DeleteResult Store::Delete(const std::string& storage, const std::string& ns,
                                  const std::string& name, Propagation policy,
                                  int64_t grace_seconds) {
  DeleteResult res;
  json* obj = Get(storage, ns, name);
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
  json* still = Get(storage, ns, name);
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
  if (!due.empty()) RunGc();
}

void Store::Compact() {
  history_.clear();
  oldest_ = rv_;
  cv.notify_all();
}

void Store::RunGc() {
  for (int pass = 0; pass < 100; ++pass) {
    bool changed = false;
    const auto& uids = uids_;
    // Dependents whose owners are gone: delete (all owners gone) or drop the dangling refs.
    for (auto& [st, m] : objects_) {
      std::vector<std::pair<std::string, bool>> work;  // key, delete?
      for (const auto& [k, o] : m) {
        const json& md = o["metadata"];
        if (!md.contains("ownerReferences") || !md["ownerReferences"].is_array() ||
            md["ownerReferences"].empty()) {
          continue;
        }
        size_t dangling = 0;
        for (const auto& ref : md["ownerReferences"]) {
          if (uids.count(ref.value("uid", "")) == 0) ++dangling;
        }
        if (dangling == 0) continue;
        work.emplace_back(k, dangling == md["ownerReferences"].size());
      }
      for (const auto& [k, del] : work) {
        auto it = m.find(k);
        if (it == m.end()) continue;
        if (del) {
          if (it->second["metadata"].contains("deletionTimestamp")) continue;
          DeleteOne(st, k, Propagation::kBackground, -1);
        } else {
          json obj = it->second;
          json refs = json::array();
          for (const auto& ref : obj["metadata"]["ownerReferences"]) {
            if (uids.count(ref.value("uid", "")) != 0) refs.push_back(ref);
          }
          obj["metadata"]["ownerReferences"] = refs;
          json old = it->second;
          obj["metadata"]["resourceVersion"] = std::to_string(NextRv());
          it->second = obj;
          Record("MODIFIED", st, obj, old);
        }
        changed = true;
      }
    }
    if (changed) continue;
    // Owners being deleted with the orphan or foregroundDeletion finalizer.
    for (auto& [st, m] : objects_) {
      for (auto& [k, o] : m) {
        const json& md = o["metadata"];
        if (!md.contains("deletionTimestamp")) continue;
        const bool orphan = HasFinalizer(o, "orphan");
        const bool foreground = HasFinalizer(o, "foregroundDeletion");
        if (!orphan && !foreground) continue;
        const std::string uid = md.value("uid", "");
        std::vector<std::pair<std::string, std::string>> dependents;
        for (const auto& [dst, dm] : objects_) {
          for (const auto& [dk, d] : dm) {
            for (const auto& ref : d["metadata"].value("ownerReferences", json::array())) {
              if (ref.value("uid", "") == uid) dependents.emplace_back(dst, dk);
            }
          }
        }
        if (orphan) {
          for (const auto& [dst, dk] : dependents) {
            json& d = objects_[dst][dk];
            json old = d;
            json refs = json::array();
            for (const auto& ref : d["metadata"]["ownerReferences"]) {
              if (ref.value("uid", "") != uid) refs.push_back(ref);
            }
            d["metadata"]["ownerReferences"] = refs;
            d["metadata"]["resourceVersion"] = std::to_string(NextRv());
            Record("MODIFIED", dst, d, old);
          }
          dependents.clear();
        } else {
          if (!dependents.empty()) {
            const uint64_t before = rv_;
            for (const auto& [dst, dk] : dependents) {
              DeleteOne(dst, dk, Propagation::kForeground, -1);
            }
            if (rv_ != before) {
              changed = true;
              break;
            }
            continue;  // dependents still terminating: the owner waits
          }
        }
        json obj = o;
        RemoveFinalizer(obj, orphan ? "orphan" : "foregroundDeletion");
        json old = o;
        obj["metadata"]["resourceVersion"] = std::to_string(NextRv());
        o = obj;
        Record("MODIFIED", st, obj, old);
        if (NoFinalizers(obj) && grace_until_.count(st + "|" + k) == 0) Remove(st, k);
        changed = true;
        break;
      }
      if (changed) break;
    }
    if (!changed) return;
  }
}

}  // namespace kubesim
