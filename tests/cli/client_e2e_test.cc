// The `forge` client against the real `forge serve` (store, controller, local fleet, REST API):
// what a user does after `scripts/up` — log in, submit the example and follow it to Succeeded,
// a failing job, cancel, get/describe/logs/capacity — with the exit codes scripts rely on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <regex>

#include "../api/api_test_support.h"
#include "support/forge.h"

namespace starforge::cli {
namespace {

namespace fs = std::filesystem;
using api::testing::ServeProcess;
using nlohmann::json;
using support::Quote;
using support::TempDir;
using support::WriteFile;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kExamples = std::string(STARFORGE_SOURCE_DIR) + "/examples";

using Result = support::Captured;

class ClientE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    std::string error;
    server_ = ServeProcess::Start(root_->path() / "storage", {},
                                  {"--resync-ms", "200", "--cancel-grace-s", "1"}, &error)
                  .release();
    ASSERT_NE(server_, nullptr) << error;
    std::smatch m;
    const std::string out = server_->Stdout();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("admin token[^:]*: (sf_[a-z0-9]+)"))) << out;
    token_ = m[1];
    url_ = "http://127.0.0.1:" + std::to_string(server_->port());
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      const int code = server_->Stop();
      EXPECT_EQ(code, 0) << server_->Stderr();
      EXPECT_THAT(server_->Stderr(), Not(HasSubstr(token_))) << "the token is not in the log";
    }
    delete server_;
    delete root_;
    server_ = nullptr;
    root_ = nullptr;
  }

  // `forge <args>` in the test's home directory with only PATH, HOME and `env`.
  Result Forge(const std::string& args, const std::string& env, const std::string& input = "") {
    Result r = support::RunForge(args, "HOME=" + Quote(home.path().string()) + " " + env,
                                 home.path(), input);
    EXPECT_THAT(r.out + r.err, Not(HasSubstr(token_))) << "forge " << args;
    return r;
  }
  Result Forge(const std::string& args) { return Forge(args, LoggedIn()); }
  static std::string LoggedIn() { return "FORGE_SERVER=" + url_ + " FORGE_TOKEN=" + token_; }

  // A code directory `name` with `files` and a job.yaml running `entrypoint` (code: .).
  std::string Job(const std::string& name, const std::string& entrypoint,
                  const std::map<std::string, std::string>& files) {
    for (const auto& [path, text] : files)
      WriteFile(home.path() / name / path, text);
    WriteFile(home.path() / name / "job.yaml",
              "name: " + name + "\nimage: python:3.11-slim\nentrypoint: " + entrypoint +
                  "\ncode: .\npools: [{name: main, cpusPerMachine: 1}]\n");
    return name + "/job.yaml";
  }

  json GetJob(const std::string& id) {
    const Result r = Forge("get job " + id + " -o json");
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }
  // Polls until the job's phase is `phase` (10 s at most).
  bool WaitForPhase(const std::string& id, const std::string& phase) {
    for (int i = 0; i < 100; ++i) {
      const json job = GetJob(id);
      if (job.is_object() && job.value("phase", "") == phase) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  static std::string IdOf(const std::string& out) {
    std::smatch m;
    return std::regex_search(out, m, std::regex("job/(j-[a-z0-9]+)")) ? m[1].str() : "";
  }

  TempDir home;
  static TempDir* root_;
  static ServeProcess* server_;
  static std::string token_;
  static std::string url_;
};

TempDir* ClientE2e::root_ = nullptr;
ServeProcess* ClientE2e::server_ = nullptr;
std::string ClientE2e::token_;
std::string ClientE2e::url_;

std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  const std::regex re("(^|\n)step [0-9]+ loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it)
    losses.push_back(std::stod((*it)[2]));
  return losses;
}

TEST_F(ClientE2e, LoginThenTheExampleRunsToSucceededAndEveryViewShowsIt) {
  Result r = Forge("login --server " + url_ + " --token-stdin", "", token_ + "\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("logged in to " + url_ + " as admin (admin)"));

  // From here on, the saved login: no FORGE_SERVER, no FORGE_TOKEN.
  r = Forge("submit " + kExamples + "/tiny-train/job.yaml --follow", "");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string id = IdOf(r.out);
  ASSERT_FALSE(id.empty()) << r.out;
  EXPECT_THAT(r.out, ContainsRegex("^job/j-[a-z0-9]+ submitted\ntiny-train: "));
  const std::vector<double> losses = Losses(r.out);
  ASSERT_EQ(losses.size(), 21u) << r.out;
  EXPECT_LT(losses.back(), losses.front() / 4);
  EXPECT_THAT(
      r.out,
      HasSubstr(
          "checkpoint written to " +
          (root_->path() / "storage/jobs" / id / "checkpoints/tiny-train-step200.json").string()));
  EXPECT_THAT(r.err, HasSubstr("uploaded " + kExamples + "/tiny-train/: 3 files"));
  EXPECT_THAT(r.err, ContainsRegex("\njob/" + id + " Succeeded \\(Completed\\)(: [^\n]*)?\n$"));

  r = Forge("get jobs", "");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("^ID +NAME +PHASE +REASON +AGE\n"));
  EXPECT_THAT(r.out, ContainsRegex(id + " +tiny-train +Succeeded +Completed +[0-9]+s\n"));
  r = Forge("get jobs -o wide", "");
  EXPECT_THAT(r.out,
              ContainsRegex(id + " +tiny-train +Succeeded +Completed +[0-9]+s +local +admin +"
                                 "[0-9a-f]{12} +[^\n]*\n"));
  // --name-contains: a part of the name, in any case (the API's nameContains).
  r = Forge("get jobs --name-contains INY-TR -o name", "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("job/" + id + "\n"));
  r = Forge("get jobs --name-contains iny-tr -o json", "");
  const json found = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(found.is_object()) << r.out;
  ASSERT_FALSE(found["items"].empty());
  for (const json& job : found["items"])
    EXPECT_THAT(job["name"].get<std::string>(), HasSubstr("tiny-tr"));
  r = Forge("get jobs --name-contains no-job-is-called-this", "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "No jobs found.\n");

  // The last value of each series tiny-train wrote to metrics.jsonl: the log's final loss.
  r = Forge("metrics " + id, "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, ContainsRegex("^SERIES +STEP +LAST +POINTS\nloss +200 +[0-9.e-]+ +21\n"
                                   "accuracy +200 +[0-9.e-]+ +21\n$"));
  std::smatch last;
  ASSERT_TRUE(std::regex_search(r.out, last, std::regex("\nloss +200 +([0-9.e-]+)")));
  const std::string last_loss = last[1];
  EXPECT_NEAR(std::stod(last_loss), losses.back(), 1e-3 * losses.back()) << r.out;
  // --follow of an ended job: every series' newest point, then the end.
  r = Forge("metrics " + id + " --follow", "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("200\tloss\t" + last_loss + "\n"));

  r = Forge("logs " + id, "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("step 200 loss"));
  r = Forge("logs " + id + " --tail 2", "");
  EXPECT_THAT(r.out, ContainsRegex("^final loss [0-9.]+ accuracy [0-9.]+ \\([0-9.]+ s\\)\n"
                                   "checkpoint written to [^\n]+\n$"));

  // Cleanup (logs archived, released) follows the terminal phase.
  json job;
  for (int i = 0; i < 100; ++i) {
    job = GetJob(id);
    if (job["cleanup"]["released"] == true) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(job["cleanup"], json({{"logsArchived", true}, {"released", true}}));
  EXPECT_EQ(job["exitCode"], 0);

  r = Forge("describe job " + id, "");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("Name:         tiny-train\n"),
                           HasSubstr("Phase:        Succeeded\n"), HasSubstr("Exit Code:    0\n"),
                           HasSubstr("Cleanup:      logs archived: yes, released: yes\n"),
                           HasSubstr("  Entrypoint:   python3 train.py --steps 200\n"),
                           HasSubstr("Timeline:\n"), HasSubstr("Events:")));
  for (const char* phase : {"Queued", "Packaging", "Submitting", "Pending", "Running"})
    EXPECT_THAT(r.out, HasSubstr(phase)) << r.out;
}

TEST_F(ClientE2e, AFailingJobFollowedExitsOneWithItsReason) {
  const std::string job =
      Job("fails", "python3 fail.py",
          {{"fail.py", "print('about to fail', flush=True)\nraise SystemExit(3)\n"}});
  Result r = Forge("submit " + job + " --follow");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nabout to fail\n"));
  EXPECT_THAT(r.err, ContainsRegex("job/j-[a-z0-9]+ Failed \\(AppFailed\\)"));
  const json got = GetJob(IdOf(r.out));
  EXPECT_EQ(got["exitCode"], 3);
  // It wrote no metrics: said, not an empty table.
  r = Forge("metrics " + IdOf(r.out));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("has written no metrics (yet)"));
}

TEST_F(ClientE2e, CancelStopsAFollowedJobWhichThenExitsTwo) {
  const std::string job =
      Job("sleeper", "python3 sleep.py",
          {{"sleep.py",
            "import time\nfor i in range(600):\n    print('tick', i, flush=True)\n"
            "    time.sleep(0.1)\n"}});
  Result submitted = Forge("submit " + job + " -o name");
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  const std::string id = IdOf(submitted.out);
  ASSERT_TRUE(WaitForPhase(id, "Running"));

  // A second user's view of it: `forge logs -f` in another process, until the job ends.
  TempDir other;
  auto follower = std::async(std::launch::async, [&] {
    return support::RunForge("logs " + id + " -f",
                             "HOME=" + Quote(other.path().string()) + " " + LoggedIn());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Result r = Forge("cancel " + id);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "job/" + id + " cancel requested\n");
  ASSERT_EQ(follower.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const Result logs = follower.get();
  EXPECT_EQ(logs.code, 0) << logs.err;
  EXPECT_THAT(logs.out, HasSubstr("tick 1\n"));
  EXPECT_EQ(GetJob(id)["phase"], "Cancelled");
  r = Forge("cancel " + id);
  EXPECT_EQ(r.out, "job/" + id + " already Cancelled; nothing to cancel\n");

  // `submit --follow` of a job someone cancels exits 2.
  auto followed = std::async(std::launch::async, [&] { return Forge("submit " + job + " -f"); });
  std::string second;
  for (int i = 0; i < 100 && second.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const json list = json::parse(Forge("get jobs --phase Running -o json").out, nullptr, false);
    if (list.is_object() && !list["items"].empty()) second = list["items"][0]["id"];
  }
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(Forge("cancel " + second).code, 0);
  ASSERT_EQ(followed.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const Result f = followed.get();
  EXPECT_EQ(f.code, 2) << f.err;
  EXPECT_THAT(f.err, HasSubstr("job/" + second + " Cancelled (CancelledByUser)"));
}

TEST_F(ClientE2e, AJobTheLocalFleetCanNeverRunIsRefusedWithTheFieldAtFault) {
  WriteFile(home.path() / "big/train.py", "print(1)\n");
  WriteFile(home.path() / "big/job.yaml",
            "name: big\nimage: x\nentrypoint: python3 train.py\ncode: .\n"
            "pools: [{name: main, machines: 2}]\n");
  Result r = Forge("submit big/job.yaml");
  EXPECT_EQ(r.code, 1);
  // The error is the last line (a first submit uploads while building: no "uploading" line).
  EXPECT_THAT(r.err, ContainsRegex("(^|\n)forge: pools[^:]*: [^\n]+\n$")) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(ClientE2e, CapacityNotFoundAndBadTokens) {
  Result r = Forge("capacity");
  ASSERT_EQ(r.code, 0) << r.err;
  // kuberay is listed as unavailable (no cluster or S3 configured here), then local.
  EXPECT_THAT(r.out, ContainsRegex("^FLEET +[^\n]+\nkuberay +[^\n]+\nlocal +"));
  EXPECT_EQ(json::parse(Forge("capacity -o json").out)["fleets"][1]["fleet"], "local");

  r = Forge("metrics j-nope000000");
  EXPECT_EQ(r.code, 4);
  EXPECT_THAT(r.err, HasSubstr("j-nope000000"));
  r = Forge("describe job j-nope000000");
  EXPECT_EQ(r.code, 4);
  EXPECT_THAT(r.err, HasSubstr("forge: "));
  EXPECT_THAT(r.err, HasSubstr("j-nope000000"));

  r = Forge("get jobs", "FORGE_SERVER=" + url_ + " FORGE_TOKEN=sf_" + std::string(40, 'x'));
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(r.err, "forge: token rejected by " + url_ + ": run `forge login`\n");
  r = Forge("get jobs", "FORGE_SERVER=" + url_);
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(r.err,
            "forge: not logged in to " + url_ + ": run `forge login` (or set FORGE_TOKEN)\n");
  r = Forge("login --server " + url_, "", "sf_" + std::string(40, 'y') + "\n");
  EXPECT_EQ(r.code, 5);
  EXPECT_THAT(r.err, HasSubstr("rejected this token"));
  EXPECT_THAT(r.err, Not(HasSubstr(std::string(40, 'y'))));
}

TEST_F(ClientE2e, ConsolePrintsTheWebConsoleUrlWithoutTheToken) {
  Result r = Forge("console");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, url_ + "/\n");
  EXPECT_THAT(r.err, HasSubstr("sign in with your API token"));
  r = Forge("console --server " + url_ + "/");
  EXPECT_EQ(r.out, url_ + "/\n");
  r = Forge("console --server ftp://x");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace starforge::cli
