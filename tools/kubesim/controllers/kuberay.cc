#include "controllers/kuberay.h"

#include <algorithm>
#include <stdexcept>

#include <httplib.h>

#include "controllers/kubeutil.h"
#include "node/fake_ray.h"

namespace kubesim::controllers {

OperatorFeatures OperatorFeatures::For(const ControllerFlags& flags) {
  OperatorFeatures f;
  if (!flags.OperatorAtLeast(1, 7)) {
    f.kuberay_version = "v1.4.2";
    f.events_api = false;
    f.validation_failed = false;
    f.prerunning_deadline = false;
    f.submission_mode_label = false;
    f.gcs_wait_loop = false;
    f.replica_index_label = false;
    f.recreate_hash_annotation = false;
    f.status_check_timeout = false;
    f.ulimit_env = false;
    f.mirror_cluster_status_initializing = false;
    f.rayjob_head_service = false;
  }
  return f;
}

std::string HeadServiceName(const json& cluster) {
  const std::string custom =
      Str(cluster, {"spec", "headGroupSpec", "headService", "metadata", "name"});
  if (!custom.empty()) return custom;
  return Str(cluster, {"metadata", "name"}) + "-head-svc";
}

std::string HeadFqdn(const json& cluster) {
  return HeadServiceName(cluster) + "." + Str(cluster, {"metadata", "namespace"}) +
         ".svc.cluster.local";
}

std::map<std::string, int> HeadServicePorts(const json& cluster) {
  std::map<std::string, int> ports;
  const json& containers = At(cluster, {"spec", "headGroupSpec", "template", "spec", "containers"});
  if (containers.is_array() && !containers.empty()) {
    const json& cports = containers[0].value("ports", json::array());
    for (const json& p : cports) {
      const int n = p.value("containerPort", 0);
      std::string name = p.value("name", "");
      if (name.empty()) name = std::to_string(n) + "-port";
      ports[name] = n;
    }
  }
  if (ports.empty()) {
    ports = {{"client", 10001},
             {"gcs-server", 6379},
             {"dashboard", 8265},
             {"metrics", 8080},
             {"serve", 8000}};
  }
  if (ports.count("metrics") == 0) ports["metrics"] = 8080;
  return ports;
}

json BuildHeadService(const json& cluster) {
  const std::string name = Str(cluster, {"metadata", "name"});
  std::string app = "kuberay";
  const std::string tmpl_app =
      Str(cluster, {"spec", "headGroupSpec", "template", "metadata", "labels", kAppNameLabel});
  if (!tmpl_app.empty()) app = tmpl_app;
  json selector = {{kRayClusterLabel, name},
                   {kRayNodeTypeLabel, "head"},
                   {kRayIdLabel, name + "-head"},
                   {kAppNameLabel, app},
                   {kCreatedByLabel, "kuberay-operator"}};
  json ports = json::array();
  for (const auto& [pname, port] : HeadServicePorts(cluster)) {  // std::map: sorted by name
    ports.push_back({{"name", pname}, {"port", port}, {"appProtocol", "tcp"}});
  }
  json md = {{"name", HeadServiceName(cluster)},
             {"namespace", Str(cluster, {"metadata", "namespace"})},
             {"labels", selector}};
  const json& ann = At(cluster, {"spec", "headServiceAnnotations"});
  if (ann.is_object() && !ann.empty()) md["annotations"] = ann;
  json spec = {{"selector", selector}, {"ports", ports}};
  const std::string type = Str(cluster, {"spec", "headGroupSpec", "serviceType"});
  if (!type.empty()) spec["type"] = type;
  if (type.empty() || type == "ClusterIP") {
    spec["clusterIP"] = "None";
    spec["publishNotReadyAddresses"] = true;
  }
  return {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", md}, {"spec", spec}};
}

DashboardClient::DashboardClient(std::string host, int port)
    : host_(std::move(host)), port_(port) {}

namespace {

// A fake head's in-process answer (--pods fake, node/fake_ray.h) as an httplib result; an
// empty result when no fake head holds `host`: then dial.
httplib::Result Fake(const std::string& host, const std::string& method, const std::string& path,
                     const std::string& body = "") {
  auto reply = node::AnswerFakeRay(host, method, path, body);
  if (!reply) return httplib::Result(nullptr, httplib::Error::Unknown);
  auto res = std::make_unique<httplib::Response>();
  res->status = reply->status;
  res->body = std::move(reply->body);
  return httplib::Result(std::move(res), httplib::Error::Success);
}

httplib::Client MakeHttp(const std::string& host, int port) {
  httplib::Client c(host, port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(2, 0);
  c.set_write_timeout(2, 0);
  return c;
}

std::string Describe(const httplib::Result& r) {
  return r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error());
}

}  // namespace

int DashboardClient::GetJobInfo(const std::string& job_id, RayJobInfo* info) {
  auto r = Fake(host_, "GET", "/api/jobs/" + job_id);
  if (!r) r = MakeHttp(host_, port_).Get("/api/jobs/" + job_id);
  if (!r) throw std::runtime_error("GET /api/jobs/" + job_id + ": " + Describe(r));
  if (r->status == 404) return 0;
  json body = json::parse(r->body, nullptr, false);
  if (!body.is_object()) throw std::runtime_error("GetJobInfo fail: " + r->body);
  info->status = body.value("status", "");
  info->message = body["message"].is_string() ? body["message"].get<std::string>() : "";
  info->start_time = body["start_time"].is_number() ? body["start_time"].get<int64_t>() : 0;
  info->end_time = body["end_time"].is_number() ? body["end_time"].get<int64_t>() : 0;
  return 1;
}

void DashboardClient::SubmitJob(const json& request) {
  auto r = Fake(host_, "POST", "/api/jobs/", request.dump());
  if (!r) r = MakeHttp(host_, port_).Post("/api/jobs/", request.dump(), "application/json");
  if (!r) throw std::runtime_error("SubmitJob fail: " + Describe(r));
  if (r->status < 200 || r->status > 299) {
    if (r->status == 500 &&
        r->body.find("Please use a different submission_id") != std::string::npos) {
      return;
    }
    throw std::runtime_error("SubmitJob fail: " + Describe(r));
  }
}

void DashboardClient::StopJob(const std::string& job_id) {
  auto r = Fake(host_, "POST", "/api/jobs/" + job_id + "/stop");
  if (!r) r = MakeHttp(host_, port_).Post("/api/jobs/" + job_id + "/stop", "", "application/json");
  if (!r) throw std::runtime_error("StopJob fail: " + Describe(r));
}

}  // namespace kubesim::controllers
