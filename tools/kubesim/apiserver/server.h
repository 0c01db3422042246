// The kubesim HTTP server: routing of /api and /apis requests to the REST handlers, watch
// streams, pod logs, discovery, authentication, fault injection and the admin endpoints under
// /kubesim/. See docs/kubesim.md for the surface it covers.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "auth.h"
#include "faults.h"
#include "resources.h"
#include "status.h"
#include "store.h"
#include "table.h"

namespace kubesim {

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string port_file;
  std::string crd_dir;
  std::string token;
  bool tls = false;
  std::string cert_file;  // --tls: where the generated certificate is written
  std::string key_file;
  std::string nodes_file;
  size_t history = 10000;
  int bookmark_interval_ms = 1000;
  int64_t max_pod_grace_seconds = -1;  // cap on graceful pod deletion (-1 = none)
  std::string rbac_file;               // --rbac: token -> user and rules (auth.h)
  // --kueue: Kueue's admission contract for RayJobs, as its mutating webhook applies it: a RayJob
  // created with label kueue.x-k8s.io/queue-name gets spec.suspend=true; a test "admits" it by
  // setting spec.suspend=false (no Workload, quota or ClusterQueue is emulated).
  bool kueue_suspend = false;
  // Called once the listener is bound (port file written), before serving starts: main.cc
  // starts the controllers here (controllers/controller.h).
  // `resolved` is the server's view (e.g. the --tls cert_file default filled in).
  std::function<void(int port, const Options& resolved)> on_listening;
  // Requests carrying this key in X-Kubesim-Controller-Key are kubesim's own controllers
  // (admin, never faulted, counted apart); "" = no controller identity is honoured.
  std::string controller_key;
  // Reconciles per controller (main.cc: controllers::ReconcileCounts), shown beside their
  // requests by GET /kubesim/requests?controllers=1; `reset` clears them (its DELETE).
  std::function<std::map<std::string, uint64_t>(bool reset)> reconcile_counts;
  // Worker threads of the listener (each watch and each kept-alive connection holds one).
  int threads = 64;
};

// A parsed /api or /apis request for a resource.
struct Target {
  const ResourceInfo* r = nullptr;
  std::string ns;
  std::string name;
  std::string sub;
  std::string verb;  // get, list, watch, create, update, patch, delete, deletecollection
  Identity who;      // the caller (authenticated before routing)
  std::string CounterResource() const { return sub.empty() ? r->plural : r->plural + "/" + sub; }
};

class Server {
 public:
  Server(Options opts, Registry reg);
  ~Server();
  // Binds, writes the port file, serves until Stop(). Returns the process exit code.
  int Run();
  void Stop();

 private:
  void Dispatch(const httplib::Request& req, httplib::Response& res);
  // Dispatch's work; names the controller sending the request and its counter, if any.
  void DispatchCounted(const httplib::Request& req, httplib::Response& res, std::string* controller,
                       std::string* counted);
  void HandleAdmin(const httplib::Request& req, httplib::Response& res);
  bool HandleDiscovery(const httplib::Request& req, httplib::Response& res);
  void HandleResource(const httplib::Request& req, httplib::Response& res, const Target& t);

  // REST verbs (handlers.cc).
  void Get(const httplib::Request& req, httplib::Response& res, const Target& t);
  void List(const httplib::Request& req, httplib::Response& res, const Target& t);
  void Create(const httplib::Request& req, httplib::Response& res, const Target& t);
  void Update(const httplib::Request& req, httplib::Response& res, const Target& t);
  void Patch(const httplib::Request& req, httplib::Response& res, const Target& t);
  void Delete(const httplib::Request& req, httplib::Response& res, const Target& t);
  void DeleteCollection(const httplib::Request& req, httplib::Response& res, const Target& t);
  // watch.cc
  void Watch(const httplib::Request& req, httplib::Response& res, const Target& t,
             int close_after_ms);
  // logs.cc
  void Log(const httplib::Request& req, httplib::Response& res, const Target& t);
  void SetLog(const httplib::Request& req, httplib::Response& res, const std::string& ns,
              const std::string& pod, bool append);

  // proxy.cc: services/proxy to the backend named by the proxy-target annotation.
  void ServiceProxy(const httplib::Request& req, httplib::Response& res, const Target& t);
  // binding.cc: pods/binding (the scheduler's assignment of a pod to a node).
  void Bind(const httplib::Request& req, httplib::Response& res, const Target& t);
  // POST selfsubjectaccessreviews, evaluated against the RBAC table (allowed without one).
  void AccessReview(const httplib::Request& req, httplib::Response& res, const Target& t);

  // Shared by create / update / patch (store.mu held).
  nlohmann::json Admit(const httplib::Request& req, httplib::Response& res, const Target& t,
                       nlohmann::json obj, const nlohmann::json* old);
  nlohmann::json CreateLocked(const httplib::Request& req, httplib::Response& res, const Target& t,
                              nlohmann::json obj, bool* created);
  nlohmann::json UpdateLocked(const httplib::Request& req, httplib::Response& res, const Target& t,
                              nlohmann::json obj, const nlohmann::json& old);
  // A free address of the service range 10.96.0.0/16 (the real control plane's
  // --service-cluster-ip-range), picked at random as kube-apiserver's allocator does.
  std::string AllocateClusterIpLocked();
  // What kube-controller-manager puts into every namespace soon after it is created: the
  // `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap (kubesim writes both at once).
  void PopulateNamespaceLocked(const std::string& ns);
  // After a delete: puts them back, as those controllers do, unless the namespace is going away.
  void RepopulateNamespaceLocked(const std::string& ns);
  // kube-root-ca.crt's data: kubesim's certificate under --tls, else empty.
  nlohmann::json RootCaConfigMap(const std::string& ns) const;
  std::string root_ca_pem_;
  void LoadNodes(const std::string& path);
  void Bootstrap();

  Options opts_;
  std::optional<Rbac> rbac_;
  Registry reg_;
  Store store_;
  Faults faults_;
  std::unique_ptr<httplib::Server> http_;
  std::thread ticker_;

  // Requests of kubesim's own controllers: "<controller>" -> "<verb> <resource>" -> n.
  void CountController(const std::string& name, const std::string& verb,
                       const std::string& resource);
  std::mutex controller_counts_mu_;
  std::map<std::string, std::map<std::string, uint64_t>> controller_counts_;
  // Of those, the ones answered 409 Conflict (a write on a stale read, or AlreadyExists).
  std::map<std::string, std::map<std::string, uint64_t>> controller_conflicts_;

  std::mutex logs_mu_;
  std::condition_variable logs_cv_;
  std::map<std::string, std::string> logs_;  // "ns/pod/container" -> text
};

// Conversions between the stored form (core/v1 Event) and what a resource presents.
nlohmann::json ToStorage(const ResourceInfo& r, nlohmann::json obj);
nlohmann::json Present(const ResourceInfo& r, nlohmann::json obj);

// The Table a GET/list/watch asked for (Accept `as=Table`), or nullopt for plain JSON; throws
// 400 on a bad includeObject.
std::optional<table::Options> TableRequested(const httplib::Request& req, const Target& t);
// The printer of a resource: built-in kinds by name, custom resources from their CRD's
// additionalPrinterColumns for the served version.
table::Printer PrinterFor(const ResourceInfo& r);

// A boolean query parameter as kube-apiserver reads one (apimachinery's conversion of a query
// string to bool): absent is false; present, it is true unless its value is "0" or "false" in any
// case — so `watch=True` (what the official Python client sends) and a bare `watch=` are watches.
bool BoolParam(const httplib::Request& req, const char* name);

void WriteJson(httplib::Response& res, int code, const nlohmann::json& body);
// A Table body, with kube-apiserver's Content-Type for it.
void WriteTable(httplib::Response& res, const nlohmann::json& table);
void WriteError(httplib::Response& res, const ApiError& e);

}  // namespace kubesim
