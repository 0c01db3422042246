// The doctor's reading: one request (or a few) per check, each failure kept as that check's
// verdict. The verdicts themselves are in checks.cc.
#include <chrono>
#include <ctime>
#include <stdexcept>

#include <fmt/format.h>

#include "starforge/common/format.h"
#include "starforge/doctor/doctor.h"
#include "starforge/kube/errors.h"
#include "starforge/net/http.h"

namespace starforge::doctor {

namespace {

using nlohmann::json;
namespace res = kube::resources;

// GET `url` through the shared transport; the body, or std::runtime_error saying what failed
// (never the URL's query: it holds a signature).
std::string HttpGet(const std::string& url) {
  static net::Transport transport;
  net::Request req;
  req.url = url;
  req.timeout = std::chrono::seconds(20);
  req.max_error_body = 200;
  net::Response resp;
  transport.Perform(req, &resp);
  if (resp.fault != net::Fault::kNone) throw std::runtime_error(resp.error);
  if (resp.status != 200) {
    throw std::runtime_error(fmt::format("HTTP {}: {}", resp.status, resp.body.substr(0, 200)));
  }
  return resp.body;
}

std::string StripQuery(const std::string& url) {
  return url.substr(0, url.find('?'));
}

Check ObjectStorage(const RunOptions& o) {
  const std::string title = "Object storage (capsules reach pods as presigned URLs)";
  if (o.objects == nullptr || !o.objects_are_s3) {
    return {"object-storage", title, Verdict::kFail,
            "no S3 store is configured (the kuberay fleet needs one)",
            "set FORGE_S3_ENDPOINT, FORGE_S3_BUCKET, FORGE_S3_ACCESS_KEY and FORGE_S3_SECRET_KEY"};
  }
  // One small object a day: PutBytes never overwrites, so a second run the same day only reads.
  const int64_t now = NowMs() / 1000;
  const std::string key = "starforge-doctor/probe-" + FormatUtc(now, "%Y-%m-%d") + ".txt";
  const std::string content = "StarForge doctor probe: this object may be deleted.\n";
  const std::string where = o.objects->Describe();
  auto put = o.objects->PutBytes(key, content);
  if (!put) {
    return {"object-storage", title, Verdict::kFail,
            fmt::format("cannot write {} to {}: {}", key, where, put.status().message()),
            "check FORGE_S3_ENDPOINT and FORGE_S3_BUCKET (the bucket must exist) and that the "
            "keys may write to it"};
  }
  auto url = o.objects->PresignGet(key, 300, static_cast<std::time_t>(now));
  if (!url) {
    return {"object-storage", title, Verdict::kFail,
            "cannot presign a URL: " + url.status().message(), "check FORGE_S3_* settings"};
  }
  try {
    const std::string body = o.fetch ? o.fetch(url.value()) : HttpGet(url.value());
    if (body != content) {
      return {"object-storage", title, Verdict::kFail,
              "the presigned URL " + StripQuery(url.value()) + "?… answered other bytes",
              "check FORGE_S3_ENDPOINT points at the store itself (not a proxy that rewrites)"};
    }
  } catch (const std::exception& e) {
    return {"object-storage", title, Verdict::kFail,
            fmt::format("a presigned URL ({}?…) cannot be fetched: {}", StripQuery(url.value()),
                        e.what()),
            "Ray pods download capsules from such URLs: FORGE_S3_ENDPOINT must be reachable from "
            "the pods (and from here), and the store must accept SigV4 query signatures"};
  }
  return {
      "object-storage", title, Verdict::kPass,
      fmt::format("{}: {} {}, and its presigned URL fetched", where, key,
                  put.value().already_present ? "read back (written earlier today)" : "written"),
      ""};
}

}  // namespace

Report Run(const RunOptions& o) {
  Report report;
  const config::Config& cfg = o.config;
  const std::string& ns = cfg.k8s_namespace;
  if (!o.kube) {
    report.checks.push_back(CheckApiServer(std::nullopt, o.kube_error, ""));
    report.checks.push_back(ObjectStorage(o));
    return report;
  }
  kube::ClientOptions copts;
  copts.max_attempts = 2;
  copts.request_timeout = std::chrono::milliseconds(15'000);
  if (Status usable = kube::CheckClientConfig(*o.kube); !usable.ok()) {
    report.checks.push_back(CheckApiServer(std::nullopt, usable.message(), o.kube->server));
    report.checks.push_back(ObjectStorage(o));
    return report;
  }
  auto client = std::make_unique<kube::Client>(*o.kube, copts);

  // 1. The API server and its version.
  const StatusOr<std::string> version = kube::Try([&] { return client->Raw("GET", "/version"); });
  std::string unreachable = version.ok() ? "" : version.status().message();
  if (version.ok()) {
    try {
      report.checks.push_back(CheckApiServer(json::parse(*version), "", o.kube->server));
    } catch (const std::exception& e) {
      unreachable = e.what();  // not JSON
    }
  }
  if (!unreachable.empty()) {
    report.checks.push_back(CheckApiServer(std::nullopt, unreachable, o.kube->server));
    report.checks.push_back(ObjectStorage(o));
    return report;  // nothing else of the cluster can be read
  }

  // 2. Who the credentials are (SelfSubjectReview, Kubernetes 1.28+).
  json review;
  try {
    review = json::parse(
        client->Raw("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {},
                    R"({"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"})",
                    "application/json"));
  } catch (const std::exception&) {
    review = nullptr;
  }
  report.checks.push_back(CheckIdentity(review));

  // 3. Every permission of deploy/rbac.yaml.
  std::vector<std::pair<Rule, std::vector<std::string>>> denied;
  std::vector<std::string> errors;
  for (const Rule& rule : RequiredRules()) {
    std::vector<std::string> missing;
    const size_t slash = rule.resource.find('/');
    for (const auto& verb : rule.verbs) {
      kube::AccessReview ar;
      ar.verb = verb;
      ar.group = rule.group;
      ar.resource = rule.resource.substr(0, slash);
      if (slash != std::string::npos) ar.subresource = rule.resource.substr(slash + 1);
      if (!rule.cluster) ar.ns = ns;
      const StatusOr<kube::AccessReviewResult> answer =
          kube::Try([&] { return client->SelfSubjectAccessReview(ar); });
      if (!answer.ok()) {
        errors.push_back(answer.status().message());
      } else if (!answer->allowed) {
        missing.push_back(verb);
      }
    }
    if (!missing.empty()) denied.emplace_back(rule, missing);
  }
  report.checks.push_back(CheckPermissions(denied, errors, ns));

  // 4. KubeRay: CRDs served, operator version.
  const StatusOr<std::string> crds =
      kube::Try([&] { return client->Raw("GET", "/apis/ray.io/v1"); });
  if (!crds.ok()) {
    report.checks.push_back(CheckKubeRayCrds(nullptr, crds.status().message()));
  } else {
    try {
      report.checks.push_back(CheckKubeRayCrds(json::parse(*crds), ""));
    } catch (const std::exception& e) {
      report.checks.push_back(CheckKubeRayCrds(nullptr, e.what()));  // not JSON
    }
  }
  kube::ListOptions lo;
  lo.label_selector = "app.kubernetes.io/name=kuberay-operator";
  const StatusOr<json> pods = kube::Try([&] { return client->List(res::kPods, "", lo); });
  if (!pods.ok()) {
    report.checks.push_back(CheckOperator({}, pods.status().message()));
  } else {
    std::vector<json> items;
    if (pods->contains("items") && (*pods)["items"].is_array())
      items = (*pods)["items"].get<std::vector<json>>();
    report.checks.push_back(CheckOperator(items, ""));
  }

  // 5. Nodes by card series, with the device plugin's capacity.
  const StatusOr<json> nodes = kube::Try([&] { return client->List(res::kNodes, ""); });
  if (nodes.ok()) {
    report.checks.push_back(CheckGpuNodes(*nodes, cfg));
  } else {
    report.checks.push_back({"gpu-nodes", "GPU nodes", Verdict::kFail,
                             "cannot list nodes: " + nodes.status().message(),
                             "grant list on nodes (ClusterRole starforge-forge-capacity in "
                             "deploy/rbac.yaml)"});
  }

  // 6. The volumes.
  // The claim; null when none is named or it does not exist (the checks say which).
  auto pvc = [&](const std::string& name) -> StatusOr<json> {
    if (name.empty()) return json(nullptr);
    StatusOr<json> got =
        kube::Try([&] { return client->Get(res::kPersistentVolumeClaims, ns, name); });
    if (!got.ok() && got.status().code() == Code::kNotFound) return json(nullptr);
    return got;
  };
  const StatusOr<json> storage = pvc(cfg.k8s_storage_pvc);
  report.checks.push_back(CheckStoragePvc(storage.ok() ? *storage : json(nullptr),
                                          storage.ok() ? "" : storage.status().message(), cfg));
  const StatusOr<json> corpus = pvc(cfg.k8s_corpus_pvc);
  report.checks.push_back(CheckCorpusPvc(corpus.ok() ? *corpus : json(nullptr),
                                         corpus.ok() ? "" : corpus.status().message(), cfg));

  // 7. Object storage.
  report.checks.push_back(ObjectStorage(o));
  return report;
}

}  // namespace starforge::doctor
