// The `forge` client commands as a user runs them (the real binary, its exit codes and streams)
// against FakeApi, a loopback server that speaks the REST contract and lets each test decide
// the answers: paging, error bodies, dropped log streams, job outcomes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <thread>

#include "fake_api.h"
#include "starforge/capsule/extract.h"
#include "starforge/capsule/inspect.h"
#include "starforge/common/sha256.h"
#include "support/files.h"
#include "support/forge.h"
#include "support/net.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace starforge::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using support::ReadFile;
using support::TempDir;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using testing::FakeApi;
using testing::FakeRequest;
using ::testing::HasSubstr;
using ::testing::Not;

using Result = support::Captured;

const std::string kExamples = std::string(STARFORGE_SOURCE_DIR) + "/examples";

class ClientFake : public ::testing::Test {
 protected:
  // Runs `forge <args>` in the temporary home with only PATH, HOME and `env` set.
  Result Forge(const std::string& args, const std::string& env, const std::string& input = "") {
    const std::string home_env = "HOME=" + support::Quote(home.path().string()) + " ";
    Result r = support::RunForge(args, home_env + env, home.path(), input);
    // Whatever happened, the token is never shown.
    EXPECT_THAT(r.out, Not(HasSubstr(FakeApi::kToken))) << args;
    EXPECT_THAT(r.err, Not(HasSubstr(FakeApi::kToken))) << args;
    return r;
  }
  Result Forge(const std::string& args) { return Forge(args, LoggedIn()); }
  std::string LoggedIn() const {
    return "FORGE_SERVER=" + api.url() + " FORGE_TOKEN=" + FakeApi::kToken;
  }
  // Copies examples/tiny-train to <home>/proj and returns the JobSpec's path there.
  std::string TinyTrain() {
    fs::copy(kExamples + "/tiny-train", home.path() / "proj", fs::copy_options::recursive);
    return (home.path() / "proj/job.yaml").string();
  }
  // `what` in forge submit's cache for the proj/ directory (one directory per code directory).
  fs::path Cached(const std::string& what) {
    const fs::path root = home.path() / ".cache/starforge/submit";
    if (!fs::exists(root)) return root / "none" / what;
    fs::directory_iterator it(root);
    return it == fs::directory_iterator() ? root / "none" / what : it->path() / what;
  }
  std::vector<FakeRequest> Requests(const std::string& prefix) {
    std::vector<FakeRequest> out;
    for (auto& r : api.requests()) {
      if (r.path.rfind(prefix, 0) == 0) out.push_back(r);
    }
    return out;
  }

  TempDir home;
  FakeApi api;
};

TEST_F(ClientFake, LoginVerifiesTheTokenAndSavesItPrivately) {
  Result r = Forge("login --server " + api.url() + " --token-stdin", "",
                   std::string(FakeApi::kToken) + "\n");
  ASSERT_EQ(r.code, 0) << r.err;
  const fs::path config = home.path() / ".config/starforge/config.json";
  EXPECT_EQ(r.out,
            "logged in to " + api.url() + " as admin (admin); saved to " + config.string() + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(config.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(config.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const json saved = json::parse(ReadFile(config));
  EXPECT_EQ(saved["server"], api.url());
  EXPECT_EQ(saved["token"], FakeApi::kToken);
  ASSERT_EQ(Requests("/api/v1/whoami").size(), 1u);

  // Later commands need neither FORGE_SERVER nor FORGE_TOKEN.
  api.AddJob("a", "Running");
  r = Forge("get jobs", "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("j-0000000001   a      Running"));
}

TEST_F(ClientFake, LoginHonoursXdgConfigHome) {
  Result r = Forge("login --token-stdin",
                   "FORGE_SERVER=" + api.url() + " XDG_CONFIG_HOME=" + (home / "xdg").string(),
                   FakeApi::kToken);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(home.path() / "xdg/starforge/config.json"));
  EXPECT_FALSE(fs::exists(home.path() / ".config"));
}

TEST_F(ClientFake, LoginWithARejectedTokenSavesNothing) {
  Result r = Forge("login --server " + api.url(), "", "sf_wrongwrongwrong\n");
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(r.err, "forge: the server at " + api.url() +
                       " rejected this token: check it (the admin token is printed once by the "
                       "first `forge serve`; `forge token create --user NAME` makes more)\n");
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("sf_wrongwrongwrong")));
  EXPECT_FALSE(fs::exists(home.path() / ".config/starforge/config.json"));

  r = Forge("login --server " + api.url(), "", "");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("forge: no token given"));
}

TEST_F(ClientFake, AnUnreachableServerSaysWhatToDo) {
  const std::string url = "http://127.0.0.1:" + std::to_string(support::FreePort());
  for (const std::string args : {"get jobs", "describe job j-1", "logs j-1 -f", "capacity"}) {
    Result r = Forge(args, "FORGE_SERVER=" + url + " FORGE_TOKEN=" + FakeApi::kToken);
    EXPECT_EQ(r.code, 5) << args;
    EXPECT_EQ(r.err, "forge: cannot reach the StarForge server at " + url +
                         ": connection refused — is `forge serve` running? set FORGE_SERVER or "
                         "run `forge login`\n")
        << args;
  }
  Result r = Forge("submit " + TinyTrain(), "FORGE_SERVER=" + url);
  EXPECT_EQ(r.code, 5);
  EXPECT_THAT(r.err, HasSubstr("cannot reach the StarForge server"));
  EXPECT_THAT(r.err, Not(HasSubstr("uploading"))) << "it stops before zipping anything";
}

TEST_F(ClientFake, MissingOrRejectedTokensSayRunForgeLogin) {
  Result r = Forge("get jobs", "FORGE_SERVER=" + api.url());
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(r.err,
            "forge: not logged in to " + api.url() + ": run `forge login` (or set FORGE_TOKEN)\n");
  r = Forge("get jobs", "FORGE_SERVER=" + api.url() + " FORGE_TOKEN=sf_notthisonenotthisone");
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(r.err, "forge: token rejected by " + api.url() + ": run `forge login`\n");
  EXPECT_THAT(r.err, Not(HasSubstr("sf_notthisone")));
}

// A client warns about a misspelt FORGE_* name (a FORGE_TOKN would otherwise just be "not logged
// in"), not about the server's settings that happen to be in the same shell (e.g. after
// `source` of setup-kind.sh's file).
TEST_F(ClientFake, ClientsWarnAboutMisspeltNamesNotServerSettings) {
  const std::string env = LoggedIn() + " FORGE_TOKN=x FORGE_K8S_GPU_PASSTHROUGH=0";
  for (const std::string& args : std::vector<std::string>{"get jobs", "submit " + TinyTrain()}) {
    Result r = Forge(args, env);
    EXPECT_EQ(r.code, 0) << args << r.err;
    EXPECT_THAT(r.err, HasSubstr("forge: warning: FORGE_TOKN is not a StarForge setting (did you "
                                 "mean \"FORGE_TOKEN\"?)"))
        << args;
    EXPECT_THAT(r.err, Not(HasSubstr("GPU_PASSTHROUGH"))) << args;
  }
  Result r = Forge("config", "FORGE_K8S_GPU_PASSTHROUGH=0");
  EXPECT_THAT(r.err, HasSubstr("FORGE_K8S_GPU_PASSTHROUGH is off")) << "forge config still says it";
}

TEST_F(ClientFake, ASavedTokenIsNeverSentToAnotherServer) {
  ASSERT_EQ(Forge("login --server " + api.url(), "", FakeApi::kToken).code, 0);
  FakeApi other;
  Result r = Forge("get jobs --server " + other.url(), "");
  EXPECT_EQ(r.code, 5);
  EXPECT_THAT(r.err, HasSubstr("not logged in to " + other.url()));
  ASSERT_FALSE(other.requests().empty());
  for (const auto& req : other.requests())
    EXPECT_EQ(req.authorization, "");
}

TEST_F(ClientFake, SubmitSendsTheJobSpecTextAndTheCodeAsACapsule) {
  const std::string job = TinyTrain();
  std::ofstream(home / "proj/run.sh") << "#!/bin/sh\nexec python3 train.py\n";
  ::chmod((home / "proj/run.sh").string().c_str(), 0755);
  fs::create_directories(home.path() / "proj/checkpoints");
  std::ofstream(home / "proj/checkpoints/old.json") << "{}";

  Result r = Forge("submit proj/job.yaml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "job/j-0000000001 submitted\n");
  // A first submit: nothing to borrow from, so the capsule is uploaded while it is built.
  EXPECT_THAT(r.err, ContainsRegex("^uploaded proj/: 4 files, [0-9.]+ KiB \\(capsule "
                                   "sha256-[0-9a-f]{12}, [0-9.]+ KiB, sent while it was "
                                   "built\\)\n$"));
  EXPECT_EQ(api.last_spec(), ReadFile(job)) << "the server parses the user's own text";
  const std::string sha = Sha256Hex(api.last_code());
  EXPECT_EQ(api.last_code_filename(), "capsule.zip");
  EXPECT_THAT(r.err, HasSubstr("(capsule sha256-" + sha.substr(0, 12) + ", "))
      << "what went is what was built";

  std::ofstream(home / "got.zip", std::ios::binary) << api.last_code();
  const capsule::InspectResult inspected = capsule::Inspect(home.path() / "got.zip");
  ASSERT_TRUE(inspected.ok()) << inspected.problems.front();
  const auto x = capsule::ExtractZip(home.path() / "got.zip", home.path() / "got");
  ASSERT_TRUE(x.ok()) << x.errors.front();
  EXPECT_EQ(x.files, 4u + 3u);  // and StarForge's three
  EXPECT_EQ(ReadFile(home / "got/train.py"), ReadFile(kExamples + "/tiny-train/train.py"));
  EXPECT_FALSE(fs::exists(home.path() / "got/checkpoints")) << ".forgeignore applies";
  // Kept for the next submit in the user's cache, not in the code directory.
  EXPECT_FALSE(fs::exists(home.path() / "proj/.forge"));
  const fs::path capsules = Cached("capsules");
  EXPECT_TRUE(fs::exists(capsules / ("sha256-" + sha + ".zip")));

  // The same tree again: the server has that capsule, so only its digest goes.
  r = Forge("submit proj/job.yaml -o name");
  EXPECT_EQ(r.out, "job/j-0000000002\n");
  EXPECT_EQ(r.err, "capsule sha256-" + sha.substr(0, 12) +
                       " is already on the server: nothing uploaded\n");
  EXPECT_EQ(api.last_ref(), sha);
  // A change: built again (reusing the unchanged entries) and sent.
  std::ofstream(home / "proj/extra.py") << "print('more')\n";
  r = Forge("submit proj/job.yaml -o json --code proj");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["id"], "j-0000000003");
  EXPECT_THAT(r.err, HasSubstr("; 4 entries reused from the last build)"));
  EXPECT_EQ(api.last_ref(), "");
  // Only the newest capsule is kept.
  EXPECT_FALSE(fs::exists(capsules / ("sha256-" + sha + ".zip")));
  // From standard input, the code directory is relative to the working directory.
  r = Forge("submit - --code proj", LoggedIn(), ReadFile(job));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(api.last_spec(), ReadFile(job));
}

TEST_F(ClientFake, AnUnchangedResubmitReadsNoFileAndSendsOnlyTheDigest) {
  TinyTrain();
  // The digest cache trusts file times only once they are older than the clock's granularity.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  Result r = Forge("submit proj/job.yaml");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string sha = Sha256Hex(api.last_code());
  // The capsule is gone; an unchanged tree does not need it: the digest cache answers.
  std::vector<fs::path> built;
  for (const auto& e : fs::directory_iterator(Cached("capsules")))
    built.push_back(e.path());
  ASSERT_EQ(built.size(), 1u);
  fs::remove(built[0]);
  const size_t before = api.requests().size();
  r = Forge("submit proj/job.yaml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("nothing uploaded"));
  EXPECT_EQ(api.last_ref(), sha);
  EXPECT_TRUE(fs::is_empty(Cached("capsules"))) << "nothing was built";
  // One request: the POST naming the capsule (no whoami, no GET of the capsule first).
  const std::vector<FakeRequest> all = api.requests();
  ASSERT_EQ(all.size(), before + 1);
  EXPECT_EQ(all.back().method, "POST");
  EXPECT_EQ(all.back().path, "/api/v1/jobs");

  // The server no longer has it (409): built again and sent, as for a new tree.
  api.ForgetCapsules();
  r = Forge("submit proj/job.yaml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("nothing uploaded")));
  EXPECT_EQ(api.last_ref(), "");
  EXPECT_EQ(Sha256Hex(api.last_code()), sha);
}

TEST_F(ClientFake, SubmitChecksTheJobSpecAndCodeBeforeAnyRequest) {
  std::ofstream(home / "bad.yaml") << "name: Bad_Name\nimage: x\nentrypoint: [python]\n"
                                      "pools: [{name: a, gpusPerMachine: -1}]\ncode: .\n";
  Result r = Forge("submit bad.yaml");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("bad.yaml: pools[0].gpusPerMachine: must be ≥ 0, got -1"));
  std::ofstream(home / "nocode.yaml") << "name: ok\nimage: x\nentrypoint: [python]\n"
                                         "pools: [{name: a}]\n";
  r = Forge("submit nocode.yaml");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "forge: no code directory: pass --code DIR or set code: in the JobSpec\n");
  r = Forge("submit nocode.yaml --code nowhere");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "forge: code directory nowhere (from --code) does not exist\n");
  EXPECT_TRUE(api.requests().empty());
}

TEST_F(ClientFake, SubmitPrintsTheServersErrorWithEveryField) {
  TinyTrain();
  api.RefuseSubmissions(
      422, {{"error", "Invalid"},
            {"message", "the JobSpec is invalid"},
            {"errors",
             {{{"field", "pools[0].cpusPerMachine"}, {"message", "more than this machine has (2)"}},
              {{"field", "image"}, {"message", "required"}}}}});
  Result r = Forge("submit proj/job.yaml");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("forge: the JobSpec is invalid\n"
                               "  pools[0].cpusPerMachine: more than this machine has (2)\n"
                               "  image: required\n"));
  api.RefuseSubmissions(413, {{"error", "PayloadTooLarge"},
                              {"message", "the upload is over FORGE_CAPSULE_MAX_BYTES (1 KiB)"}});
  r = Forge("submit proj/job.yaml");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("forge: the upload is over FORGE_CAPSULE_MAX_BYTES (1 KiB)\n"));
}

TEST_F(ClientFake, SubmitFollowStreamsTheLogAndExitsWithTheOutcome) {
  TinyTrain();
  struct Case {
    const char* phase;
    const char* reason;
    int exit_code;
    int forge_exit;
    std::string final_line;
  };
  const std::vector<Case> cases = {
      {"Succeeded", "Completed", 0, 0, " Succeeded \\(Completed\\)\n"},
      {"Failed", "AppFailed", 3, 1, " Failed \\(AppFailed\\): the entrypoint exited with code 3\n"},
      {"Cancelled", "CancelledByUser", 143, 2, " Cancelled \\(CancelledByUser\\)\n"},
  };
  for (const Case& c : cases) {
    api.on_submit = [&](const std::string& id) {
      api.Play(id, {"step 0 loss 0.77", "", "step 10 loss 0.31"}, c.phase, c.reason, c.exit_code);
    };
    Result r = Forge("submit proj/job.yaml --follow");
    EXPECT_EQ(r.code, c.forge_exit) << c.phase << "\n" << r.err;
    EXPECT_THAT(r.out, ContainsRegex("^job/j-[0-9]+ submitted\nstep 0 loss 0.77\n\nstep 10 "
                                     "loss 0.31\n$"))
        << c.phase;
    EXPECT_THAT(r.err, ContainsRegex("\njob/j-[0-9]+" + c.final_line + "$")) << c.phase;
  }
}

TEST_F(ClientFake, AFollowedLogResumesAfterADroppedConnectionWithoutRepeats) {
  const std::string id = api.AddJob("j", "Running");
  api.DropNextStream();
  std::vector<std::string> lines;
  for (int i = 0; i < 8; ++i)
    lines.push_back("line " + std::to_string(i));
  api.Play(id, lines, "Succeeded", "Completed", 0);
  Result r = Forge("logs " + id + " -f");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string expected;
  for (const auto& l : lines)
    expected += l + "\n";
  EXPECT_EQ(r.out, expected);
  EXPECT_THAT(r.err, HasSubstr("; resuming the log stream"));
  const auto streams = Requests("/api/v1/jobs/" + id + "/logs?follow=1");
  ASSERT_GE(streams.size(), 2u);
  EXPECT_EQ(streams[0].last_event_id, "");
  // It resumes at the byte offset after the last line it printed.
  const size_t offset = std::stoul(streams[1].last_event_id);
  ASSERT_GT(offset, 0u);
  ASSERT_LT(offset, expected.size());
  EXPECT_EQ(expected[offset - 1], '\n');
}

TEST_F(ClientFake, LogsPrintsTailsAndFollowsFromWhereTheTailEnds) {
  const std::string id = api.AddJob("j", "Succeeded");
  api.SetLog(id, "a\nb\nc\n");
  EXPECT_EQ(Forge("logs " + id).out, "a\nb\nc\n");
  EXPECT_EQ(Forge("logs " + id + " --tail 2").out, "b\nc\n");
  Result r = Forge("logs " + id + " --tail 1 -f");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "c\n");
  const auto streams = Requests("/api/v1/jobs/" + id + "/logs?follow=1");
  ASSERT_EQ(streams.size(), 1u);
  EXPECT_EQ(streams[0].last_event_id, "6");
  r = Forge("logs j-nope");
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "forge: job j-nope not found\n");
}

// The fleet's archive by name (--ray, --submitter, --events, --file), the list of files, and a
// warning instead of silence when the driver log cannot reach the server.
TEST_F(ClientFake, LogsPrintsArchivedFilesAndSaysWhyTheDriverLogIsEmpty) {
  const std::string id = api.AddJob("kr", "Succeeded");
  api.SetFile(id, "ray-job.log", "ray says hi\n");
  api.SetFile(id, "submitter.log", "submitted\n");
  api.SetFile(id, "events.json", "[]\n");
  EXPECT_EQ(Forge("logs " + id + " --ray").out, "ray says hi\n");
  EXPECT_EQ(Forge("logs " + id + " --submitter").out, "submitted\n");
  EXPECT_EQ(Forge("logs " + id + " --events").out, "[]\n");
  EXPECT_EQ(Forge("logs " + id + " --file ray-job.log").out, "ray says hi\n");
  EXPECT_EQ(Requests("/api/v1/jobs/" + id + "/logs?file=ray-job.log").size(), 2u);
  Result r = Forge("logs " + id + " --list");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "driver.log\t0\nevents.json\t3\nray-job.log\t12\nsubmitter.log\t10\n");
  r = Forge("logs " + id + " --file rayjob.json");
  EXPECT_EQ(r.code, 4);
  EXPECT_THAT(r.err, HasSubstr("has no log file rayjob.json"));
  EXPECT_THAT(r.out, HasSubstr("ray-job.log")) << "the files it has";
  EXPECT_EQ(Forge("logs " + id + " --ray --events").code, 2);

  api.SetLogsWarning(id, "FORGE_K8S_STORAGE_PVC is not set on this server");
  r = Forge("logs " + id);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("warning: FORGE_K8S_STORAGE_PVC is not set"));
  r = Forge("describe job " + id);
  EXPECT_THAT(r.out,
              HasSubstr("Log files:    driver.log, events.json, ray-job.log, submitter.log"));
  EXPECT_THAT(r.out, HasSubstr("Warning:      FORGE_K8S_STORAGE_PVC is not set"));
}

TEST_F(ClientFake, GetJobsFollowsEveryPageAndShowsOnlyYourOwnByDefault) {
  for (int i = 1; i <= 5; ++i)
    api.AddJob("job-" + std::to_string(i), i % 2 ? "Running" : "Succeeded",
               i == 5 ? "bob" : "admin");
  Result r = Forge("get jobs");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ContainsRegex("^ID             NAME    PHASE       REASON   AGE\n"
                                   "j-0000000004   job-4   Succeeded   <none>   [0-9]+s\n"
                                   "j-0000000003   job-3   Running     <none>   [0-9]+"));
  EXPECT_THAT(r.out, Not(HasSubstr("job-5"))) << "bob's";
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5);
  const auto lists = Requests("/api/v1/jobs?");
  ASSERT_EQ(lists.size(), 2u) << "two pages of (at most) two";
  EXPECT_EQ(lists[0].path, "/api/v1/jobs?limit=500&owner=admin");
  EXPECT_THAT(lists[1].path, HasSubstr("&cursor="));

  r = Forge("get jobs --all-users -o name");
  EXPECT_EQ(r.out,
            "job/j-0000000005\njob/j-0000000004\njob/j-0000000003\njob/j-0000000002\n"
            "job/j-0000000001\n");
  r = Forge("get jobs -A -o json");
  EXPECT_EQ(json::parse(r.out)["items"].size(), 5u);
  r = Forge("get jobs -A --limit 3 -o name");
  EXPECT_EQ(r.out, "job/j-0000000005\njob/j-0000000004\njob/j-0000000003\n");
  r = Forge("get jobs --phase running -o wide");
  EXPECT_THAT(r.out,
              ContainsRegex("^ID             NAME    PHASE     REASON   AGE   FLEET   OWNER   "
                            "CAPSULE   MESSAGE\n"
                            "j-0000000003   job-3   Running   <none>   [0-9]+s +local   admin   "
                            "<none>    <none>\n"));
  EXPECT_THAT(r.out, HasSubstr("job-3   Running"));
  EXPECT_THAT(r.out, Not(HasSubstr("Succeeded")));
  EXPECT_THAT(api.requests().back().path, HasSubstr("phase=Running"));
  r = Forge("get jobs --phase Cancelled");
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "No jobs found.\n");
}

TEST_F(ClientFake, GetOneJobAndDescribeIt) {
  const std::string id = api.AddJob("one", "Failed");
  api.SetPhase(id, "Failed", "AppFailed", "the entrypoint exited with code 3");
  api.SetEvents(id, json::parse(R"([{"type":"Warning","reason":"BackOff","message":"again",
      "source":"controller","count":2,"firstAt":"2026-01-01T00:00:00.000Z",
      "lastAt":"2026-01-01T00:00:00.000Z"}])"));
  Result r = Forge("get job " + id);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(id + "   one    Failed   AppFailed"));
  r = Forge("get job " + id + " -o yaml");
  EXPECT_THAT(r.out, HasSubstr("timeline:"));
  r = Forge("get job j-nope");
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.err, "forge: job j-nope not found\n");

  r = Forge("describe job " + id);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("Name:         one\n"), HasSubstr("Phase:        Failed\n"),
                           HasSubstr("Message:      the entrypoint exited with code 3\n"),
                           HasSubstr("Timeline:\n"), HasSubstr("Warning   BackOff   controller")));
  EXPECT_EQ(r.out.find('\033'), std::string::npos) << "no colour into a file";
  EXPECT_EQ(Forge("describe job j-nope").code, 4);
}

TEST_F(ClientFake, CancelSaysWhatHappened) {
  const std::string running = api.AddJob("r", "Running");
  const std::string done = api.AddJob("d", "Succeeded");
  Result r = Forge("cancel " + running);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "job/" + running + " cancel requested\n");
  r = Forge("cancel " + done);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "job/" + done + " already Succeeded; nothing to cancel\n");
  EXPECT_EQ(Forge("cancel j-nope").code, 4);
}

TEST_F(ClientFake, CapacityAsATableOrJson) {
  Result r = Forge("capacity");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "FLEET   CPUS.TOTAL   CPUS.USED   RUNNING\nlocal   8            1           1\n");
  r = Forge("capacity -o json");
  EXPECT_EQ(json::parse(r.out)["fleets"][0]["fleet"], "local");
}

TEST_F(ClientFake, WatchPrintsRowsAsTheyChange) {
  const std::string id = api.AddJob("w", "Running");
  std::thread change([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    api.SetPhase(id, "Succeeded", "Completed", "");
  });
  Result r = Forge("get jobs --watch", "timeout -s INT 4 env " + LoggedIn());
  change.join();
  EXPECT_EQ(r.code, 124) << "runs until interrupted";
  EXPECT_THAT(r.out, ContainsRegex("^ID             NAME   PHASE     REASON   AGE\n" + id +
                                   "   w      Running   <none>   [0-9]+s\n" + id +
                                   "   w      Succeeded   Completed   [0-9]+s\n$"))
      << "later rows keep the first table's columns where they fit";
}

TEST_F(ClientFake, UsageErrorsExitTwo) {
  EXPECT_EQ(Forge("get").code, 2);
  EXPECT_EQ(Forge("get jobs -o table").code, 2);
  EXPECT_EQ(Forge("describe job").code, 2);
  EXPECT_EQ(Forge("logs").code, 2);
  Result r = Forge("get jobs --server ftp://x");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "forge: --server: server URL ftp://x: use http:// or https://\n");
}

// FORGE_SERVER is read and checked by the settings table, as docs/settings.md lists it: a value
// with credentials in it is refused without echoing them, and never sent anywhere.
TEST_F(ClientFake, AnUnusableForgeServerIsSaidAsTheSettingsSayIt) {
  Result r = Forge("get jobs", "FORGE_SERVER=http://me:hunter2@" + api.url().substr(7));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("forge: FORGE_SERVER: must not contain credentials"));
  EXPECT_THAT(r.err, Not(HasSubstr("hunter2")));
  r = Forge("get jobs", "FORGE_SERVER=ftp://x");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("forge: FORGE_SERVER: expected an http:// or https:// URL"));
}

}  // namespace
}  // namespace starforge::cli
