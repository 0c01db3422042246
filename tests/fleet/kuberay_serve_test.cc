// `forge serve` with the kuberay fleet, end to end through the REST API: kubesim (API server
// only; the test plays the operator through /status), s3rver for the capsules, and the real
// binary. Proves the wiring: the fleet is built from FORGE_K8S_* and FORGE_S3_*, the controller
// drives a job from submit to a deleted RayJob, capacity is served, and a `kill -9` of the
// server mid-run neither loses nor duplicates the job.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "../api/api_test_support.h"
#include "../kube/kubesim_fixture.h"
#include "../objstore/s3peer.h"
#include "starforge/kube/client.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/resources.h"
#include "support/poll.h"

namespace starforge::fleet {
namespace {

namespace fs = std::filesystem;
namespace res = kube::resources;
using api::testing::ServeProcess;
using nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Eventually, with the patience of a round trip through `forge serve` and kubesim.
template <typename F>
bool Eventually(F f) {
  return support::Eventually(f, 30s, 50ms);
}

class KubeRayServe : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> args = {"--nodes", (tmp_.path() / "nodes.yaml").string()};
    support::WriteFile(tmp_.path() / "nodes.yaml",
                       "- metadata: {name: h100-a, labels: {starforge/gpu-series: h100}}\n"
                       "  status:\n"
                       "    capacity: {cpu: '64', memory: 512Gi, nvidia.com/gpu: '8'}\n"
                       "    allocatable: {cpu: '63', memory: 500Gi, nvidia.com/gpu: '8'}\n");
    args.insert(args.end(), {"--controllers", "none"});  // the test plays the operator
    std::string error;
    sim_ = kube::testing::StartKubesim(args, &error);
    ASSERT_TRUE(sim_) << error;
    s3_ = objstore::testing::S3Peer::Start(&error);
    ASSERT_TRUE(s3_) << error;
    kube::ClientConfig c;
    c.server = sim_->url();
    k8s_ = std::make_unique<kube::Client>(c);
    k8s_->Create(res::kNamespaces, "", {{"metadata", {{"name", "starforge"}}}});
    root_ = tmp_.path() / "root";
  }

  std::map<std::string, std::string> Env() const {
    return {{"FORGE_K8S_API_SERVER", sim_->url()},
            {"FORGE_K8S_NAMESPACE", "starforge"},
            {"FORGE_S3_ENDPOINT", s3_->endpoint()},
            {"FORGE_S3_BUCKET", objstore::testing::S3Peer::kBucket},
            {"FORGE_S3_ACCESS_KEY", objstore::testing::S3Peer::kAccessKey},
            {"FORGE_S3_SECRET_KEY", objstore::testing::S3Peer::kSecretKey}};
  }

  void StartServe() {
    std::string error;
    serve_ = ServeProcess::Start(root_, Env(), {"--resync-ms", "100"}, &error);
    ASSERT_TRUE(serve_) << error;
    std::smatch m;
    const std::string out = serve_->Stdout();
    if (std::regex_search(out, m, std::regex("admin token[^:]*: (sf_[a-z0-9]+)"))) token_ = m[1];
    http_ = serve_->Client();
  }

  httplib::Headers Auth() const { return {{"Authorization", "Bearer " + token_}}; }

  json GetJson(const std::string& path) {
    auto r = http_->Get(path.c_str(), Auth());
    if (!r || r->status != 200) return json();
    return json::parse(r->body);
  }

  std::string Submit(const std::string& spec) {
    const std::string zip =
        api::testing::MakeZip(tmp_, json::array({{{"name", "main.py"}, {"data", "print(1)\n"}}}));
    httplib::MultipartFormDataItems items = {{"spec", spec, "", ""},
                                             {"code", zip, "code.zip", "application/zip"}};
    auto r = http_->Post("/api/v1/jobs", Auth(), items);
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 201) << r->body;
    return json::parse(r->body).value("id", "");
  }

  std::string Phase(const std::string& id) {
    return GetJson("/api/v1/jobs/" + id).value("phase", "");
  }

  json RayJobs() { return k8s_->List(kuberay::kRayJobs, "starforge")["items"]; }

  void SetStatus(const std::string& name, const json& status) {
    k8s_->MergePatchStatus(kuberay::kRayJobs, "starforge", name, {{"status", status}});
  }

  support::TempDir tmp_;
  fs::path root_;
  std::unique_ptr<kube::testing::Kubesim> sim_;
  std::unique_ptr<objstore::testing::S3Peer> s3_;
  std::unique_ptr<kube::Client> k8s_;
  std::unique_ptr<ServeProcess> serve_;
  std::unique_ptr<httplib::Client> http_;
  std::string token_;
};

const char* kJob =
    "name: serve-kr\nfleet: kuberay\nimage: python:3.12\nentrypoint: [python3, main.py]\n"
    "pools: [{name: main, gpuSeries: h100, gpusPerMachine: 8}]\n";

TEST_F(KubeRayServe, AJobGoesFromSubmitToADeletedRayJobAndSurvivesAKill9) {
  StartServe();
  ASSERT_FALSE(token_.empty()) << serve_->Stdout();

  // Capacity is served from the cluster.
  json cap;
  ASSERT_TRUE(Eventually([&] {
    cap = GetJson("/api/v1/capacity");
    for (const auto& f : cap.value("fleets", json::array()))
      if (f.value("fleet", "") == "kuberay" && f.contains("series")) return true;
    return false;
  })) << cap.dump();

  // A job that can never fit is refused at submit with what exists.
  const std::string zip =
      api::testing::MakeZip(tmp_, json::array({{{"name", "main.py"}, {"data", "print(1)\n"}}}));
  auto refused = http_->Post("/api/v1/jobs", Auth(),
                             httplib::MultipartFormDataItems{
                                 {"spec",
                                  "name: big\nfleet: kuberay\nimage: i\nentrypoint: [x]\n"
                                  "pools: [{name: main, gpuSeries: h100, gpusPerMachine: 16}]\n",
                                  "", ""},
                                 {"code", zip, "code.zip", "application/zip"}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 422) << refused->body;

  const std::string id = Submit(kJob);
  ASSERT_FALSE(id.empty());
  json rayjob;
  ASSERT_TRUE(Eventually([&] {
    json items = RayJobs();
    if (items.empty()) return false;
    rayjob = items[0];
    return true;
  })) << serve_->Stderr();
  const std::string name = rayjob["metadata"]["name"];
  EXPECT_EQ(rayjob["metadata"]["labels"][kuberay::kLabelJobId], id);
  // s3rver is plain http: the capsule reaches the pods through the fetch-capsule init container.
  EXPECT_TRUE(rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"].contains(
      "initContainers"));
  ASSERT_TRUE(Eventually([&] { return Phase(id) == "Pending"; }));

  SetStatus(
      name,
      {{"jobDeploymentStatus", "Running"}, {"jobStatus", "RUNNING"}, {"jobId", name + "-abcde"}});
  ASSERT_TRUE(Eventually([&] { return Phase(id) == "Running"; })) << Phase(id);

  // The server dies mid-run; a new one adopts the job from its record and the cluster.
  serve_->Stop(SIGKILL);
  StartServe();
  SetStatus(name, {{"jobDeploymentStatus", "Complete"},
                   {"jobStatus", "SUCCEEDED"},
                   {"message", "Job finished successfully."}});
  ASSERT_TRUE(Eventually([&] { return Phase(id) == "Succeeded"; })) << Phase(id);
  json job;
  ASSERT_TRUE(Eventually([&] {
    job = GetJson("/api/v1/jobs/" + id);
    return job["cleanup"].value("released", false);
  })) << job.dump();
  EXPECT_TRUE(job["cleanup"].value("logsArchived", false));
  EXPECT_TRUE(RayJobs().empty()) << "the RayJob is deleted at once";
  EXPECT_TRUE(fs::exists(root_ / "jobs" / id / "logs" / "rayjob.json"));
  const json counts = json::parse(k8s_->Raw("GET", "/kubesim/requests"));
  EXPECT_EQ(counts["requests"].value("create rayjobs", 0), 1) << counts.dump();
  std::cout << "kubesim requests for the whole test: " << counts.dump() << "\n";
}

TEST_F(KubeRayServe, CancelDeletesTheRayJobAndEndsCancelled) {
  StartServe();
  const std::string id = Submit(kJob);
  ASSERT_TRUE(Eventually([&] { return !RayJobs().empty(); }));
  const std::string name = RayJobs()[0]["metadata"]["name"];
  SetStatus(name, {{"jobDeploymentStatus", "Running"}, {"jobStatus", "RUNNING"}});
  ASSERT_TRUE(Eventually([&] { return Phase(id) == "Running"; }));
  auto r = http_->Post(("/api/v1/jobs/" + id + "/cancel").c_str(), Auth(), "", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_LT(r->status, 300) << r->body;
  ASSERT_TRUE(Eventually([&] { return Phase(id) == "Cancelled"; })) << Phase(id);
  EXPECT_TRUE(Eventually([&] { return RayJobs().empty(); }));
  json job;
  EXPECT_TRUE(Eventually([&] {
    job = GetJson("/api/v1/jobs/" + id);
    return job["cleanup"].value("released", false);
  })) << job.dump();
}

}  // namespace
}  // namespace starforge::fleet
