// The pure parts of the REST client: SSE parsing, error messages from API bodies, tables, ages,
// the config file, server and code-directory resolution, the code zip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

#include "starforge/cli/api_client.h"
#include "starforge/cli/client_config.h"
#include "starforge/cli/client_output.h"
#include "support/files.h"
#include "support/temp_dir.h"

namespace starforge::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using support::ReadFile;
using support::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<SseEvent> ParseAll(SseParser& p, const std::vector<std::string>& chunks) {
  std::vector<SseEvent> events;
  for (const auto& chunk : chunks)
    p.Feed(chunk, [&](const SseEvent& e) { events.push_back(e); });
  return events;
}

TEST(SseParser, EventsWithIdsTypesAndMultiLineData) {
  SseParser p;
  auto events = ParseAll(p, {"id: 12\nevent: log\ndata: step 1 loss 0.7\ndata: step 2 loss 0.5\n\n"
                             ": keep-alive\n\n"
                             "event: end\ndata: {\"phase\":\"Succeeded\"}\n\n"});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].id, "12");
  EXPECT_EQ(events[0].event, "log");
  EXPECT_EQ(events[0].data, "step 1 loss 0.7\nstep 2 loss 0.5");
  EXPECT_EQ(events[1].event, "end");
  EXPECT_EQ(events[1].id, "12") << "the last event id persists until the server sets another";
  EXPECT_EQ(events[1].data, "{\"phase\":\"Succeeded\"}");
  EXPECT_EQ(p.last_event_id(), "12");
}

TEST(SseParser, ChunksSplitAnywhereGiveTheSameEvents) {
  const std::string stream =
      "id: 7\r\nevent: log\r\ndata: a\r\ndata:\r\ndata:  two spaces\r\n\r\n"
      "id: 19\rdata: b\r\rdata: no event type\n\n";
  SseParser whole;
  const auto expected = ParseAll(whole, {stream});
  ASSERT_EQ(expected.size(), 3u);
  EXPECT_EQ(expected[0].data, "a\n\n two spaces") << "one leading space is stripped, only one";
  EXPECT_EQ(expected[1].id, "19");
  EXPECT_EQ(expected[1].data, "b");
  EXPECT_EQ(expected[2].event, "message");
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    for (size_t cut2 = cut; cut2 < stream.size(); cut2 += 5) {
      SseParser p;
      const auto got =
          ParseAll(p, {stream.substr(0, cut), stream.substr(cut, cut2 - cut), stream.substr(cut2)});
      ASSERT_EQ(got.size(), expected.size()) << "cuts at " << cut << ", " << cut2;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].data, expected[i].data) << cut << "," << cut2;
        EXPECT_EQ(got[i].id, expected[i].id) << cut << "," << cut2;
        EXPECT_EQ(got[i].event, expected[i].event) << cut << "," << cut2;
      }
    }
  }
}

TEST(SseParser, AnEmptyLogLineIsAnEventAndCommentsAreNot) {
  SseParser p;
  auto events = ParseAll(p, {"event: log\ndata: \n\n", ": ping\n\n", "event: log\n\n"});
  ASSERT_EQ(events.size(), 1u) << "an event without data is not dispatched";
  EXPECT_EQ(events[0].data, "");
}

TEST(SseParser, ResetDropsAHalfReceivedEventButKeepsTheLastId) {
  SseParser p;
  ParseAll(p, {"id: 40\nevent: log\ndata: done\n\nid: 80\nevent: log\ndata: half"});
  EXPECT_EQ(p.last_event_id(), "40");
  p.Reset();  // the connection dropped; the server resends from 40
  auto events = ParseAll(p, {"event: log\ndata: again\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "again");
  EXPECT_EQ(events[0].id, "40");
}

TEST(ApiErrors, InvalidJobSpecListsEveryFieldError) {
  const std::string body = R"({"error":"Invalid","message":"the JobSpec is invalid","errors":[
      {"field":"pools[0].gpusPerMachine","message":"must be ≥ 0, got -1"},
      {"field":"name","message":"must be a DNS label"}]})";
  ApiError e = ErrorFromResponse(422, body, "http://h:1", true);
  EXPECT_EQ(e.kind, ApiError::Kind::kApi);
  EXPECT_EQ(e.ExitCode(), 1);
  EXPECT_EQ(e.error, "Invalid");
  EXPECT_EQ(e.ToString(),
            "forge: the JobSpec is invalid\n"
            "  pools[0].gpusPerMachine: must be ≥ 0, got -1\n"
            "  name: must be a DNS label\n");
}

TEST(ApiErrors, RejectedNamesItsField) {
  ApiError e = ErrorFromResponse(
      422,
      R"({"error":"Rejected","message":"needs 8 GPUs; this machine has 0","field":"pools[0].gpusPerMachine"})",
      "http://h:1", true);
  EXPECT_EQ(e.ToString(), "forge: pools[0].gpusPerMachine: needs 8 GPUs; this machine has 0\n");
}

TEST(ApiErrors, StatusDecidesTheKindAndExitCode) {
  ApiError nf = ErrorFromResponse(404, R"({"error":"NotFound","message":"job j-x not found"})",
                                  "http://h:1", true);
  EXPECT_EQ(nf.kind, ApiError::Kind::kNotFound);
  EXPECT_EQ(nf.ExitCode(), kExitNotFound);
  EXPECT_EQ(nf.ToString(), "forge: job j-x not found\n");

  ApiError no_token = ErrorFromResponse(401, "{}", "http://h:1", false);
  EXPECT_EQ(no_token.ExitCode(), kExitUnreachable);
  EXPECT_EQ(no_token.message,
            "not logged in to http://h:1: run `forge login` (or set FORGE_TOKEN)");
  ApiError rejected = ErrorFromResponse(401, "{}", "http://h:1", true);
  EXPECT_EQ(rejected.message, "token rejected by http://h:1: run `forge login`");
}

TEST(ApiErrors, ABodyThatIsNotTheContractsStillSaysSomething) {
  ApiError e =
      ErrorFromResponse(502, "\n<html><body>Bad Gateway</body></html>\nmore", "http://h:1", true);
  EXPECT_EQ(e.message,
            "the server at http://h:1 answered HTTP 502: <html><body>Bad Gateway</body></html>");
  EXPECT_EQ(ErrorFromResponse(500, "", "http://h:1", true).message,
            "the server at http://h:1 answered HTTP 500");
}

TEST(Ages, LikeKubectl) {
  EXPECT_EQ(FormatAge(-5000), "0s");
  EXPECT_EQ(FormatAge(999), "0s");
  EXPECT_EQ(FormatAge(45'000), "45s");
  EXPECT_EQ(FormatAge(119'000), "119s");
  EXPECT_EQ(FormatAge(5 * 60'000 + 12'000), "5m12s");
  EXPECT_EQ(FormatAge(5 * 60'000), "5m");
  EXPECT_EQ(FormatAge(42 * 60'000), "42m");
  EXPECT_EQ(FormatAge(5 * 3'600'000LL + 3 * 60'000), "5h3m");
  EXPECT_EQ(FormatAge(20 * 3'600'000LL), "20h");
  EXPECT_EQ(FormatAge(76 * 3'600'000LL), "3d4h");
  EXPECT_EQ(FormatAge(45 * 86'400'000LL), "45d");
  EXPECT_EQ(FormatAge((2 * 365 + 30) * 86'400'000LL), "2y30d");
  EXPECT_EQ(FormatAge(9 * 365 * 86'400'000LL), "9y");
}

TEST(Times, Rfc3339) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339("2026-11-29T12:00:00.123Z"), 1795953600123);
  EXPECT_EQ(ParseRfc3339("2026-11-29T13:00:00.1+01:00"), 1795953600100);
  EXPECT_EQ(ParseRfc3339("2026-11-29T12:00:00"), std::nullopt) << "no zone";
  EXPECT_EQ(ParseRfc3339("yesterday"), std::nullopt);
  EXPECT_EQ(ParseRfc3339(""), std::nullopt);
  const json job = {{"createdAt", "2026-11-29T12:00:00.000Z"}};
  EXPECT_EQ(AgeOf(job, "createdAt", 1795953600000 + 90'000), "90s");
  EXPECT_EQ(AgeOf(job, "startedAt", 0), "<unknown>");
}

TEST(Tables, ColumnsAlignByCharactersNotBytes) {
  const std::string t = RenderTable({"ID", "NAME", "MESSAGE"},
                                    {{"j-1", "ä-job", "x"}, {"j-1234", "b", "long message here"}});
  EXPECT_EQ(t,
            "ID       NAME    MESSAGE\n"
            "j-1      ä-job   x\n"
            "j-1234   b       long message here\n");
}

TEST(Tables, ColourOnlyWhenAskedAndOnlyTheText) {
  const auto plain = RenderTable({"ID", "PHASE", "AGE"}, {{"j-1", "Failed", "1s"}});
  EXPECT_EQ(plain.find('\033'), std::string::npos);
  const auto coloured = RenderTable({"ID", "PHASE", "AGE"}, {{"j-1", "Failed", "1s"}}, true);
  EXPECT_THAT(coloured, HasSubstr("\033[31mFailed\033[0m   1s"));
}

json SampleJob() {
  return json::parse(R"({
    "id": "j-k3v9x0a1b2", "name": "tiny-train", "owner": "admin", "fleet": "local",
    "phase": "Failed", "reason": "AppFailed", "message": "the entrypoint exited with code 3",
    "exitCode": 3, "capsule": {"sha256": "0123456789abcdef0123", "key": "capsules/sha256-0123.zip"},
    "cancelRequested": false, "cleanup": {"logsArchived": true, "released": false},
    "createdAt": "2026-11-29T12:00:00.000Z", "updatedAt": "2026-11-29T12:00:05.000Z",
    "startedAt": "2026-11-29T12:00:01.000Z", "finishedAt": "2026-11-29T12:00:04.000Z",
    "spec": {"name": "tiny-train", "fleet": "local", "recipe": "none", "image": "python:3.11-slim",
             "entrypoint": ["python3", "train.py", "--name", "a b"], "env": {"SEED": "1"},
             "pools": [{"name": "main", "machines": 1, "gpusPerMachine": 0, "cpusPerMachine": "1"}],
             "deadlines": {"preRunningSeconds": 1800, "runningSeconds": 0}, "corpus": false},
    "timeline": [
      {"at": "2026-11-29T12:00:00.000Z", "from": null, "to": "Queued", "reason": "", "message": "", "cause": "api"},
      {"at": "2026-11-29T12:00:04.000Z", "from": "Running", "to": "Failed", "reason": "AppFailed",
       "message": "the entrypoint exited with code 3", "cause": "fleet:local"}]
  })");
}

TEST(JobTable, RowsAndWideRows) {
  const json job = SampleJob();
  const int64_t now = *ParseRfc3339("2026-11-29T12:05:00.000Z");
  EXPECT_THAT(JobRow(job, false, now),
              ElementsAre("j-k3v9x0a1b2", "tiny-train", "Failed", "AppFailed", "5m"));
  EXPECT_THAT(JobRow(job, true, now),
              ElementsAre("j-k3v9x0a1b2", "tiny-train", "Failed", "AppFailed", "5m", "local",
                          "admin", "0123456789ab", "the entrypoint exited with code 3"));
  const json queued = {{"id", "j-2"},        {"name", "n"},
                       {"phase", "Queued"},  {"reason", ""},
                       {"capsule", nullptr}, {"createdAt", "2026-11-29T12:04:59.000Z"}};
  EXPECT_THAT(JobRow(queued, true, now), ElementsAre("j-2", "n", "Queued", "<none>", "1s", "<none>",
                                                     "<none>", "<none>", "<none>"));
}

TEST(Describe, EverySectionOfAJob) {
  const json events = json::parse(R"({"items": [
      {"type": "Normal", "reason": "Started", "message": "runner pid 42", "source": "fleet:local",
       "count": 1, "firstAt": "2026-11-29T12:00:01.000Z", "lastAt": "2026-11-29T12:00:01.000Z"},
      {"type": "Warning", "reason": "Slow", "message": "took long", "source": "controller",
       "count": 3, "firstAt": "2026-11-29T12:00:01.000Z", "lastAt": "2026-11-29T12:00:03.000Z"}]})");
  const std::string d = DescribeJob(SampleJob(), events, *ParseRfc3339("2026-11-29T12:05:00.000Z"));
  EXPECT_THAT(d, HasSubstr("Name:         tiny-train\n"));
  EXPECT_THAT(d, HasSubstr("ID:           j-k3v9x0a1b2\n"));
  EXPECT_THAT(d, HasSubstr("Phase:        Failed\n"));
  EXPECT_THAT(d, HasSubstr("Reason:       AppFailed\n"));
  EXPECT_THAT(d, HasSubstr("Exit Code:    3\n"));
  EXPECT_THAT(d, HasSubstr("Capsule:      sha256:0123456789abcdef0123\n"));
  EXPECT_THAT(d, HasSubstr("Cleanup:      logs archived: yes, released: no\n"));
  EXPECT_THAT(d, HasSubstr("Finished:     2026-11-29T12:00:04.000Z (4m56s ago)\n"));
  EXPECT_THAT(d, HasSubstr("  Image:        python:3.11-slim\n"));
  EXPECT_THAT(d, HasSubstr("  Entrypoint:   python3 train.py --name 'a b'\n"));
  EXPECT_THAT(d, HasSubstr("  Env:          SEED\n")) << "names only: values may be secrets";
  EXPECT_THAT(d, HasSubstr("    NAME   MACHINES   GPUS   GPU SERIES   CPUS   MEMORY\n"
                           "    main   1          0      <none>       1      <none>\n"));
  EXPECT_THAT(
      d, HasSubstr("Timeline:\n  AGE     FROM      TO       REASON      CAUSE         MESSAGE\n"
                   "  5m      <none>    Queued   <none>      api           <none>\n"
                   "  4m56s   Running   Failed   AppFailed   fleet:local   the entrypoint"));
  EXPECT_THAT(
      d,
      HasSubstr("Events:\n  AGE                     TYPE      REASON    FROM          MESSAGE\n"));
  EXPECT_THAT(d,
              HasSubstr("  4m57s (x3 over 4m59s)   Warning   Slow      controller    took long\n"));
  EXPECT_THAT(DescribeJob(SampleJob(), json::object(), 0), HasSubstr("Events:       <none>\n"));
}

TEST(Capacity, OneRowPerFleetOneColumnPerKey) {
  const json cap = json::parse(R"({"fleets": [
      {"cpus": 2, "cpusInUse": 1, "fleet": "local", "jobs": [{"id": "j-1"}, {"id": "j-2"}],
       "memoryBytes": 25276502016, "gpus": {"total": 0, "used": 0}},
      {"fleet": "kuberay", "gpuSeries": ["a100", "h100"], "jobs": []}]})");
  EXPECT_EQ(
      CapacityTable(cap),
      "FLEET     CPUS   CPUS IN USE   GPUS.TOTAL   GPUS.USED   JOBS     MEMORY     GPU SERIES\n"
      "local     2      1             0            0           2        23.5 GiB   -\n"
      "kuberay   -      -             -            -           <none>   -          a100,h100\n");
  EXPECT_EQ(CapacityTable(json::object()), "No fleets.\n");
}

// The kuberay fleet's card series: its own table with the API's numbers, blocked nodes and why.
TEST(Capacity, KubeRaySeriesGetATableOfTheirOwn) {
  const json cap = json::parse(R"({"fleets": [
      {"fleet": "kuberay", "namespace": "starforge", "gpuNodeLabel": "starforge/gpu-series",
       "series": [
         {"series": "h100", "nodes": 1, "blockedNodes": 0, "maxGpusPerNode": 8,
          "gpus": {"capacity": 8, "allocatable": 8, "requested": 0, "free": 8},
          "nodeDetail": [{"name": "h100-a", "blocked": []}]},
         {"series": "h200", "nodes": 2, "blockedNodes": 1, "maxGpusPerNode": 8,
          "gpus": {"capacity": 16, "allocatable": 16, "requested": 4, "free": 4},
          "nodeDetail": [{"name": "h200-a", "blocked": []},
                         {"name": "h200-b", "blocked": ["cordoned"]}]}]}]})");
  const std::string table = CapacityTable(cap);
  EXPECT_THAT(table, HasSubstr("kuberay GPUs by card series (node label starforge/gpu-series):\n"));
  EXPECT_THAT(table,
              HasSubstr("SERIES   NODES   GPUS   ALLOCATABLE   IN USE   FREE   BLOCKED NODES\n"
                        "h100     1       8      8             0        8      0\n"
                        "h200     2       16     16            4        4      1 (h200-b: "
                        "cordoned)\n"));
  EXPECT_THAT(table.substr(0, table.find('\n')), Not(HasSubstr("SERIES")))
      << "the fleet row has no bare count of the series";
}

TEST(Tail, LastLines) {
  const std::string text = "a\nb\nc\n";
  EXPECT_EQ(text.substr(TailStart(text, 1)), "c\n");
  EXPECT_EQ(text.substr(TailStart(text, 2)), "b\nc\n");
  EXPECT_EQ(text.substr(TailStart(text, 3)), text);
  EXPECT_EQ(text.substr(TailStart(text, 10)), text);
  EXPECT_EQ(text.substr(TailStart(text, 0)), "");
  EXPECT_EQ(std::string("x\ny").substr(TailStart("x\ny", 1)), "y") << "an unfinished last line";
  EXPECT_EQ(TailStart("", 3), 0u);
}

TEST(ClientConfig, PathFollowsXdg) {
  EXPECT_EQ(ClientConfigPath("/x", "/home/u"), "/x/starforge/config.json");
  EXPECT_EQ(ClientConfigPath("", "/home/u"), "/home/u/.config/starforge/config.json");
  EXPECT_EQ(ClientConfigPath("relative", "/home/u"), "/home/u/.config/starforge/config.json")
      << "the XDG spec ignores a relative XDG_CONFIG_HOME";
  EXPECT_EQ(ClientConfigPath("", ""), "");
}

TEST(ClientConfig, SaveIsPrivateAndLoadReadsItBack) {
  TempDir tmp;
  const fs::path path = tmp.path() / "cfg/starforge/config.json";
  EXPECT_EQ(LoadClientSettings(path).settings.token, "") << "no file yet is not an error";
  EXPECT_EQ(LoadClientSettings(path).error, "");
  ASSERT_TRUE(SaveClientSettings(path, {"http://h:1", "sf_secret"}).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(path.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  LoadedSettings loaded = LoadClientSettings(path);
  EXPECT_EQ(loaded.error, "");
  EXPECT_EQ(loaded.warning, "");
  EXPECT_EQ(loaded.settings.server, "http://h:1");
  EXPECT_EQ(loaded.settings.token, "sf_secret");

  // Keys it does not know survive a new login; nothing else is left in the directory.
  std::ofstream(path) << R"({"server": "http://old", "token": "sf_old", "editor": "vi"})";
  ASSERT_TRUE(SaveClientSettings(path, {"http://h:2", "sf_new"}).ok());
  const json doc = json::parse(ReadFile(path));
  EXPECT_EQ(doc["editor"], "vi");
  EXPECT_EQ(doc["token"], "sf_new");
  EXPECT_EQ(std::distance(fs::directory_iterator(path.parent_path()), fs::directory_iterator()), 1);
}

TEST(ClientConfig, ReadableByOthersIsWarnedAboutAndGarbageIsAnError) {
  TempDir tmp;
  const fs::path path = tmp.path() / "config.json";
  std::ofstream(path) << R"({"server": "http://h:1", "token": "sf_secret"})";
  ::chmod(path.c_str(), 0644);
  LoadedSettings loaded = LoadClientSettings(path);
  EXPECT_THAT(loaded.warning, HasSubstr("readable by others (mode 0644): run chmod 600"));
  EXPECT_THAT(loaded.warning, Not(HasSubstr("sf_secret")));
  std::ofstream(path) << "[1, 2";
  EXPECT_THAT(LoadClientSettings(path).error, HasSubstr("is not a JSON object"));
  std::ofstream(path) << R"({"token": 5})";
  EXPECT_THAT(LoadClientSettings(path).error, HasSubstr("\"token\" must be a string"));
}

TEST(Endpoint, FlagThenEnvThenFileThenDefault) {
  const ClientSettings file{"http://saved:8080/", "sf_saved"};
  auto ep = ResolveEndpoint("", "", "", file);
  ASSERT_TRUE(ep) << ep.status().message();
  EXPECT_EQ(ep->server, "http://saved:8080");
  EXPECT_EQ(ep->token, "sf_saved");
  ep = ResolveEndpoint("", "env:9", "", file);
  EXPECT_EQ(ep->server, "http://env:9");
  EXPECT_EQ(ep->token, "") << "the saved token belongs to the saved server only";
  ep = ResolveEndpoint("https://flag", "env:9", "sf_env", file);
  EXPECT_EQ(ep->server, "https://flag");
  EXPECT_EQ(ep->token, "sf_env");
  EXPECT_EQ(ep->server_from, "--server");
  ep = ResolveEndpoint("", "", "", {});
  EXPECT_EQ(ep->server, "http://127.0.0.1:8080");
  ep = ResolveEndpoint("ftp://x", "", "", {});
  EXPECT_FALSE(ep);
  EXPECT_EQ(ep.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ep.status().message(), "--server: server URL ftp://x: use http:// or https://");
  ep = ResolveEndpoint("http://u:pw@h", "", "", {});
  EXPECT_FALSE(ep);
  EXPECT_THAT(ep.status().message(), HasSubstr("must not contain credentials"));
  EXPECT_THAT(ep.status().message(), Not(HasSubstr("pw")));
}

TEST(CodeDir, FlagThenSpecRelativeToTheJobFileThenAnError) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "proj/src");
  const std::string job = (tmp.path() / "proj/job.yaml").string();
  EXPECT_EQ(ResolveCodeDir("", std::string("src"), job).value(), tmp.path() / "proj/src");
  EXPECT_EQ(ResolveCodeDir("", std::string("."), job).value(), tmp.path() / "proj/");
  EXPECT_EQ(ResolveCodeDir((tmp.path() / "proj").string(), std::string("src"), job).value(),
            tmp.path() / "proj");
  StatusOr<fs::path> dir = ResolveCodeDir("", std::nullopt, job);
  EXPECT_FALSE(dir);
  EXPECT_EQ(dir.status().message(),
            "no code directory: pass --code DIR or set code: in the JobSpec");
  dir = ResolveCodeDir("", std::string("missing"), job);
  EXPECT_FALSE(dir);
  EXPECT_EQ(dir.status().message(), "code directory " + (tmp.path() / "proj/missing").string() +
                                        " (from code: in " + job + ") does not exist");
}

}  // namespace
}  // namespace starforge::cli
