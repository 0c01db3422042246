// The Ray control-plane emulator (tools/kubesim/ray) behind kubesim's service proxy: the Jobs API
// of a real `ray start --head --block` process reached the way KubeRay's HTTPMode and StarForge
// reach it, through /api/v1/namespaces/{ns}/services/{head-svc}:dashboard/proxy/... The
// emulator's own behaviour is covered by the Python tests (kubesim.ray_unittest).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

extern char** environ;

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kSourceDir = fs::path(KUBESIM_TESTDATA).parent_path().parent_path().parent_path();

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  close(fd);
  return ntohs(a.sin_port);
}

pid_t Spawn(std::vector<std::string> args, const std::vector<std::string>& env_overrides,
            const fs::path& out) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("RAY_", 0) == 0 || kv.rfind("KUBESIM_POD_IP=", 0) == 0) continue;
    env.push_back(kv);
  }
  env.insert(env.end(), env_overrides.begin(), env_overrides.end());
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = fopen(out.c_str(), "w");
    if (f != nullptr) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> argv, envp;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

class Kubesim {
 public:
  explicit Kubesim(const fs::path& dir) {
    const std::string port_file = (dir / "kubesim.port").string();
    pid_ = Spawn({KUBESIM_BIN, "--listen", "127.0.0.1:0", "--port-file", port_file}, {},
                 dir / "kubesim.out");
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::ifstream in(port_file);
      if (in >> port_) break;
      port_ = 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Kubesim() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

class RayHead {
 public:
  explicit RayHead(const fs::path& dir) : dashboard_port_(FreePort()) {
    const std::string ray = (kSourceDir / "tools/kubesim/ray/bin/ray").string();
    pid_ = Spawn(
        {ray, "start", "--head", "--port=" + std::to_string(FreePort()), "--dashboard-host=0.0.0.0",
         "--dashboard-port=" + std::to_string(dashboard_port_),
         "--dashboard-agent-listen-port=" + std::to_string(FreePort()), "--num-cpus=1", "--block"},
        {"RAY_TMPDIR=" + dir.string()}, dir / "head.out");
    httplib::Client c("127.0.0.1", dashboard_port_);
    for (int i = 0; i < 400; ++i) {
      auto r = c.Get("/api/gcs_healthz");
      if (r && r->body == "success") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~RayHead() {
    if (pid_ > 0) Stop();
  }
  int Stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int dashboard_port() const { return dashboard_port_; }

 private:
  pid_t pid_ = -1;
  int dashboard_port_;
};

TEST(RayEmulator, JobsApiThroughTheServiceProxy) {
  const fs::path dir =
      fs::temp_directory_path() / ("kubesim-ray-emulator-" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    Kubesim k(dir);
    RayHead head(dir);
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
    EXPECT_EQ(json::parse(r->body)["version"], "2");

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
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
