// forge doctor: the verdicts (pure) on what a cluster shows, and Run against kubesim with the RBAC
// of deploy/ — everything in place passes; each prerequisite taken away fails with its fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "../kube/kubesim_fixture.h"
#include "starforge/common/yaml_json.h"
#include "starforge/doctor/doctor.h"
#include "support/files.h"
#include "support/object_store.h"
#include "support/temp_dir.h"

namespace starforge::doctor {
namespace {

namespace fs = std::filesystem;
namespace res = kube::resources;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kAdminToken = "doctor-admin-token-5b1e";

const Check& Find(const Report& r, const std::string& id) {
  for (const auto& c : r.checks)
    if (c.id == id) return c;
  static const Check none{"missing", "missing", Verdict::kFail, "no check " + id, ""};
  return none;
}

json Node(const std::string& name, const std::string& series, const std::string& gpus) {
  json n = {{"metadata", {{"name", name}, {"labels", json::object()}}},
            {"status", {{"capacity", {{"cpu", "8"}}}}}};
  if (!series.empty()) n["metadata"]["labels"]["starforge/gpu-series"] = series;
  if (!gpus.empty()) n["status"]["capacity"]["nvidia.com/gpu"] = gpus;
  return n;
}

// ---- pure verdicts ----

TEST(DoctorChecks, GpuNodesPerSeriesAndTheFixForEachGap) {
  config::Config cfg;
  Check c = CheckGpuNodes(
      {{"items", {Node("a", "h200", "8"), Node("b", "h200", "8"), Node("c", "h100", "4")}}}, cfg);
  EXPECT_EQ(c.verdict, Verdict::kPass);
  EXPECT_EQ(c.detail, "h100: 1 node, 4 GPUs; h200: 2 nodes, 16 GPUs");

  c = CheckGpuNodes({{"items", {Node("a", "", "8")}}}, cfg);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.fix, HasSubstr("kubectl label node <node> starforge/gpu-series=<series>"));
  EXPECT_THAT(c.fix, HasSubstr("GPU nodes without the label: a"));

  // Labelled, but no device plugin: no nvidia.com/gpu capacity.
  c = CheckGpuNodes({{"items", {Node("a", "h200", "8"), Node("b", "h200", "")}}}, cfg);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.detail, HasSubstr("no nvidia.com/gpu capacity on b (h200)"));
  EXPECT_THAT(c.fix, HasSubstr("NVIDIA device plugin"));
  cfg.k8s_gpu_passthrough = false;  // test clusters: pods request no GPU
  EXPECT_EQ(CheckGpuNodes({{"items", {Node("b", "h200", "")}}}, cfg).verdict, Verdict::kPass);

  // A GPU node StarForge cannot use: a warning naming it.
  cfg.k8s_gpu_passthrough = true;
  c = CheckGpuNodes({{"items", {Node("a", "h200", "8"), Node("z", "", "8")}}}, cfg);
  EXPECT_EQ(c.verdict, Verdict::kWarn);
  EXPECT_THAT(c.detail, HasSubstr("z"));
}

TEST(DoctorChecks, OperatorVersionFromTheImageTag) {
  EXPECT_EQ(ImageVersion("quay.io/kuberay/operator:v1.4.2"), (std::vector<int>{1, 4, 2}));
  EXPECT_EQ(ImageVersion("registry:5000/kuberay/operator:v1.7.0@sha256:ab"),
            (std::vector<int>{1, 7, 0}));
  EXPECT_EQ(ImageVersion("registry:5000/kuberay/operator"), std::nullopt);
  EXPECT_EQ(ImageVersion("kuberay/operator:latest"), std::nullopt);

  auto pod = [](const std::string& image) {
    return json{{"metadata", {{"name", "kuberay-operator-7d9"}}},
                {"spec", {{"containers", {{{"name", "kuberay-operator"}, {"image", image}}}}}}};
  };
  EXPECT_EQ(CheckOperator({pod("quay.io/kuberay/operator:v1.4.0")}, "").verdict, Verdict::kPass);
  const Check old = CheckOperator({pod("quay.io/kuberay/operator:v1.3.2")}, "");
  EXPECT_EQ(old.verdict, Verdict::kFail);
  EXPECT_THAT(old.fix, HasSubstr("helm install kuberay-operator"));
  EXPECT_EQ(CheckOperator({}, "").verdict, Verdict::kWarn) << "not found is not proof of absence";
}

// KubeRay's --reconcile-concurrency (default 1) is read from the operator's args: one worker
// gets a hint for big fleets (each job's release waits for the operator's reconcile).
TEST(DoctorChecks, OperatorReconcileConcurrency) {
  auto pod = [](const json& args) {
    json c = {{"name", "kuberay-operator"}, {"image", "quay.io/kuberay/operator:v1.4.2"}};
    if (!args.is_null()) c["args"] = args;
    return json{{"metadata", {{"name", "kuberay-operator-7d9"}}}, {"spec", {{"containers", {c}}}}};
  };
  for (const json& args :
       {json(), json::array({"--reconcile-concurrency=1"}),
        json::array({"--enable-leader-election=true", "-reconcile-concurrency", "1"})}) {
    const Check c = CheckOperator({pod(args)}, "");
    EXPECT_EQ(c.verdict, Verdict::kPass) << args.dump();
    EXPECT_THAT(c.detail, HasSubstr("--reconcile-concurrency 1")) << args.dump();
    EXPECT_THAT(c.detail, HasSubstr("reconcileConcurrency=10")) << args.dump();
  }
  for (const json& args : {json::array({"--reconcile-concurrency=16"}),
                           json::array({"--reconcile-concurrency", "16", "--qps=100"})}) {
    const Check c = CheckOperator({pod(args)}, "");
    EXPECT_EQ(c.verdict, Verdict::kPass) << args.dump();
    EXPECT_THAT(c.detail, HasSubstr("--reconcile-concurrency 16")) << args.dump();
    EXPECT_THAT(c.detail, Not(HasSubstr("reconcileConcurrency"))) << c.detail;
  }
}

TEST(DoctorChecks, CrdsMustServeRayJobsAndRayClusters) {
  EXPECT_EQ(
      CheckKubeRayCrds({{"resources", {{{"name", "rayjobs"}}, {{"name", "rayclusters"}}}}}, "")
          .verdict,
      Verdict::kPass);
  const Check c = CheckKubeRayCrds({{"resources", {{{"name", "rayclusters"}}}}}, "");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.detail, HasSubstr("rayjobs"));
  EXPECT_EQ(CheckKubeRayCrds(nullptr, "NotFound (404)").verdict, Verdict::kFail);
}

TEST(DoctorChecks, StoragePvcMustBeBoundWithTheAccessModeTheSettingsNeed) {
  config::Config cfg;
  cfg.k8s_namespace = "starforge";
  EXPECT_EQ(CheckStoragePvc(nullptr, "", cfg).verdict, Verdict::kWarn) << "unset: a warning";
  EXPECT_THAT(CheckStoragePvc(nullptr, "", cfg).detail, HasSubstr("driver.log"));
  cfg.k8s_storage_pvc = "data";
  EXPECT_EQ(CheckStoragePvc(nullptr, "", cfg).verdict, Verdict::kFail);
  const json rwo = {{"spec", {{"accessModes", {"ReadWriteOnce"}}}},
                    {"status", {{"phase", "Bound"}, {"accessModes", {"ReadWriteOnce"}}}}};
  const Check c = CheckStoragePvc(rwo, "", cfg);
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.fix, HasSubstr("FORGE_K8S_STORAGE_SHARED=false"));
  cfg.k8s_storage_shared = false;
  EXPECT_EQ(CheckStoragePvc(rwo, "", cfg).verdict, Verdict::kPass);
  json pending = rwo;
  pending["status"] = {{"phase", "Pending"}};
  EXPECT_EQ(CheckStoragePvc(pending, "", cfg).verdict, Verdict::kFail);
}

TEST(DoctorChecks, MissingPermissionsAreNamedAsDeployGrantsThem) {
  const Rule& rayjobs = RequiredRules().front();
  const Check c = CheckPermissions({{rayjobs, {"delete"}}}, {}, "starforge");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.detail,
              HasSubstr("- apiGroups: [\"ray.io\"], resources: [\"rayjobs\"], verbs: [\"delete\"] "
                        "(Role forge in namespace starforge)"));
  EXPECT_THAT(c.fix, HasSubstr("deploy/rbac.yaml"));
}

TEST(DoctorChecks, TextMarksEachCheckAndJsonRoundTrips) {
  Report r;
  r.checks.push_back({"a", "First", Verdict::kPass, "fine", ""});
  r.checks.push_back({"b", "Second", Verdict::kFail, "broken", "do this"});
  const std::string text = ToText(r);
  EXPECT_THAT(text, HasSubstr("✓ First: fine\n"));
  EXPECT_THAT(text, HasSubstr("✗ Second: broken\n    fix: do this\n"));
  EXPECT_THAT(text, HasSubstr("1 of 2 checks failed"));
  EXPECT_FALSE(r.Passed());
  const Report back = FromJson(ToJson(r));
  EXPECT_EQ(ToText(back), text);
  EXPECT_EQ(ToJson(r)["passed"], false);
}

// ---- Run against kubesim (RBAC of deploy/) ----

// An S3 store in memory; presigned URLs are fetched by the test's `fetch`.
class MemoryS3 : public support::RefusingObjectStore {
 public:
  StatusOr<objstore::PutOutcome> PutBytes(const std::string& key, std::string_view bytes,
                                          const objstore::Progress&) override {
    if (!writable) return objstore::Failure(objstore::ErrorKind::kAccessDenied, "AccessDenied");
    const bool present = objects.count(key) > 0;
    objects[key] = std::string(bytes);
    return objstore::PutOutcome{static_cast<int64_t>(bytes.size()),
                                present ? 0 : static_cast<int64_t>(bytes.size()), present};
  }
  StatusOr<std::string> PresignGet(const std::string& key, int64_t, std::time_t) override {
    return "https://s3.test.invalid/bucket/" + key + "?X-Amz-Signature=s3cr3t";
  }
  std::string Describe() const override { return "s3 https://s3.test.invalid bucket"; }
  std::map<std::string, std::string> objects;
  bool writable = true;
};

class DoctorKubesimTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new support::TempDir("doctor-kubesim");
    // deploy/'s rules for forge-token, and a second service account that lacks one rule.
    std::string table =
        support::ReadFile(fs::path(STARFORGE_SOURCE_DIR) / "deploy" / "rbac-kubesim.yaml");
    const json parsed = ParseYaml(table).value();
    json weak = parsed["users"][0];
    weak["name"] = "system:serviceaccount:starforge:weak";
    weak["token"] = "weak-token";
    weak["rules"][0]["verbs"] = {"create", "get", "list", "watch"};  // rayjobs: no delete
    json users = parsed["users"];
    users.push_back(weak);
    dir_->Write("rbac.json", json{{"users", users}}.dump());
    dir_->Write("nodes.yaml", R"(- metadata:
    name: gpu-a
    labels: {starforge/gpu-series: h200}
  status:
    capacity: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8"}
    allocatable: {cpu: "95", memory: 1000Gi, nvidia.com/gpu: "8"}
    conditions: [{type: Ready, status: "True"}]
)");
    sim_ = kube::testing::StartKubesim({"--tls", "--cert-file", "{cert}", "--token", kAdminToken,
                                        "--rbac", (*dir_ / "rbac.json").string(), "--nodes",
                                        (*dir_ / "nodes.yaml").string(), "--controllers", "none"},
                                       &sim_error_);
    if (!sim_) return;
    kube::Client admin(Connection(kAdminToken));
    for (const char* ns : {"starforge", "kuberay-system"})
      admin.Create(res::kNamespaces, "", {{"metadata", {{"name", ns}}}});
    admin.Create(
        res::kPods, "kuberay-system",
        {{"metadata",
          {{"name", "kuberay-operator-5f7d8"},
           {"labels", {{"app.kubernetes.io/name", "kuberay-operator"}}}}},
         {"spec",
          {{"containers",
            {{{"name", "kuberay-operator"}, {"image", "quay.io/kuberay/operator:v1.4.2"}}}}}}});
    auto pvc = [&](const std::string& name, const std::string& mode) {
      admin.Create(
          res::kPersistentVolumeClaims, "starforge",
          {{"metadata", {{"name", name}}},
           {"spec",
            {{"accessModes", {mode}}, {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}});
      admin.MergePatchStatus(res::kPersistentVolumeClaims, "starforge", name,
                             {{"status", {{"phase", "Bound"}, {"accessModes", {mode}}}}});
    };
    pvc("starforge-data", "ReadWriteMany");
    pvc("single-node", "ReadWriteOnce");
  }
  static void TearDownTestSuite() {
    sim_.reset();
    delete dir_;
    dir_ = nullptr;
  }

  static kube::ClientConfig Connection(const std::string& token) {
    kube::ClientConfig c;
    c.server = sim_->url();
    c.token = Secret(token);
    c.ca_file = sim_->cert_file();
    c.source = "test";
    return c;
  }

  void SetUp() override { ASSERT_TRUE(sim_) << sim_error_; }

  RunOptions Options(const std::string& token = "forge-token") {
    RunOptions o;
    o.config.k8s_namespace = "starforge";
    o.config.k8s_storage_pvc = "starforge-data";
    o.kube = Connection(token);
    o.objects = &s3_;
    o.objects_are_s3 = true;
    o.fetch = [this](const std::string& url) {
      const std::string key =
          url.substr(url.find("/bucket/") + 8, url.find('?') - url.find("/bucket/") - 8);
      if (!fetchable) throw std::runtime_error("Could not connect to server");
      return s3_.objects.at(key);
    };
    return o;
  }

  static support::TempDir* dir_;
  static std::unique_ptr<kube::testing::Kubesim> sim_;
  static std::string sim_error_;
  MemoryS3 s3_;
  bool fetchable = true;
};

support::TempDir* DoctorKubesimTest::dir_ = nullptr;
std::unique_ptr<kube::testing::Kubesim> DoctorKubesimTest::sim_;
std::string DoctorKubesimTest::sim_error_;

TEST_F(DoctorKubesimTest, PassesWithEveryPrerequisiteInPlace) {
  const Report r = doctor::Run(Options());
  EXPECT_TRUE(r.Passed()) << ToText(r);
  EXPECT_EQ(Find(r, "permissions").verdict, Verdict::kPass) << ToText(r);
  EXPECT_THAT(Find(r, "apiserver").detail, HasSubstr("Kubernetes v"));
  EXPECT_THAT(Find(r, "kuberay-operator").detail, HasSubstr("v1.4.2"));
  EXPECT_EQ(Find(r, "gpu-nodes").detail, "h200: 1 node, 8 GPUs");
  EXPECT_THAT(Find(r, "storage-pvc").detail, HasSubstr("ReadWriteMany"));
  EXPECT_THAT(Find(r, "object-storage").detail, HasSubstr("written"));
  const std::string text = ToText(r);
  EXPECT_THAT(text, Not(HasSubstr("s3cr3t"))) << "no signature in the report";
  EXPECT_THAT(text, Not(HasSubstr("forge-token")));
  EXPECT_THAT(Find(doctor::Run(Options()), "object-storage").detail, HasSubstr("read back"))
      << "the day's probe object is reused";
}

TEST_F(DoctorKubesimTest, AMissingPermissionIsNamedAsDeployGrantsIt) {
  const Report r = doctor::Run(Options("weak-token"));
  EXPECT_FALSE(r.Passed());
  const Check& c = Find(r, "permissions");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.detail, HasSubstr("resources: [\"rayjobs\"], verbs: [\"delete\"]"));
  EXPECT_THAT(c.detail, Not(HasSubstr("rayclusters"))) << c.detail;
}

TEST_F(DoctorKubesimTest, EachMissingPrerequisiteFailsWithItsFix) {
  RunOptions o = Options();
  o.config.k8s_storage_pvc = "no-such-claim";
  Check c = Find(doctor::Run(o), "storage-pvc");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.detail, HasSubstr("does not exist"));

  o = Options();
  o.config.k8s_storage_pvc = "single-node";  // RWO, but FORGE_K8S_STORAGE_SHARED=true
  c = Find(doctor::Run(o), "storage-pvc");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.fix, HasSubstr("FORGE_K8S_STORAGE_SHARED=false"));

  o = Options();
  o.config.k8s_gpu_node_label = "example.com/accelerator";
  c = Find(doctor::Run(o), "gpu-nodes");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.fix, HasSubstr("kubectl label node <node> example.com/accelerator=<series>"));

  fetchable = false;
  c = Find(doctor::Run(Options()), "object-storage");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.detail, HasSubstr("cannot be fetched"));
  EXPECT_THAT(c.detail, Not(HasSubstr("s3cr3t")));
  fetchable = true;
  s3_.writable = false;
  c = Find(doctor::Run(Options()), "object-storage");
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_THAT(c.detail, HasSubstr("AccessDenied"));

  o = Options();
  o.kube->server = "https://127.0.0.1:1";  // nothing listens
  const Report r = doctor::Run(o);
  EXPECT_EQ(Find(r, "apiserver").verdict, Verdict::kFail);
  EXPECT_THAT(Find(r, "apiserver").fix, HasSubstr("FORGE_K8S_API_SERVER"));
  EXPECT_FALSE(r.Passed());
}

}  // namespace
}  // namespace starforge::doctor
