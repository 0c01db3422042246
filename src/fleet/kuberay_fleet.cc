// The kuberay fleet: I/O around the pure functions of src/kuberay (render, status, diagnose,
// capacity). Reads come from informer caches (watches, not polling); writes are one create per
// job, deletes, and log reads at the end. See docs/kuberay-fleet.md.
#include "starforge/fleet/kuberay_fleet.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "starforge/common/atomic_file.h"
#include "starforge/common/format.h"
#include "starforge/common/json_read.h"
#include "starforge/kube/informer.h"
#include "starforge/kuberay/capacity.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/diagnose.h"
#include "starforge/kuberay/render.h"
#include "starforge/kuberay/resources.h"
#include "starforge/kuberay/status.h"

namespace starforge::fleet {
namespace {

namespace fs = std::filesystem;
namespace res = kube::resources;
using json_read::Field;
using json_read::Label;
using json_read::Name;
using json_read::Str;
using kuberay::Deleting;
using nlohmann::json;

constexpr const char* kFieldManager = "starforge";
// After this many failed CollectLogs calls for one job, what could not be read is recorded in
// collect-errors.txt and archiving ends (the RayJob's TTL frees the cluster regardless).
constexpr int kMaxCollectAttempts = 5;
// Informer index names.
constexpr const char* kByCluster = "by-cluster";          // pods by their RayCluster
constexpr const char* kBySubmitter = "by-submitter";      // pods by their submitter Job
constexpr const char* kByNamePrefix = "involved-prefix";  // events by DashPrefixes(name)

std::vector<json> Values(const std::map<std::string, json>& m) {
  std::vector<json> out;
  out.reserve(m.size());
  for (const auto& [k, v] : m)
    out.push_back(v);
  return out;
}

// managedFields: nothing here reads them, and they are a good part of every object (an
// informer's transform).
void StripManagedFields(json& obj) {
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) m->erase("managedFields");
}

using Keys = std::initializer_list<const char*>;

// `keys` erased from `obj`, an object (else nothing).
void Erase(json& obj, Keys keys) {
  if (!obj.is_object()) return;
  for (const char* k : keys)
    obj.erase(k);
}

// `keys` erased from each object of the arrays `lists` of `obj` (its containers, their statuses).
void EraseFromEach(json& obj, Keys lists, Keys keys) {
  if (!obj.is_object()) return;
  for (const char* list : lists) {
    auto items = obj.find(list);
    if (items == obj.end() || !items->is_array()) continue;
    for (json& item : *items)
      Erase(item, keys);
  }
}

// Of a pod spec, what the fleet reads (diagnosis, capacity): each container's name, image,
// resources and ports, not its command, args, env, mounts or probes, nor the pod's volumes —
// the bulk of a Ray pod or a submitter's template (and the capsule's presigned URL). With 1,000
// jobs at once the caches are most of forge serve's memory (docs/kuberay-fleet.md, Scale).
// (Nor the settings no reader looks at: DNS, service account, security context, priority,
// termination message; a pod as cached was 4× its JSON in memory.)
void TrimPodSpec(json& spec) {
  Erase(spec, {"volumes", "dnsPolicy", "enableServiceLinks", "preemptionPolicy", "priority",
               "schedulerName", "securityContext", "serviceAccount", "serviceAccountName",
               "terminationGracePeriodSeconds"});
  EraseFromEach(spec, {"initContainers", "containers"},
                {"command", "args", "env", "envFrom", "volumeMounts", "lifecycle", "livenessProbe",
                 "readinessProbe", "startupProbe", "imagePullPolicy", "terminationMessagePath",
                 "terminationMessagePolicy", "securityContext", "workingDir"});
}

// Informer transforms: pods and submitter Jobs keep a trimmed pod spec; RayClusters keep their
// status and worker groups' counts (DesiredPods), not the pod templates (the RayJob, archived as
// rayjob.json, keeps everything).
void TrimPod(json& pod) {
  StripManagedFields(pod);
  if (auto m = pod.find("metadata"); m != pod.end())
    Erase(*m, {"annotations", "generateName", "ownerReferences"});
  if (auto s = pod.find("spec"); s != pod.end()) TrimPodSpec(*s);
  if (auto st = pod.find("status"); st != pod.end()) {
    Erase(*st, {"hostIP", "hostIPs", "podIP", "podIPs", "qosClass"});
    EraseFromEach(*st, {"initContainerStatuses", "containerStatuses"},
                  {"containerID", "imageID", "started"});
  }
}
void TrimJob(json& job) {
  StripManagedFields(job);
  if (auto s = job.find("spec"); s != job.end() && s->is_object()) {
    if (auto t = s->find("template"); t != s->end() && t->is_object()) {
      if (auto ts = t->find("spec"); ts != t->end()) TrimPodSpec(*ts);
    }
  }
}
void TrimRayCluster(json& rc) {
  StripManagedFields(rc);
  auto s = rc.find("spec");
  if (s == rc.end() || !s->is_object()) return;
  if (auto h = s->find("headGroupSpec"); h != s->end() && h->is_object()) h->erase("template");
  if (auto w = s->find("workerGroupSpecs"); w != s->end() && w->is_array()) {
    for (json& g : *w)
      if (g.is_object()) g.erase("template");
  }
}

// Of an Event, what the fleet reads (kuberay::CompactEvent): with 1,000 jobs at once the
// namespace holds some ten thousand Events, kept until they expire.
void TrimEvent(json& e) {
  e = kuberay::CompactEvent(e);
}

// Values remembered for a while: an entry is forgotten `ttl` after it was put (or when erased).
// Expired entries go at the next Put, so that what is held is bounded by what one `ttl` brings.
// Not thread-safe: the owner locks.
template <typename V>
class Recent {
 public:
  explicit Recent(std::chrono::steady_clock::duration ttl) : ttl_(ttl) {}
  void Put(const std::string& key, V value) {
    const auto now = std::chrono::steady_clock::now();
    while (!order_.empty() && now - order_.front().first > ttl_) {
      // A key put again since is not forgotten by its older entry.
      if (auto it = entries_.find(order_.front().second);
          it != entries_.end() && it->second.first == order_.front().first)
        entries_.erase(it);
      order_.pop_front();
    }
    entries_[key] = {now, std::move(value)};
    order_.emplace_back(now, key);
  }
  // The value put under `key`, or null.
  const V* Find(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &it->second.second;
  }
  void Erase(const std::string& key) { entries_.erase(key); }
  bool empty() const { return entries_.empty(); }

 private:
  std::chrono::steady_clock::duration ttl_;
  std::unordered_map<std::string, std::pair<std::chrono::steady_clock::time_point, V>> entries_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::string>> order_;  // oldest first
};

// Every string in `value` redacted, managedFields dropped (noise).
json Redacted(json value) {
  if (value.is_string()) return RedactUrlQueries(value.get<std::string>());
  if (value.is_array()) {
    for (auto& v : value)
      v = Redacted(std::move(v));
  } else if (value.is_object()) {
    value.erase("managedFields");
    for (auto& [k, v] : value.items())
      v = Redacted(std::move(v));
  }
  return value;
}

// A failed Kubernetes call (kube::ToStatus) as the fleet's messages say it.
std::string Describe(const Status& s) {
  return RedactUrlQueries(s.message());
}

// The job's directory on the storage volume and its logs/, made before the RayJob so that the
// kubelet finds them: a kubelet creates a missing subPath directory as root, mode 0755, and then
// forge serve (archiving the logs, as its own uid) could not write there. Mode 0777 because the
// job's pods run as the Ray image's uid, which StarForge does not choose and which shares no
// group with forge serve; no one else sees the directory (a job's pods mount only their own
// directory, the storage root is forge serve's). Idempotent. Returns "" or why it cannot.
std::string MakeJobDir(const fs::path& storage_root, const std::string& job_id) {
  std::error_code ec;
  fs::create_directories(storage_root / "jobs", ec);
  if (ec) return "cannot create " + (storage_root / "jobs").string() + ": " + ec.message();
  const fs::path dir = storage_root / kuberay::JobSubPath(job_id);
  for (const fs::path& p : {dir, dir / "logs"}) {
    if (::mkdir(p.c_str(), 0777) != 0 && errno != EEXIST) {
      return "cannot create " + p.string() + ": " + std::strerror(errno);
    }
    // The umask took bits away. Left as it is: what is not a directory (the job may have made
    // `logs` a symlink: the controller removes it before archiving), and what another uid made
    // (a kubelet, for a job submitted before this server made the directories).
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
      continue;
    }
    if ((st.st_mode & 07777) != 0777 && ::chmod(p.c_str(), 0777) != 0) {
      return "cannot make " + p.string() + " writable: " + std::strerror(errno);
    }
  }
  return "";
}

}  // namespace

// Presigned URLs may come back in server messages, events or the RayJob itself.
std::string RedactUrlQueries(std::string text) {
  size_t pos = 0;
  while (true) {
    const size_t http = text.find("http", pos);
    if (http == std::string::npos) break;
    const bool is_url =
        text.compare(http, 7, "http://") == 0 || text.compare(http, 8, "https://") == 0;
    if (!is_url) {
      pos = http + 4;
      continue;
    }
    size_t end = http;
    auto stop = [](char c) {
      return std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '\\' ||
             c == '<' || c == '>' || c == '`';
    };
    while (end < text.size() && !stop(text[end]))
      ++end;
    const size_t q = text.find('?', http);
    if (q != std::string::npos && q < end) {
      const std::string redacted = "?REDACTED";
      text.replace(q, end - q, redacted);
      end = q + redacted.size();
    }
    pos = end;
  }
  return text;
}

// ----------------------------------------------------------------------------------------------

KubeRaySetup DetectKubeRay(const config::Config& cfg, const kube::ConfigSources& sources) {
  KubeRaySetup setup;
  std::vector<std::string> missing;
  StatusOr<kube::ClientConfig> client = kube::LoadClientConfig(cfg, sources);
  if (client.ok()) {
    setup.client = std::move(client).value();
  } else {
    missing.push_back("a Kubernetes connection (" + client.status().message() +
                      "): set FORGE_K8S_API_SERVER and FORGE_K8S_TOKEN, or provide a kubeconfig "
                      "(KUBECONFIG or ~/.kube/config; context FORGE_K8S_CONTEXT)");
  }
  if (cfg.s3_endpoint.empty()) {
    missing.push_back(
        "S3 object storage (capsules reach Ray pods as presigned URLs): set FORGE_S3_ENDPOINT, "
        "FORGE_S3_BUCKET, FORGE_S3_ACCESS_KEY and FORGE_S3_SECRET_KEY");
  }
  setup.available = missing.empty();
  if (!setup.available) {
    setup.message = "the kuberay fleet is not configured on this server; it needs ";
    for (size_t i = 0; i < missing.size(); ++i) {
      if (i > 0) setup.message += ", and ";
      setup.message += missing[i];
    }
  }
  return setup;
}

struct KubeRayFleet::Impl {
  Impl(KubeRayFleet* self_, KubeRayFleetOptions options, objstore::ObjectStore& objects_)
      : self(self_),
        o(std::move(options)),
        ns(o.config.k8s_namespace),
        objects(objects_),
        client(o.client, o.client_options) {
    const auto no_managed_fields = StripManagedFields;
    auto informer = [&](kube::ResourceRef ref, std::string in_ns, std::string selector,
                        kube::InformerHandlers h, std::function<void(json&)> transform,
                        std::function<bool(const json&)> keep = nullptr) {
      kube::InformerOptions io;
      io.resource = std::move(ref);
      io.ns = std::move(in_ns);
      io.label_selector = std::move(selector);
      io.min_watch_timeout = o.min_watch_timeout;
      io.transform = std::move(transform);
      io.keep = std::move(keep);
      return std::make_unique<kube::Informer>(client, std::move(io), std::move(h));
    };
    kube::InformerHandlers notify;
    notify.on_add = [this](const json& obj) { NotifyFor(obj); };
    notify.on_update = [this](const json&, const json& obj) { NotifyFor(obj); };
    notify.on_delete = [this](const json& obj) { NotifyFor(obj); };
    const std::string ours = std::string(kuberay::kLabelManagedBy) + "=" + kuberay::kManagedByValue;
    // A RayJob gone from the cache is kept as last seen: archiving a job whose RayJob went first
    // (cancelled while Pending, deleted outside StarForge) still saves it and says what is missing.
    kube::InformerHandlers rayjob_changes = notify;
    // Once the watch has brought a RayJob we created, the create's answer is no longer needed:
    // dropped here, not only when a look finds it in the cache, so that a RayJob deleted before
    // any look (cancelled at once) is not answered from a stale create after it went.
    rayjob_changes.on_add = [this](const json& obj) {
      ForgetCreated(Name(obj));
      NotifyFor(obj);
    };
    // A RayJob turning terminal is its job's end: the controller serves it with the ended jobs.
    rayjob_changes.on_update = [this](const json& before, const json& obj) {
      if (kuberay::ReadStatus(obj).terminal && !kuberay::ReadStatus(before).terminal) {
        if (const std::string id = JobIdOf(obj); !id.empty()) self->NotifyEnded(id);
        return;
      }
      NotifyFor(obj);
    };
    // A RayJob gone is its job's end too: the last step of its release (StarForge deleted it and
    // the operator's finalizer let it go), or, deleted by someone else, what ends a live job. Its
    // job waits with the ended jobs, not behind a burst of live jobs' changes (which held a
    // release up to 1.8 s at N = 1,000 in bench/kuberay_fleet_scale.sh).
    rayjob_changes.on_delete = [this](const json& obj) {
      ForgetCreated(Name(obj));
      RememberGone(obj);
      if (const std::string id = JobIdOf(obj); !id.empty()) self->NotifyEnded(id);
    };
    rayjobs = informer(kuberay::kRayJobs, ns, ours, rayjob_changes, no_managed_fields);
    // RayClusters inherit the RayJob's labels (upstream-facts §3.1).
    rayclusters = informer(kuberay::kRayClusters, ns, ours, notify, TrimRayCluster);
    jobs = informer(res::kJobs, ns, std::string(kuberay::kLabelOriginatedFrom), notify, TrimJob);
    pods = informer(res::kPods, ns, "", notify, TrimPod);
    // A released job's Events are read no more: they leave the cache rather than stay until
    // they expire (half the cached Events after a burst of short jobs).
    events = informer(res::kEvents, ns, "", notify, TrimEvent,
                      [this](const json& e) { return !AboutReleasedJob(e); });
    // Observing one job reads only its objects (client-go Indexers): its cluster's pods, its
    // submitter's pods, and the events about names that start like its own.
    pods->AddIndex(kByCluster,
                   [](const json& p) { return LabelValues(p, {kuberay::kLabelRayCluster}); });
    pods->AddIndex(kBySubmitter, [](const json& p) {
      return LabelValues(p, {kuberay::kLabelJobNameBatch, kuberay::kLabelJobNameLegacy});
    });
    events->AddIndex(kByNamePrefix, [](const json& e) {
      return DashPrefixes(Str(Field(e, "involvedObject"), "name"));
    });
    // Capacity: every pod of the cluster counts, but only through per-node sums kept from the
    // events (NodeUsageSums); the cache keeps each pod cut to what the sums read.
    kube::InformerHandlers usage;
    usage.on_add = [this](const json& p) { UpdateUsage(nullptr, &p); };
    usage.on_update = [this](const json& before, const json& now) { UpdateUsage(&before, &now); };
    usage.on_delete = [this](const json& p) { UpdateUsage(&p, nullptr); };
    all_pods =
        informer(res::kPods, "", "", usage, [](json& p) { p = kuberay::TrimPodForCapacity(p); });
    kube::InformerHandlers node_changes;
    node_changes.on_add = [this](const json&) { NodeChanged(); };
    node_changes.on_update = [this](const json&, const json&) { NodeChanged(); };
    node_changes.on_delete = [this](const json&) { NodeChanged(); };
    nodes = informer(res::kNodes, "", "", node_changes, [](json& n) {
      StripManagedFields(n);
      if (auto st = n.find("status"); st != n.end() && st->is_object()) st->erase("images");
    });
    cancelled_dir = o.state_dir / "kuberay" / "cancelled";
  }

  // The values of the first of `keys` the object has as labels (index values).
  static std::vector<std::string> LabelValues(const json& obj,
                                              std::initializer_list<const char*> keys) {
    std::vector<std::string> out;
    for (const char* k : keys) {
      std::string v = Label(obj, k);
      if (!v.empty() && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
    return out;
  }

  // "a-b-c" → "a-b-c", "a-b", "a": the names an object's name may belong to (a RayJob's
  // cluster is "<rayjob>-<5>", its pods "<cluster>-…", the submitter's "<rayjob>-<5>").
  static std::vector<std::string> DashPrefixes(std::string name) {
    std::vector<std::string> out;
    while (!name.empty()) {
      out.push_back(name);
      const size_t dash = name.rfind('-');
      if (dash == std::string::npos) break;
      name.resize(dash);
    }
    return out;
  }

  void NodeChanged() {
    ++node_generation;
    ++capacity_generation;
  }

  void UpdateUsage(const json* before, const json* now) {
    std::lock_guard lock(usage_mu);
    usage_sums.Update(before, now);
    ++capacity_generation;
  }

  // The capacity view from the nodes and the per-node sums, recomputed only after a change, and
  // shared rather than copied (it lists every node). Pods change at every step of every job, nodes
  // seldom: the nodes are copied out of their cache only after a node changed, not at every
  // admission during a burst of submits (at 1,000 jobs, 130 nodes copied twice per Admit).
  std::shared_ptr<const std::vector<kuberay::SeriesCapacity>> CurrentCapacity() {
    std::lock_guard lock(usage_mu);
    const uint64_t gen = capacity_generation.load();
    if (capacity_cache && capacity_cache_generation == gen) return capacity_cache;
    if (const uint64_t node_gen = node_generation.load(); node_list_generation != node_gen) {
      node_list = Values(nodes->Snapshot());
      node_list_generation = node_gen;
    }
    capacity_cache = std::make_shared<const std::vector<kuberay::SeriesCapacity>>(
        kuberay::ComputeCapacityFromUsage(node_list, usage_sums.by_node(),
                                          o.config.k8s_gpu_node_label));
    capacity_cache_generation = gen;
    return capacity_cache;
  }

  std::vector<kube::Informer*> Informers() {
    return {rayjobs.get(), rayclusters.get(), jobs.get(),    pods.get(),
            events.get(),  nodes.get(),       all_pods.get()};
  }

  std::string Key(const std::string& name) const { return ns + "/" + name; }

  // The StarForge job an object belongs to, or "".
  std::string JobIdOf(const json& obj) {
    if (std::string id = Label(obj, kuberay::kLabelJobId); !id.empty()) return id;
    for (const char* key : {kuberay::kLabelJobNameBatch, kuberay::kLabelJobNameLegacy,
                            kuberay::kLabelOriginatedFrom}) {
      if (std::string rj = Label(obj, key); !rj.empty()) return JobIdOfRayJob(rj);
    }
    const json& involved = Field(obj, "involvedObject");
    if (involved.is_object()) {
      const std::string kind = Str(involved, "kind");
      const std::string name = Str(involved, "name");
      if (kind == kuberay::kRayJobKind || kind == res::kJobs.kind) return JobIdOfRayJob(name);
      if (kind == kuberay::kRayClusterKind) {
        if (auto c = rayclusters->Find(Key(name))) return Label(*c, kuberay::kLabelJobId);
      }
      if (kind == "Pod") {
        if (auto p = pods->Find(Key(name))) {
          if (Field(*p, "involvedObject").is_null()) return JobIdOf(*p);
        }
      }
    }
    return {};
  }

  std::string JobIdOfRayJob(const std::string& name) {
    if (auto rj = rayjobs->Find(Key(name))) return Label(*rj, kuberay::kLabelJobId);
    return {};
  }

  void NotifyFor(const json& obj) {
    const std::string id = JobIdOf(obj);
    if (!id.empty()) self->Notify(id);
  }

  // How long a deleted RayJob is kept for its job's archive (archiving follows within seconds;
  // the bound keeps RayJobs whose job never archives, e.g. one of another server, from piling up).
  static constexpr std::chrono::minutes kGoneRayJobKeep{60};

  void RememberGone(const json& rj) {
    std::lock_guard lock(mu);
    gone_rayjobs.Put(Name(rj), rj);
  }

  void ForgetCreated(const std::string& name) {
    std::lock_guard lock(mu);
    created_rayjobs.erase(name);
  }

  // The last state the watch saw of a deleted RayJob, or nullopt.
  std::optional<json> GoneRayJob(const std::string& name) {
    std::lock_guard lock(mu);
    const json* rj = gone_rayjobs.Find(name);
    if (rj == nullptr) return std::nullopt;
    return *rj;
  }

  // --- cancelled marks ---------------------------------------------------------------------

  fs::path CancelledMark(const std::string& job_id) const { return cancelled_dir / job_id; }

  Status MarkCancelled(const std::string& job_id) {
    {
      std::lock_guard lock(mu);
      if (cancelled_ids.count(job_id)) return Status::Ok();
    }
    std::error_code ec;
    fs::create_directories(cancelled_dir, ec);
    const Status written =
        ec ? Status::Internal(ec.message())
           : WriteFileAtomic(CancelledMark(job_id), std::to_string(std::time(nullptr)) + "\n");
    if (!written.ok()) {
      return Status::Internal("cannot record the cancel under " + cancelled_dir.string() + ": " +
                              written.message());
    }
    std::lock_guard lock(mu);
    cancelled_ids.insert(job_id);
    return Status::Ok();
  }

  bool IsCancelled(const std::string& job_id) {
    {
      std::lock_guard lock(mu);
      if (cancelled_ids.count(job_id)) return true;
    }
    std::error_code ec;
    if (fs::exists(CancelledMark(job_id), ec)) {
      std::lock_guard lock(mu);
      cancelled_ids.insert(job_id);
      return true;
    }
    return false;
  }

  void Forget(const std::string& job_id) {
    const std::string name = kuberay::RayJobName(job_id);
    std::string cluster;
    if (auto rj = rayjobs->Find(Key(name))) {
      cluster = Str(Field(*rj, "status"), "rayClusterName");
    } else {
      std::lock_guard lock(mu);
      if (const json* gone = gone_rayjobs.Find(name))
        cluster = Str(Field(*gone, "status"), "rayClusterName");
    }
    ForgetEvents(name, cluster);
    std::error_code ec;
    fs::remove(CancelledMark(job_id), ec);
    std::lock_guard lock(mu);
    cancelled_ids.erase(job_id);
    collect_failures.erase(job_id);
    delete_accepted.erase(job_id);
    created_rayjobs.erase(kuberay::RayJobName(job_id));
    gone_rayjobs.Erase(kuberay::RayJobName(job_id));
    observed.erase(job_id);
    for (auto it = init_logs.begin(); it != init_logs.end();) {
      it = it->second.job_id == job_id ? init_logs.erase(it) : std::next(it);
    }
  }

  // --- reading the cluster -----------------------------------------------------------------

  // The RayJob from the cache; one we created that the watch has not brought yet is the create's
  // answer (client-go's MutationCache idea); a GET only before the cache has synced. nullopt = it
  // does not exist.
  StatusOr<std::optional<json>> RayJob(const std::string& name) {
    if (rayjobs->HasSynced()) {
      if (auto rj = rayjobs->Find(Key(name))) {
        std::lock_guard lock(mu);
        created_rayjobs.erase(name);
        return std::optional<json>(*rj);
      }
      {
        std::lock_guard lock(mu);
        if (auto it = created_rayjobs.find(name); it != created_rayjobs.end()) {
          // The watch may have brought and deleted it before the create's answer was kept.
          const json* gone = gone_rayjobs.Find(name);
          const std::string uid = Str(it->second, {"metadata", "uid"});
          if (gone != nullptr && !uid.empty() && Str(*gone, {"metadata", "uid"}) == uid) {
            created_rayjobs.erase(it);
            return std::optional<json>();
          }
          return std::optional<json>(it->second);
        }
      }
      // The watch may have brought it between the two looks, and its add dropped the create's
      // answer (ForgetCreated): the cache holds it by then (an informer updates its cache before
      // it calls the handlers). Without this second look a job whose RayJob had just been made
      // failed as "deleted outside StarForge" (once in 1,000 at N = 1,000).
      if (auto rj = rayjobs->Find(Key(name))) return std::optional<json>(*rj);
      return std::optional<json>();  // a synced cache without it: deleted (or never made)
    }
    StatusOr<json> got = kube::Try([&] { return client.Get(kuberay::kRayJobs, ns, name); });
    if (got.ok()) return std::optional<json>(std::move(got).value());
    if (got.status().code() == Code::kNotFound) return std::optional<json>();
    return std::move(got).status();
  }

  // The pods of RayJob `name`'s submitter Job (either job-name label): from the cache's index,
  // or a list when it has not synced. Scanning every cached pod instead was 20 % of forge
  // serve's CPU while 1,000 running jobs were being released.
  StatusOr<std::vector<json>> SubmitterPods(const std::string& name) {
    std::vector<json> out;
    if (pods->HasSynced()) {
      for (const auto& p : pods->ByIndex(kBySubmitter, name))
        out.push_back(*p);
      return out;
    }
    kube::ListOptions lo;
    lo.label_selector = std::string(kuberay::kLabelJobNameBatch) + "=" + name;
    StatusOr<json> list = kube::Try([&] { return client.List(res::kPods, ns, lo); });
    if (!list.ok()) return std::move(list).status();
    for (auto& p : (*list)["items"])
      out.push_back(std::move(p));
    return out;
  }

  struct JobObjects {
    json rayjob;
    json raycluster;
    json submitter_job;
    std::vector<json> cluster_pods;
    std::vector<json> submitter_pods;
    std::vector<json> events;
  };

  // The cached objects of one job, shared with the caches (no copies).
  struct JobRefs {
    kube::ObjectPtr raycluster, submitter_job;
    std::vector<kube::ObjectPtr> cluster_pods, submitter_pods, events;
  };

  // Everything of one job the caches hold (upstream-facts §5's chain). Observe runs this for
  // every job on every resync: the indexes hand over this job's objects only, whatever the
  // number of jobs.
  JobRefs Refs(const json& rayjob, const std::string& name) {
    JobRefs j;
    const std::string cluster = Str(Field(rayjob, "status"), "rayClusterName");
    if (!cluster.empty()) j.raycluster = rayclusters->Find(Key(cluster));
    if (auto sj = jobs->Find(Key(name)); sj && Label(*sj, kuberay::kLabelOriginatedFrom) == name)
      j.submitter_job = sj;
    std::set<std::string> pod_names;
    if (!cluster.empty()) {
      for (auto& p : pods->ByIndex(kByCluster, cluster)) {
        pod_names.insert(Name(*p));
        j.cluster_pods.push_back(std::move(p));
      }
    }
    for (auto& p : pods->ByIndex(kBySubmitter, name)) {
      if (!cluster.empty() && Label(*p, kuberay::kLabelRayCluster) == cluster) continue;
      if (!pod_names.insert(Name(*p)).second) continue;
      j.submitter_pods.push_back(std::move(p));
    }
    auto ours = [&](const std::string& kind, const std::string& obj) {
      return (kind == "Pod" && pod_names.count(obj) != 0) || AboutJob(kind, obj, name, cluster);
    };
    std::set<std::string> seen;
    for (const std::string& prefix : {name, cluster}) {
      if (prefix.empty()) continue;
      for (const auto& e : events->ByIndex(kByNamePrefix, prefix)) {
        const json& involved = Field(*e, "involvedObject");
        if (ours(Str(involved, "kind"), Str(involved, "name")) &&
            seen.insert(kube::Informer::KeyOf(*e)).second)
          j.events.push_back(e);
      }
    }
    return j;
  }

  // Whether object `obj` of `kind` is one of RayJob `name`'s, whose RayCluster is `cluster`
  // ("" = none yet): the RayJob and its submitter Job by name, the cluster, and pods by their
  // names, gone ones included: <cluster>-… and <rayjob>-<5 chars> (the submitter Job's pods).
  static bool AboutJob(const std::string& kind, const std::string& obj, const std::string& name,
                       const std::string& cluster) {
    if (kind == kuberay::kRayJobKind || kind == res::kJobs.kind) return obj == name;
    if (kind == kuberay::kRayClusterKind) return !cluster.empty() && obj == cluster;
    if (kind != "Pod") return false;
    if (!cluster.empty() && obj.rfind(cluster + "-", 0) == 0) return true;
    return obj.size() == name.size() + 6 && obj.rfind(name + "-", 0) == 0 &&
           obj.find('-', name.size() + 1) == std::string::npos;
  }

  // --- released jobs' Events ---------------------------------------------------------------

  // How long a released RayJob's Events are kept out of the cache: kube-apiserver's default
  // --event-ttl, after which the server has dropped them too.
  static constexpr std::chrono::hours kEventTtl{1};

  // Whether Event `e` is about a RayJob released by this server (its job archived and gone).
  bool AboutReleasedJob(const json& e) {
    const json& involved = Field(e, "involvedObject");
    const std::string obj = Str(involved, "name");
    std::lock_guard lock(released_mu);
    if (released.empty()) return false;
    for (const std::string& prefix : DashPrefixes(obj)) {
      const std::string* cluster = released.Find(prefix);
      if (cluster != nullptr && AboutJob(Str(involved, "kind"), obj, prefix, *cluster)) return true;
    }
    return false;
  }

  // RayJob `name` (its RayCluster `cluster`) is released: its Events leave the cache, and those
  // still to come (its pods' deletion) stay out.
  void ForgetEvents(const std::string& name, const std::string& cluster) {
    {
      std::lock_guard lock(released_mu);
      released.Put(name, cluster);
    }
    events->Refilter(kByNamePrefix, name);
  }

  // A RayJob made again under a released name (not done today: names come from job ids) shows
  // its Events again.
  void UnforgetEvents(const std::string& name) {
    std::lock_guard lock(released_mu);
    released.Erase(name);
  }

  // Copies of a job's objects, for the pure functions of src/kuberay.
  static JobObjects Copies(const json& rayjob, const JobRefs& r) {
    JobObjects j;
    j.rayjob = rayjob;
    if (r.raycluster) j.raycluster = *r.raycluster;
    if (r.submitter_job) j.submitter_job = *r.submitter_job;
    for (const auto& p : r.cluster_pods)
      j.cluster_pods.push_back(*p);
    for (const auto& p : r.submitter_pods)
      j.submitter_pods.push_back(*p);
    for (const auto& e : r.events)
      j.events.push_back(*e);
    return j;
  }

  JobObjects Gather(const json& rayjob, const std::string& name) {
    return Copies(rayjob, Refs(rayjob, name));
  }

  // What an Observation is computed from, as resourceVersions: equal fingerprints, equal
  // Observations (a resync of a job where nothing changed reuses the last one).
  std::string Fingerprint(const json& rayjob, const JobRefs& r, bool cancelled) {
    std::string f = cancelled ? "c" : "-";
    auto add = [&f](const json& obj) {
      f += Str(Field(obj, "metadata"), "uid");
      f += '@';
      f += Str(Field(obj, "metadata"), "resourceVersion");
      f += ' ';
    };
    add(rayjob);
    f += "| ";
    if (r.raycluster) add(*r.raycluster);
    f += "| ";
    if (r.submitter_job) add(*r.submitter_job);
    bool unscheduled = false;
    for (const auto* list : {&r.cluster_pods, &r.submitter_pods, &r.events}) {
      f += "| ";
      for (const auto& obj : *list) {
        add(*obj);
        unscheduled = unscheduled ||
                      (list == &r.cluster_pods && Str(Field(*obj, "spec"), "nodeName").empty());
      }
    }
    // The Unschedulable message counts free GPUs: then the cluster's pods matter too.
    if (unscheduled) f += "| capacity " + std::to_string(capacity_generation.load());
    return f;
  }

  // The tail of each failed `fetch-capsule` init container's log, fetched once per failure.
  std::map<std::string, std::string> InitLogs(const std::string& job_id,
                                              const std::vector<json>& cluster_pods) {
    std::map<std::string, std::string> out;
    for (const auto& pod : cluster_pods) {
      const json& statuses = Field(Field(pod, "status"), "initContainerStatuses");
      if (!statuses.is_array()) continue;
      for (const auto& s : statuses) {
        if (Str(s, "name") != kuberay::kFetchContainerName) continue;
        auto failed = [](const json& state) {
          const json& t = Field(state, "terminated");
          return t.is_object() && Field(t, "exitCode").is_number_integer() &&
                 Field(t, "exitCode").get<int64_t>() != 0;
        };
        const bool now = failed(Field(s, "state"));
        const bool before = !now && failed(Field(s, "lastState"));
        if (!now && !before) continue;
        const std::string pod_name = Name(pod);
        const std::string key = pod_name + "/" + kuberay::kFetchContainerName;
        const std::string cache_key = Str(Field(pod, "metadata"), "uid") + "/" +
                                      std::to_string(Field(s, "restartCount").is_number_integer()
                                                         ? Field(s, "restartCount").get<int64_t>()
                                                         : 0);
        {
          std::lock_guard lock(mu);
          if (auto it = init_logs.find(cache_key); it != init_logs.end()) {
            out[key] = it->second.tail;
            continue;
          }
        }
        kube::LogOptions lo;
        lo.container = kuberay::kFetchContainerName;
        lo.tail_lines = o.init_log_tail_lines;
        lo.previous = before;
        std::string tail;
        bool got = false;
        for (int attempt = 0; attempt < 2 && !got; ++attempt) {
          StatusOr<std::string> log = kube::Try([&] { return client.PodLogs(ns, pod_name, lo); });
          if (log.ok()) {
            tail = RedactUrlQueries(*log);
            got = true;
          } else {
            // A restarted container's previous run may be gone: its current log, then nothing
            // (the diagnosis still names the failed init container; the tail is a bonus).
            if (!lo.previous) break;
            lo.previous = false;
          }
        }
        if (!got) continue;
        out[key] = tail;
        std::lock_guard lock(mu);
        init_logs[cache_key] = {job_id, tail};
      }
    }
    return out;
  }

  // Takes the job's copies over: copying them a second time was 5 % of forge serve's CPU at
  // 1,000 jobs.
  kuberay::Diagnosis DiagnoseJob(const std::string& job_id, JobObjects&& j,
                                 const jobspec::JobSpec& spec) {
    kuberay::DiagnosisInput in;
    in.init_logs = InitLogs(job_id, j.cluster_pods);
    // The nodes and every pod on them only matter to a pod the scheduler could not place (the
    // Unschedulable message counts free GPUs); copying them costs, so only then.
    auto unscheduled = [](const json& pod) { return Str(Field(pod, "spec"), "nodeName").empty(); };
    if (std::any_of(j.cluster_pods.begin(), j.cluster_pods.end(), unscheduled))
      in.capacity = *CurrentCapacity();
    in.rayjob = std::move(j.rayjob);
    in.raycluster = std::move(j.raycluster);
    in.cluster_pods = std::move(j.cluster_pods);
    in.submitter_job = std::move(j.submitter_job);
    in.submitter_pods = std::move(j.submitter_pods);
    in.events = std::move(j.events);
    in.gpu_label = o.config.k8s_gpu_node_label;
    in.pools = spec.pools;  // what render laid out: read from the JobSpec, not from the RayJob
    return kuberay::Diagnose(in);
  }

  static std::vector<FleetEvent> ToFleetEvents(const std::vector<kuberay::DiagnosisEvent>& in) {
    std::vector<FleetEvent> out;
    out.reserve(in.size());
    for (const auto& e : in) {
      out.push_back({e.type.empty() ? "Normal" : e.type, e.reason, RedactUrlQueries(e.message),
                     "kuberay:" + e.object});
    }
    return out;
  }

  // --- the fleet calls -----------------------------------------------------------------------

  Admission Admit(const jobspec::JobSpec& spec) {
    // What render would refuse depends on the JobSpec and this cluster's settings only.
    const std::vector<kuberay::Refusal> refusals = kuberay::CheckOnCluster(spec, o.config);
    if (!refusals.empty()) {
      // The first refusal leads: a JobSpec field is the Admission's field (its message follows
      // alone); a setting is named in the message ("FORGE_X is false: …"), since the user
      // cannot change it.
      const kuberay::Refusal& first = refusals.front();
      const bool field = first.kind == kuberay::Refusal::Kind::kField;
      std::string message =
          field ? first.name + ": " + first.message : first.name + " " + first.message;
      for (size_t i = 1; i < refusals.size(); ++i)
        message += "; " + refusals[i].name + ": " + refusals[i].message;
      return {false, message, field ? first.name : ""};
    }
    const auto wait = std::min(o.sync_timeout, std::chrono::milliseconds(1000));
    if (!nodes->WaitForSync(wait) || !all_pods->WaitForSync(wait)) {
      return {};  // the cluster cannot be read now: Submit retries, Pending explains
    }
    const auto capacity = CurrentCapacity();
    const kuberay::FitCheck fit = kuberay::CheckFits(spec, *capacity, o.config.k8s_gpu_passthrough);
    if (!fit.possible) return {false, fit.message, fit.field};
    return {};
  }

  SubmitResult Submit(const SubmitRequest& request) {
    const std::string name = kuberay::RayJobName(request.job_id);
    auto fail = [&](const char* reason, std::string message, bool retryable) {
      message = RedactUrlQueries(std::move(message));
      return SubmitResult{retryable ? Status::Retryable(reason, std::move(message))
                                    : Status::Permanent(reason, std::move(message)),
                          ""};
    };
    // The URL must outlive the wait for resources and the run: Ray downloads the working_dir on
    // each node when the job starts there.
    const auto& spec = request.spec;
    // A job for a Kueue queue may wait there for any time first: then the longest URL.
    int64_t expiry = spec.queue ? objstore::kMaxPresignSeconds
                                : spec.pre_running_seconds +
                                      (spec.running_seconds > 0 ? spec.running_seconds
                                                                : objstore::kMaxPresignSeconds) +
                                      o.presign_slack_seconds;
    expiry = std::clamp<int64_t>(expiry, 1, objstore::kMaxPresignSeconds);
    auto url = objects.PresignGet(request.capsule_key, expiry, std::time(nullptr));
    if (!url) {
      return fail(reasons::kSubmissionFailed,
                  "cannot make a URL for the capsule: " + url.status().message(), false);
    }
    const kuberay::RenderResult rendered =
        kuberay::Render(spec, request.job_id, {url.value(), request.capsule_sha256}, o.config);
    if (!rendered.ok()) return fail(reasons::kRejected, JoinErrors(rendered.errors), false);
    if (!o.config.k8s_storage_pvc.empty() && !o.storage_root.empty()) {
      if (std::string why = MakeJobDir(o.storage_root, request.job_id); !why.empty()) {
        return fail(
            reasons::kSubmissionFailed,
            "preparing the job's directory on the storage volume (FORGE_STORAGE_ROOT): " + why,
            true);
      }
    }

    kube::WriteOptions wo;
    wo.field_manager = kFieldManager;
    UnforgetEvents(name);
    StatusOr<json> made =
        kube::Try([&] { return client.Create(kuberay::kRayJobs, ns, rendered.rayjob, wo); });
    if (made.ok()) {
      {
        std::lock_guard lock(mu);
        created_rayjobs[name] = std::move(made).value();
      }
      SubmitResult ok;
      ok.handle = name;
      return ok;
    }
    const Status& e = made.status();
    if (e.code() == Code::kAlreadyExists) return Existing(request.job_id, name);
    const std::string what = "creating RayJob " + ns + "/" + name + ": " + Describe(e);
    if (e.retryable()) return fail(reasons::kSubmissionFailed, what, true);
    if (e.code() == Code::kNotFound) {
      // A missing namespace is named in the Status (`namespaces "x" not found`); a resource
      // the server does not serve gets "the server could not find the requested resource".
      const bool no_namespace = e.message().find("namespaces \"") != std::string::npos;
      return fail(
          reasons::kSubmissionFailed,
          what + (no_namespace ? " (create the namespace, or set FORGE_K8S_NAMESPACE to one "
                                 "that exists)"
                               : " (the API server does not serve RayJobs: install the KubeRay "
                                 "operator v1.4 or later with its CRDs; forge doctor checks "
                                 "every prerequisite)"),
          false);
    }
    if (e.code() == Code::kPermissionDenied || e.code() == Code::kUnauthenticated) {
      return fail(reasons::kSubmissionFailed,
                  what + " (StarForge's service account needs the rules in deploy/)", false);
    }
    return fail(reasons::kSubmissionFailed, what, false);
  }

  // 409 AlreadyExists: ours (same job id) means already submitted.
  SubmitResult Existing(const std::string& job_id, const std::string& name) {
    SubmitResult r;
    const StatusOr<json> existing =
        kube::Try([&] { return client.Get(kuberay::kRayJobs, ns, name); });
    if (!existing.ok()) {
      // It existed a moment ago: deleted meanwhile, or a transient error.
      r.status = Status::Retryable(reasons::kSubmissionFailed, "RayJob " + ns + "/" + name +
                                                                   " exists but cannot be read: " +
                                                                   Describe(existing.status()));
      return r;
    }
    const std::string owner = Label(*existing, kuberay::kLabelJobId);
    if (owner == job_id) {
      r.handle = name;
      return r;
    }
    r.status = Status::Permanent(
        reasons::kSubmissionFailed,
        "RayJob " + ns + "/" + name + " already exists and is not this job's (" +
            (owner.empty() ? std::string("it has no ") + kuberay::kLabelJobId + " label"
                           : std::string(kuberay::kLabelJobId) + "=" + owner) +
            "); delete it or use another FORGE_K8S_NAMESPACE");
    return r;
  }

  Observation Observe(const std::string& job_id, const std::string& handle,
                      const jobspec::JobSpec& spec) {
    const std::string name = handle.empty() ? kuberay::RayJobName(job_id) : handle;
    Observation obs;
    StatusOr<std::optional<json>> read = RayJob(name);
    if (!read.ok()) {
      obs.retryable_error = true;
      obs.message = "reading RayJob " + ns + "/" + name + ": " + Describe(read.status());
      return obs;
    }
    const std::optional<json> rj = std::move(read).value();
    const std::string ref = ns + "/" + name;
    const bool cancelled = IsCancelled(job_id);
    kuberay::JobReading job = kuberay::ReadJob(rj ? &*rj : nullptr, cancelled, ref);
    std::string fingerprint;
    if (rj) {
      const JobRefs refs = Refs(*rj, name);
      fingerprint = Fingerprint(*rj, refs, cancelled);
      {
        std::lock_guard lock(mu);
        if (auto it = observed.find(job_id);
            it != observed.end() && it->second.first == fingerprint)
          return it->second.second;
      }
      JobObjects objs = Copies(*rj, refs);
      if (job.diagnose) {
        // The diagnosis normalises the events too, and returns them.
        const kuberay::Diagnosis d = DiagnoseJob(job_id, std::move(objs), spec);
        obs.events = ToFleetEvents(d.events);
        kuberay::AddDiagnosis(d, &job);
      } else {
        obs.events = ToFleetEvents(kuberay::NormalizeEvents(objs.events));
      }
    }
    obs.state = job.state;
    obs.queued = job.queued;
    obs.reason = std::move(job.reason);
    obs.message = RedactUrlQueries(std::move(job.message));
    obs.exit_code = job.exit_code;
    if (!fingerprint.empty()) {
      std::lock_guard lock(mu);
      observed[job_id] = {std::move(fingerprint), obs};
    }
    return obs;
  }

  std::string Cancel(const std::string& job_id, const std::string& handle) {
    const std::string name = handle.empty() ? kuberay::RayJobName(job_id) : handle;
    if (Status marked = MarkCancelled(job_id); !marked.ok()) return marked.message();
    kube::DeleteOptions d;
    d.propagation_policy = "Background";
    const Status deleted = kube::Try([&] { client.Delete(kuberay::kRayJobs, ns, name, d); });
    if (!deleted.ok() && deleted.code() != Code::kNotFound)
      return "deleting RayJob " + ns + "/" + name + ": " + Describe(deleted);
    return "";
  }

  // Writes one file of the archive; a failure is one more problem.
  static void SaveFile(const fs::path& dir, const std::string& file, const std::string& text,
                       std::vector<std::string>* problems) {
    if (Status written = WriteFileAtomic(dir / file, text); !written.ok())
      problems->push_back(written.message());
  }

  // Saves ray-job.log: Ray's own record of the job, through the API server's service proxy while
  // the head exists (the RayJob's service first: it follows the current cluster; then the
  // cluster's). Says in not-archived.txt why it is missing when no head answers.
  void SaveRayJobLog(const std::string& job_id, const std::string& name,
                     const kuberay::StatusView& sv, const fs::path& dir,
                     std::vector<std::string>* problems) {
    std::vector<std::string> services = {name + kuberay::kHeadServiceSuffix};
    if (!sv.ray_cluster_name.empty())
      services.push_back(sv.ray_cluster_name + kuberay::kHeadServiceSuffix);
    const size_t problems_before = problems->size();
    bool saved = false;
    for (const auto& svc : services) {
      kube::ProxyRequest pr;
      pr.ns = ns;
      pr.service = svc;
      pr.port = kuberay::kDashboardPortName;
      pr.path = "api/jobs/" + sv.job_id + "/logs";
      const StatusOr<kube::ProxyResponse> resp = kube::Try([&] { return client.ServiceProxy(pr); });
      if (!resp.ok()) {
        // No service, no endpoints or a head that no longer answers: the cluster is gone.
        const Status& e = resp.status();
        const bool gone = e.code() == Code::kNotFound ||
                          (kube::ReasonOf(e) == kube::Reason::kServiceUnavailable &&
                           (e.message().find("no endpoints") != std::string::npos ||
                            e.message().find("error trying to reach") != std::string::npos ||
                            e.message().find("no service port") != std::string::npos));
        if (!gone) problems->push_back("Ray job logs via " + svc + ": " + Describe(e));
        continue;
      }
      if (resp->status != 200) continue;  // e.g. 404: this head does not know the job
      std::string text = resp->body;
      try {
        const json body = json::parse(resp->body);
        if (body.is_object() && body.contains("logs") && body["logs"].is_string())
          text = body["logs"].get<std::string>();
      } catch (const json::exception&) {
      }
      SaveFile(dir, "ray-job.log", RedactUrlQueries(text), problems);
      saved = true;
      break;
    }
    // (An earlier attempt may have saved it before the cluster went: then nothing is missing.)
    if (saved) {
      std::error_code ec;
      fs::remove(dir / "not-archived.txt", ec);
    } else if (problems->size() == problems_before && !fs::exists(dir / "ray-job.log")) {
      // Not an error to retry (nothing left to read), but not silent either: the archive says
      // why Ray's log is missing, typically archiving that came after the RayJob's TTL.
      const std::string why = "ray-job.log: Ray's job log could not be read: no head of RayJob " +
                              ns + "/" + name + " answers (services " + services.front() +
                              (services.size() > 1 ? " and " + services.back() : std::string()) +
                              "); the operator deletes the RayCluster FORGE_KUBERAY_TTL_SECONDS (" +
                              std::to_string(o.config.kuberay_ttl_seconds) +
                              " s) after the job ends (it ended at " +
                              (sv.end_time.empty() ? std::string("an unknown time") : sv.end_time) +
                              "; archived at " + FormatRfc3339(std::time(nullptr)) +
                              "). driver.log and submitter.log hold the job's output.\n";
      SaveFile(dir, "not-archived.txt", why, problems);
      spdlog::warn("kuberay fleet: job {}: {}", job_id, why.substr(0, why.size() - 1));
    }
  }

  // not-archived.txt for a job whose RayJob was gone when it was archived.
  void SaveGoneNote(const std::string& job_id, const std::string& name,
                    const std::optional<json>& last, const fs::path& dir,
                    std::vector<std::string>* problems) {
    const std::string by = IsCancelled(job_id) ? "StarForge deleted it when the job was cancelled"
                                               : "it was deleted outside StarForge";
    const std::string why =
        "ray-job.log: RayJob " + ns + "/" + name + " was already gone when the job was archived (" +
        by + "; archived at " + FormatRfc3339(std::time(nullptr)) +
        "): its RayCluster and Ray's job log went with it. " +
        (last ? std::string("rayjob.json is its last state as this server saw it.")
              : std::string("This server never saw its last state: no rayjob.json.")) +
        " driver.log and submitter.log hold whatever output the job wrote.\n";
    SaveFile(dir, "not-archived.txt", why, problems);
    spdlog::warn("kuberay fleet: job {}: {}", job_id, why.substr(0, why.size() - 1));
  }

  // Saves submitter.log: `ray job logs --follow` in the submitter pods = the driver's output as Ray
  // saw it.
  void SaveSubmitterLog(const std::string& name, const fs::path& dir,
                        std::vector<std::string>* problems) {
    StatusOr<std::vector<json>> listed = SubmitterPods(name);
    if (!listed.ok()) {
      problems->push_back("listing the submitter's pods: " + Describe(listed.status()));
      return;
    }
    std::vector<json>& submitters = *listed;
    std::sort(submitters.begin(), submitters.end(), [](const json& a, const json& b) {
      return Str(Field(a, "metadata"), "creationTimestamp") <
             Str(Field(b, "metadata"), "creationTimestamp");
    });
    std::string text;
    for (const auto& p : submitters) {
      kube::LogOptions lo;
      lo.container = kuberay::kSubmitterContainerName;
      const StatusOr<std::string> log = kube::Try([&] { return client.PodLogs(ns, Name(p), lo); });
      if (!log.ok()) {
        // Gone, or never started (400 "waiting to start"): nothing to archive.
        const Status& e = log.status();
        if (e.code() != Code::kNotFound && kube::ReasonOf(e) != kube::Reason::kBadRequest)
          problems->push_back("submitter log of pod " + Name(p) + ": " + Describe(e));
        continue;
      }
      if (submitters.size() > 1) text += "==> pod " + Name(p) + " <==\n";
      text += *log;
      if (!log->empty() && log->back() != '\n') text += "\n";
    }
    if (!text.empty()) SaveFile(dir, "submitter.log", RedactUrlQueries(text), problems);
  }

  // Saves events.json (what Kubernetes said about the job) and rayjob.json (its final RayJob).
  void SaveEventsAndRayJob(const json& rj, const std::string& name, const fs::path& dir,
                           std::vector<std::string>* problems) {
    const JobObjects objs = Gather(rj, name);
    json events_json = json::array();
    for (const auto& e : kuberay::NormalizeEvents(objs.events))
      events_json.push_back(kuberay::ToJson(e));
    SaveFile(dir, "events.json", Redacted(events_json).dump(2) + "\n", problems);
    SaveFile(dir, "rayjob.json", Redacted(rj).dump(2) + "\n", problems);
  }

  std::string CollectLogs(const std::string& job_id, const std::string& handle,
                          const fs::path& dir) {
    const std::string name = handle.empty() ? kuberay::RayJobName(job_id) : handle;
    std::vector<std::string> problems;
    // The cache's RayJob is the one whose terminal status Observe read: rayjob.json gets it
    // without a GET.
    StatusOr<std::optional<json>> read = RayJob(name);
    if (!read.ok()) return "reading RayJob " + ns + "/" + name + ": " + Describe(read.status());
    const std::optional<json> rj = std::move(read).value();
    if (!rj) {
      // Deleted before the job was archived (cancelled while Pending, deleted outside
      // StarForge): its RayCluster and Ray's log went with it. The last RayJob the watch saw is
      // the final one; the archive says what is missing instead of ending silently empty.
      const std::optional<json> last = GoneRayJob(name);
      SaveSubmitterLog(name, dir, &problems);
      if (last) SaveEventsAndRayJob(*last, name, dir, &problems);
      if (!fs::exists(dir / "ray-job.log")) SaveGoneNote(job_id, name, last, dir, &problems);
    } else {
      const kuberay::StatusView sv = kuberay::ReadStatus(*rj);
      // Ray's log (through the service proxy) and the submitter's (pods/log) are two requests
      // to the API server that do not depend on each other: read together, end → archived
      // waits for the slower one, not for both (each about 0.2 s at 1,000 jobs).
      // The future's destructor waits for it should the submitter's log throw.
      std::future<std::vector<std::string>> ray_log;
      if (!sv.job_id.empty()) {
        ray_log = std::async(std::launch::async, [&] {
          std::vector<std::string> ray_problems;
          SaveRayJobLog(job_id, name, sv, dir, &ray_problems);
          return ray_problems;
        });
      }
      std::vector<std::string> submitter_problems;
      SaveSubmitterLog(name, dir, &submitter_problems);
      if (ray_log.valid()) problems = ray_log.get();
      problems.insert(problems.end(), submitter_problems.begin(), submitter_problems.end());
      SaveEventsAndRayJob(*rj, name, dir, &problems);
    }

    if (problems.empty()) return "";
    std::string joined;
    for (const auto& p : problems)
      joined += (joined.empty() ? "" : "; ") + p;
    int failures = 0;
    {
      std::lock_guard lock(mu);
      failures = ++collect_failures[job_id];
    }
    if (failures < kMaxCollectAttempts) return joined;
    // Give up on what cannot be read; say so next to the logs.
    WriteFileAtomic(dir / "collect-errors.txt", "StarForge could not archive these after " +
                                                    std::to_string(failures) + " attempts:\n" +
                                                    joined + "\n");
    return "";
  }

  // "" when released; otherwise why not, with *waiting set when the RayJob is going (its
  // finalizers run): the informer's delete notification then brings the job back (Notify).
  std::string Release(const std::string& job_id, const std::string& handle, bool* waiting_out) {
    const std::string name = handle.empty() ? kuberay::RayJobName(job_id) : handle;
    auto waiting = [&](const json& rj) {
      *waiting_out = true;
      return "RayJob " + ns + "/" + name + " is being deleted (waiting for its finalizers: " +
             Field(Field(rj, "metadata"), "finalizers").dump() + ")";
    };
    // Read the world first: a RayJob the informer still sees (going: its finalizer is stopping
    // the Ray job; or not yet showing the DELETE the server accepted, the cache lags) needs no
    // second DELETE on every retry. Absent from the cache, the DELETE still goes out: its 404 is
    // what proves the RayJob gone, the cache may lag.
    if (rayjobs->HasSynced()) {
      bool accepted = false;
      {
        std::lock_guard lock(mu);
        accepted = delete_accepted.count(job_id) != 0;
      }
      auto cached = rayjobs->Find(Key(name));
      if (cached && (accepted || Deleting(*cached))) {
        // Seen going in the cache: its leaving the cache will prove it gone.
        std::lock_guard lock(mu);
        delete_accepted.insert(job_id);
        return waiting(*cached);
      }
      // Accepted while the cache held it, and the watch has since removed it: gone, without a
      // second DELETE to prove it.
      if (!cached && accepted) {
        Forget(job_id);
        return "";
      }
    }
    kube::DeleteOptions d;
    d.propagation_policy = "Background";
    const bool was_cached = rayjobs->HasSynced() && rayjobs->Find(Key(name)) != nullptr;
    const StatusOr<json> r =
        kube::Try([&] { return client.Delete(kuberay::kRayJobs, ns, name, d); });
    if (r.ok() && Str(*r, "kind") == kuberay::kRayJobKind && Deleting(*r)) {
      // Only a RayJob the cache held proves its deletion by leaving it; otherwise the next
      // DELETE's 404 does.
      if (was_cached) {
        std::lock_guard lock(mu);
        delete_accepted.insert(job_id);
      }
      return waiting(*r);
    }
    if (!r.ok() && r.status().code() != Code::kNotFound)
      return "deleting RayJob " + ns + "/" + name + ": " + Describe(r.status());
    Forget(job_id);
    return "";
  }

  json Capacity() {
    json out = {{"fleet", "kuberay"}, {"namespace", ns}};
    if (!nodes->HasSynced() || !all_pods->HasSynced()) {
      out["error"] =
          "the cluster's nodes and pods have not been read yet: " +
          RedactUrlQueries(nodes->stats().last_error.empty() ? all_pods->stats().last_error
                                                             : nodes->stats().last_error);
      return out;
    }
    const auto capacity = CurrentCapacity();
    json body = kuberay::ToJson(*capacity, o.config.k8s_gpu_node_label);
    for (auto& [k, v] : body.items())
      out[k] = v;
    return out;
  }

  std::vector<std::string> SweepOrphans() {
    std::vector<std::string> deleted;
    if (!o.job_exists || !rayjobs->HasSynced()) return deleted;
    const int64_t now = std::time(nullptr);
    for (const auto& cached : rayjobs->List()) {
      const json& rj = *cached;
      const std::string key = kube::Informer::KeyOf(rj);
      const std::string job_id = Label(rj, kuberay::kLabelJobId);
      if (job_id.empty() || Deleting(rj)) continue;
      bool exists = true;
      try {
        exists = o.job_exists(job_id);
      } catch (const std::exception& e) {
        spdlog::warn("kuberay fleet: cannot tell whether job {} exists: {}", job_id, e.what());
      }
      if (exists) continue;
      const int64_t created =
          ParseRfc3339(Str(rj, {"metadata", "creationTimestamp"})).value_or(0) / 1000;
      const int64_t age = created > 0 ? now - created : 0;
      if (created == 0 || age < o.orphan_grace.count()) continue;
      kube::DeleteOptions d;
      d.propagation_policy = "Background";
      const Status gone = kube::Try([&] { client.Delete(kuberay::kRayJobs, ns, Name(rj), d); });
      if (gone.ok()) {
        spdlog::warn(
            "kuberay fleet: deleted orphan RayJob {} (label {}={} names no job in the store; "
            "created {} s ago)",
            key, kuberay::kLabelJobId, job_id, age);
        deleted.push_back(Name(rj));
      } else if (gone.code() != Code::kNotFound) {
        spdlog::warn("kuberay fleet: cannot delete orphan RayJob {}: {}", key, Describe(gone));
      }
    }
    return deleted;
  }

  void SweepLoop() {
    std::unique_lock lock(sweep_mu);
    while (!stopping) {
      sweep_cv.wait_for(lock, o.orphan_scan_interval, [this] { return stopping.load(); });
      if (stopping) break;
      lock.unlock();
      SweepOrphans();
      lock.lock();
    }
  }

  struct InitLog {
    std::string job_id;
    std::string tail;
  };

  KubeRayFleet* self;
  KubeRayFleetOptions o;
  std::string ns;
  objstore::ObjectStore& objects;
  kube::Client client;
  std::unique_ptr<kube::Informer> rayjobs, rayclusters, jobs, pods, events, nodes, all_pods;
  fs::path cancelled_dir;

  std::mutex mu;  // guards the eight below
  std::set<std::string> cancelled_ids;
  std::map<std::string, InitLog> init_logs;  // "<pod uid>/<restarts>" → tail
  std::map<std::string, int> collect_failures;
  std::set<std::string> delete_accepted;  // job ids whose RayJob's DELETE the server accepted
  // RayJobs this server created that the watch has not brought yet: name → the create's answer.
  std::map<std::string, json> created_rayjobs;
  // The last Observation of each job and the Fingerprint it was computed from.
  std::map<std::string, std::pair<std::string, Observation>> observed;
  // RayJobs deleted from the cache: name → last state.
  Recent<json> gone_rayjobs{kGoneRayJobKeep};
  // Released RayJobs: name → their RayCluster's name (ForgetEvents). Its own mutex: the events
  // informer's keep asks it on the informer's thread.
  std::mutex released_mu;
  Recent<std::string> released{kEventTtl};

  std::mutex usage_mu;  // guards the five below
  kuberay::NodeUsageSums usage_sums;
  std::shared_ptr<const std::vector<kuberay::SeriesCapacity>> capacity_cache;
  uint64_t capacity_cache_generation = 0;
  std::vector<json> node_list;  // the node cache's objects as of node_list_generation
  uint64_t node_list_generation = 0;
  std::atomic<uint64_t> capacity_generation{1};  // bumped by every node or pod change
  std::atomic<uint64_t> node_generation{1};      // bumped by every node change

  std::mutex sweep_mu;
  std::condition_variable sweep_cv;
  std::atomic<bool> stopping{false};
  std::thread sweeper;
  bool started = false;
};

namespace {

KubeRayFleetOptions WithFleetDefaults(KubeRayFleetOptions o) {
  // The controller retries every call with its own backoff: keep each call short so that one
  // worker is not held for minutes by a struggling API server.
  o.client_options.max_attempts = std::min(o.client_options.max_attempts, 4);
  o.client_options.request_timeout =
      std::min(o.client_options.request_timeout, std::chrono::milliseconds(30'000));
  o.client_options.backoff_cap =
      std::min(o.client_options.backoff_cap, std::chrono::milliseconds(2'000));
  o.client_options.max_retry_after =
      std::min(o.client_options.max_retry_after, std::chrono::milliseconds(5'000));
  return o;
}

}  // namespace

KubeRayFleet::KubeRayFleet(KubeRayFleetOptions options, objstore::ObjectStore& objects)
    : impl_(std::make_unique<Impl>(this, WithFleetDefaults(std::move(options)), objects)) {}

KubeRayFleet::~KubeRayFleet() {
  Stop();
}

void KubeRayFleet::Start() {
  if (impl_->started) return;
  impl_->started = true;
  impl_->stopping = false;
  for (auto* i : impl_->Informers())
    i->Start();
  impl_->sweeper = std::thread([this] { impl_->SweepLoop(); });
}

void KubeRayFleet::Stop() {
  if (!impl_->started) return;
  {
    std::lock_guard lock(impl_->sweep_mu);
    impl_->stopping = true;
  }
  impl_->sweep_cv.notify_all();
  if (impl_->sweeper.joinable()) impl_->sweeper.join();
  for (auto* i : impl_->Informers())
    i->Stop();
  impl_->started = false;
}

bool KubeRayFleet::WaitForSync(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (auto* i : impl_->Informers()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!i->WaitForSync(std::max(left, std::chrono::milliseconds(0)))) return false;
  }
  return true;
}

std::optional<KubeRayFleet::PodView> KubeRayFleet::CachedPod(const std::string& name) const {
  const Impl& i = *impl_;
  if (!i.started || !i.pods->HasSynced() || !i.events->HasSynced()) return std::nullopt;
  PodView v;
  v.pod = i.pods->Get(i.Key(name));
  v.events = i.events->Select(
      [&](const json& e) { return Str(Field(e, "involvedObject"), "name") == name; });
  if (v.pod && Str(Field(*v.pod, "spec"), "nodeName").empty()) {
    if (!i.nodes->HasSynced() || !i.all_pods->HasSynced()) return std::nullopt;
    for (auto& [key, node] : i.nodes->Snapshot())
      v.nodes.push_back(std::move(node));
    v.node_pods = i.all_pods->Select([](const json& p) {
      const std::string phase = Str(Field(p, "status"), "phase");
      return !Str(Field(p, "spec"), "nodeName").empty() && phase != kuberay::kPodSucceeded &&
             phase != kuberay::kPodFailed;
    });
  }
  return v;
}

Admission KubeRayFleet::Admit(const jobspec::JobSpec& spec) {
  return impl_->Admit(spec);
}

SubmitResult KubeRayFleet::Submit(const SubmitRequest& request) {
  return impl_->Submit(request);
}

Observation KubeRayFleet::Observe(const std::string& job_id, const std::string& handle,
                                  const jobspec::JobSpec& spec) {
  return impl_->Observe(job_id, handle, spec);
}

Status KubeRayFleet::Cancel(const std::string& job_id, const std::string& handle,
                            int64_t /*since_ms*/) {
  return RetryableUnlessEmpty(reasons::kCancelFailed, impl_->Cancel(job_id, handle));
}

Status KubeRayFleet::CollectLogs(const std::string& job_id, const std::string& handle,
                                 const std::filesystem::path& logs_dir) {
  return RetryableUnlessEmpty(reasons::kLogCollectionFailed,
                              impl_->CollectLogs(job_id, handle, logs_dir));
}

Status KubeRayFleet::Release(const std::string& job_id, const std::string& handle) {
  bool waiting = false;
  std::string why = impl_->Release(job_id, handle, &waiting);
  if (waiting) return Status::InProgress(reasons::kReleasing, std::move(why));
  return RetryableUnlessEmpty(reasons::kReleaseFailed, std::move(why));
}

nlohmann::json KubeRayFleet::Capacity() {
  return impl_->Capacity();
}

kube::ClientStats KubeRayFleet::ApiStats() const {
  return impl_->client.stats();
}

std::vector<std::string> KubeRayFleet::SweepOrphans() {
  return impl_->SweepOrphans();
}

}  // namespace starforge::fleet
