// The Ray control-plane emulator (tools/kubesim/ray) behind kubesim's service proxy: the Jobs API
// of a real `ray start --head --block` process reached the way KubeRay's HTTPMode and StarForge
// reach it, through /api/v1/namespaces/{ns}/services/{head-svc}:dashboard/proxy/... The
// emulator's own behaviour is covered by the Python tests (kubesim.ray_unittest).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "support/kubesim.h"
#include "support/net.h"
#include "support/process.h"
#include "support/temp_dir.h"

extern char** environ;

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kSourceDir = fs::path(KUBESIM_TESTDATA).parent_path().parent_path().parent_path();

using starforge::support::FreePort;

// This process's environment less RAY_* and KUBESIM_POD_IP, plus `overrides`.
std::vector<std::string> CleanEnv(const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("RAY_", 0) == 0 || kv.rfind("KUBESIM_POD_IP=", 0) == 0) continue;
    env.push_back(kv);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

class Kubesim {
 public:
  Kubesim() {
    starforge::support::ProcessOptions how;
    how.env = CleanEnv();
    process_.Start(KUBESIM_BIN, {}, how);
  }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", process_.port());
    c.set_read_timeout(30, 0);
    return c;
  }

 private:
  starforge::support::KubesimProcess process_;
};

class RayHead {
 public:
  explicit RayHead(const fs::path& dir)
      : dashboard_port_(FreePort()), process_(Options(dir, dashboard_port_)) {
    httplib::Client c("127.0.0.1", dashboard_port_);
    for (int i = 0; i < 400; ++i) {
      auto r = c.Get("/api/gcs_healthz");
      if (r && r->body == "success") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  int Stop() { return process_.Stop(); }
  int dashboard_port() const { return dashboard_port_; }

 private:
  static starforge::support::ProcessOptions Options(const fs::path& dir, int dashboard_port) {
    starforge::support::ProcessOptions o;
    o.argv = {(kSourceDir / "tools/kubesim/ray/bin/ray").string(),
              "start",
              "--head",
              "--port=" + std::to_string(FreePort()),
              "--dashboard-host=0.0.0.0",
              "--dashboard-port=" + std::to_string(dashboard_port),
              "--dashboard-agent-listen-port=" + std::to_string(FreePort()),
              "--num-cpus=1",
              "--block"};
    o.env = CleanEnv({"RAY_TMPDIR=" + dir.string()});
    o.stdout_file = o.stderr_file = dir / "head.out";
    return o;
  }

  int dashboard_port_;
  starforge::support::Process process_;
};

TEST(RayEmulator, JobsApiThroughTheServiceProxy) {
  const starforge::support::TempDir dir("kubesim-ray-emulator");
  {
    Kubesim k;
    RayHead head(dir.path());
    auto c = k.Client();
    const std::string svcs = "/api/v1/namespaces/default/services";
    json svc = {{"apiVersion", "v1"},
                {"kind", "Service"},
                {"metadata",
                 {{"name", "rayjob-sample-head-svc"},
                  {"annotations",
                   {{"kubesim.starforge.dev/proxy-target",
                     "dashboard=127.0.0.1:" + std::to_string(head.dashboard_port())}}}}},
                {"spec", {{"ports", json::array({{{"name", "dashboard"}, {"port", 8265}}})}}}};
    auto r = c.Post(svcs, svc.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 201) << r->body;
    const std::string api = svcs + "/rayjob-sample-head-svc:dashboard/proxy/api";

    r = c.Get(api + "/version");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["version"], "4");

    // HTTPMode's submission (KubeRay's ConvertRayJobToReq body).
    const json req = {{"entrypoint", "python3 -c 'print(42)'"},
                      {"submission_id", "rayjob-sample-b9qzt"},
                      {"runtime_env", {{"env_vars", {{"counter_name", "test_counter"}}}}}};
    r = c.Post(api + "/jobs/", req.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["submission_id"], "rayjob-sample-b9qzt");

    // The proxy does not upgrade connections: /logs/tail streams as chunked text until the end.
    std::string streamed;
    r = c.Get(api + "/jobs/rayjob-sample-b9qzt/logs/tail", [&](const char* data, size_t n) {
      streamed.append(data, n);
      return true;
    });
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(streamed.find("Running entrypoint for job rayjob-sample-b9qzt: python3 -c "
                            "'print(42)'\n42\n"),
              std::string::npos)
        << streamed;

    r = c.Get(api + "/jobs/rayjob-sample-b9qzt");
    ASSERT_TRUE(r);
    json info = json::parse(r->body);
    EXPECT_EQ(info["status"], "SUCCEEDED");
    EXPECT_EQ(info["message"], "Job finished successfully.");
    EXPECT_EQ(info["driver_exit_code"], 0);
    EXPECT_EQ(info["type"], "SUBMISSION");

    r = c.Get(api + "/jobs/rayjob-sample-b9qzt/logs");
    ASSERT_TRUE(r);
    EXPECT_EQ(json::parse(r->body)["logs"], streamed);

    // KubeRay's duplicate detection: status 500 and Ray's sentence in the body.
    r = c.Post(api + "/jobs/", req.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500);
    EXPECT_NE(r->body.find("Please use a different submission_id"), std::string::npos) << r->body;

    r = c.Get(api + "/jobs/nope");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(r->body, "Job nope does not exist");

    // Ray's `ray start --block` exits 1 on SIGTERM (its node shutdown hook).
    EXPECT_EQ(head.Stop(), 1);
  }
}

}  // namespace
