// Proves that the user's command reaches the program literally through everything that parses the
// RayJob's entrypoint on a real cluster, emulated here with real shells:
//
//   K8sJobMode: KubeRay's submitter runs `/bin/bash -ce -- "<script>"` with the entrypoint pasted
//   unquoted into `ray job submit … -- <entrypoint>` and the runtime env as
//   `--runtime-env-json "<Go strconv.Quote(json)>"` (upstream-facts §3.1); `ray job submit`
//   re-joins its words with Python's subprocess.list2cmdline (ray dashboard/modules/job/cli.py);
//   Ray's job supervisor runs that string with a shell. HTTPMode: the entrypoint string goes to the
//   supervisor's shell as it is.
//
// `ray` is a stand-in on PATH that does exactly those two steps with the real Python functions.
// The capsule's runner is a stand-in too (the real one is built by the capsule issue): it runs the
// argv of .starforge/jobspec.json, as the real runner does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>

#include "starforge/common/yaml_json.h"
#include "starforge/jobspec/parse.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/render.h"
#include "starforge/kuberay/shell.h"
#include "test_support.h"

namespace starforge::kuberay {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

// Go's strconv.Quote for the ASCII and UTF-8 text StarForge renders.
std::string GoQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

const char* kFakeRay = R"PY(#!/usr/bin/env python3
import json, os, subprocess, sys
args = sys.argv[1:]
if args[:2] == ["job", "status"]:
    sys.exit(1)  # not submitted yet
if args[:2] == ["job", "logs"]:
    sys.exit(0)
if args[:2] == ["job", "submit"]:
    i = args.index("--")
    opts, entrypoint = args[2:i], args[i + 1:]
    if "--runtime-env-json" in opts:
        with open(os.environ["RECEIVED_RUNTIME_ENV"], "w") as f:
            f.write(opts[opts.index("--runtime-env-json") + 1])
    # Ray's CLI: entrypoint=list2cmdline(entrypoint); the supervisor runs it with shell=True.
    sys.exit(subprocess.run(subprocess.list2cmdline(entrypoint), shell=True,
                            cwd=os.environ["WORKING_DIR"]).returncode)
sys.exit("unexpected ray invocation: %r" % args)
)PY";

const char* kFakeRunner = R"PY(import json, os, sys
assert sys.argv[1:] == ["run"], sys.argv
argv = json.load(open(".starforge/jobspec.json"))["entrypoint"]
os.execvp(argv[0], argv)
)PY";

// The user's command: a program that records the argv it received.
const std::vector<std::string> kHostileWords = {"$(touch pwned)",
                                                "`touch pwned2`",
                                                "a;b",
                                                "; touch pwned3",
                                                "it's",
                                                "\"double\"",
                                                "multi\nline",
                                                "back\\slash",
                                                "*",
                                                "a b",
                                                "",
                                                "tab\there",
                                                "$HOME",
                                                "--flag=x y",
                                                "&&",
                                                "|"};

struct Fixture {
  TempDir tmp;
  fs::path work;  // Ray's working directory: the unpacked capsule
  json rayjob;
  std::vector<std::string> expected_argv;

  explicit Fixture(config::SubmissionMode mode) : work(tmp.path() / "capsule") {
    fs::create_directories(work / ".starforge");
    fs::create_directories(tmp.path() / "bin");
    WriteFile(tmp.path() / "bin/ray", kFakeRay);
    fs::permissions(tmp.path() / "bin/ray", fs::perms::owner_all);
    WriteFile(work / kRunnerPath, kFakeRunner);

    const std::string recorder =
        "import json, sys; json.dump(sys.argv[1:], open('argv.json', 'w'))";
    json job = {{"name", "chain"},
                {"image", "img:1"},
                {"entrypoint", json::array({"python3", "-c", recorder})},
                {"env", {{"QUOTED", "say \"hi\"\nback\\slash 'single'"}}},
                {"pools", {{{"name", "main"}}}}};
    for (const auto& w : kHostileWords)
      job["entrypoint"].push_back(w);
    expected_argv = kHostileWords;

    jobspec::ParseResult parsed = jobspec::FromJson(job, {});
    if (!parsed.ok()) throw std::runtime_error(JoinErrors(parsed.errors));
    WriteFile(work / kCapsuleJobSpecPath, jobspec::ToCanonicalText(*parsed.spec));

    config::Config cfg;
    cfg.kuberay_submission_mode = mode;
    RenderResult r =
        Render(*parsed.spec, "j-1", {"https://s3.example.com/b/c.zip", std::string(64, 'a')}, cfg);
    if (!r.ok()) throw std::runtime_error(JoinErrors(r.errors));
    rayjob = r.rayjob;
  }

  // The KubeRay K8sJobMode submitter script (upstream-facts §3.1), with this RayJob's fields.
  std::string SubmitterScript() const {
    const std::string a = "http://head-svc:8265";
    const json runtime_env = ParseYaml(rayjob["spec"]["runtimeEnvYAML"].get<std::string>()).value();
    return "if ! ray job status --address " + a + " j-1 >/dev/null 2>&1 ; then ray job submit " +
           "--address " + a + " --no-wait --runtime-env-json " + GoQuote(runtime_env.dump()) +
           " --submission-id j-1 -- " + rayjob["spec"]["entrypoint"].get<std::string>() +
           " ; fi ; ray job logs --address " + a + " --follow j-1";
  }

  int RunK8sJobMode(const std::string& script) const {
    const std::string cmd =
        "cd " + ShellQuote(tmp.path().string()) +
        " && PATH=" + ShellQuote((tmp.path() / "bin").string()) +
        ":$PATH WORKING_DIR=" + ShellQuote(work.string()) +
        " RECEIVED_RUNTIME_ENV=" + ShellQuote((tmp.path() / "runtime_env.json").string()) +
        " /bin/bash -ce -- " + ShellQuote(script);
    return WEXITSTATUS(std::system(cmd.c_str()));
  }

  int RunHttpMode() const {
    const std::string cmd = "cd " + ShellQuote(work.string()) + " && /bin/sh -c " +
                            ShellQuote(rayjob["spec"]["entrypoint"].get<std::string>());
    return WEXITSTATUS(std::system(cmd.c_str()));
  }

  json ReceivedArgv() const { return json::parse(ReadFile(work / "argv.json")); }
  bool AnythingInjected() const {
    for (const char* f : {"pwned", "pwned2", "pwned3"}) {
      if (fs::exists(work / f) || fs::exists(tmp.path() / f)) return true;
    }
    return false;
  }
};

TEST(EntrypointChain, K8sJobModeDeliversEveryWordLiterally) {
  Fixture f(config::SubmissionMode::kK8sJobMode);
  ASSERT_EQ(f.RunK8sJobMode(f.SubmitterScript()), 0);
  EXPECT_EQ(f.ReceivedArgv(), json(f.expected_argv));
  EXPECT_FALSE(f.AnythingInjected());
}

TEST(EntrypointChain, K8sJobModeRuntimeEnvSurvivesTheSubmitterShell) {
  Fixture f(config::SubmissionMode::kK8sJobMode);
  ASSERT_EQ(f.RunK8sJobMode(f.SubmitterScript()), 0);
  const json received = json::parse(ReadFile(f.tmp.path() / "runtime_env.json"));
  EXPECT_EQ(received, ParseYaml(f.rayjob["spec"]["runtimeEnvYAML"].get<std::string>()).value());
  EXPECT_EQ(received["env_vars"]["QUOTED"], "say \"hi\"\nback\\slash 'single'");
}

TEST(EntrypointChain, HttpModeDeliversEveryWordLiterally) {
  Fixture f(config::SubmissionMode::kHTTPMode);
  ASSERT_EQ(f.RunHttpMode(), 0);
  EXPECT_EQ(f.ReceivedArgv(), json(f.expected_argv));
  EXPECT_FALSE(f.AnythingInjected());
}

// Why the user's words are not in the entrypoint: quoting them once for KubeRay's bash is not
// enough, because Ray's list2cmdline + shell parse them a second time. This control shows the
// emulated chain is strict enough to catch that.
TEST(EntrypointChain, ShellQuotingTheWordsOnceWouldNotSurvive) {
  Fixture f(config::SubmissionMode::kK8sJobMode);
  const std::string recorder = "import json, sys; json.dump(sys.argv[1:], open('argv.json', 'w'))";
  std::vector<std::string> argv = {"python3", "-c", recorder};
  argv.insert(argv.end(), kHostileWords.begin(), kHostileWords.end());
  f.rayjob["spec"]["entrypoint"] = ShellJoin(argv);
  f.RunK8sJobMode(f.SubmitterScript());
  const bool delivered =
      fs::exists(f.work / "argv.json") && f.ReceivedArgv() == json(f.expected_argv);
  EXPECT_TRUE(!delivered || f.AnythingInjected());
  EXPECT_FALSE(delivered);
}

}  // namespace
}  // namespace starforge::kuberay
