// The API's pure formats: Job/Event JSON, errors, times, cursors, listen addresses, Prometheus
// text and Server-Sent Events.
#include "starforge/api/convert.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

namespace starforge::api {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(FormatTime, Rfc3339UtcWithMilliseconds) {
  EXPECT_EQ(FormatTime(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTime(1'795'939'200'123), "2026-11-29T08:00:00.123Z");
  EXPECT_EQ(FormatTime(1'795'939'200'007), "2026-11-29T08:00:00.007Z");
  EXPECT_EQ(FormatTime(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(TimeOrNull(0), json(nullptr));
  EXPECT_EQ(TimeOrNull(1000), json("1970-01-01T00:00:01.000Z"));
}

store::Job SampleJob() {
  store::Job j;
  j.seq = 7;
  j.id = "j-k3v9x0a1b2";
  j.owner = "admin";
  j.name = "tiny-train";
  j.fleet = "local";
  j.spec_json = "{\"name\":\"tiny-train\"}\n";
  j.phase = store::Phase::kRunning;
  j.created_at = 1000;
  j.updated_at = 2000;
  j.started_at = 1500;
  return j;
}

TEST(JobJson, TheContractsShapeWithNullsBeforeThingsHappen) {
  store::Job j = SampleJob();
  json out = JobJson(j);
  EXPECT_EQ(out, json::parse(R"({
    "id": "j-k3v9x0a1b2", "name": "tiny-train", "owner": "admin", "fleet": "local",
    "phase": "Running", "reason": "", "message": "", "exitCode": null, "capsule": null,
    "cancelRequested": false, "cleanup": {"logsArchived": false, "released": false},
    "createdAt": "1970-01-01T00:00:01.000Z", "updatedAt": "1970-01-01T00:00:02.000Z",
    "startedAt": "1970-01-01T00:00:01.500Z", "finishedAt": null})"));

  j.capsule_sha256 = std::string(64, 'a');
  j.exit_code = 3;
  j.phase = store::Phase::kFailed;
  j.reason = "AppFailed";
  j.finished_at = 3000;
  j.logs_archived = true;
  out = JobJson(j, /*with_spec=*/true);
  EXPECT_EQ(out["capsule"], json({{"sha256", std::string(64, 'a')},
                                  {"key", "capsules/sha256-" + std::string(64, 'a') + ".zip"}}));
  EXPECT_EQ(out["exitCode"], 3);
  EXPECT_EQ(out["phase"], "Failed");
  EXPECT_EQ(out["cleanup"]["logsArchived"], true);
  EXPECT_EQ(out["spec"], json({{"name", "tiny-train"}}));
  EXPECT_FALSE(out.contains("timeline"));
}

TEST(JobJson, TimelineAndABrokenSpecRow) {
  store::Job j = SampleJob();
  j.spec_json = "{not json";
  std::vector<store::Transition> timeline(2);
  timeline[0].to = store::Phase::kQueued;
  timeline[0].cause = "api";
  timeline[0].at = 1000;
  timeline[1].from = store::Phase::kQueued;
  timeline[1].to = store::Phase::kPackaging;
  timeline[1].reason = "X";
  timeline[1].cause = "controller";
  timeline[1].at = 1001;
  json out = JobJson(j, true, &timeline);
  EXPECT_EQ(out["spec"], json(nullptr));
  ASSERT_EQ(out["timeline"].size(), 2u);
  EXPECT_EQ(out["timeline"][0], json::parse(R"({"at": "1970-01-01T00:00:01.000Z", "from": null,
    "to": "Queued", "reason": "", "message": "", "cause": "api"})"));
  EXPECT_EQ(out["timeline"][1]["from"], "Queued");
  EXPECT_EQ(out["timeline"][1]["to"], "Packaging");
}

TEST(EventJson, Fields) {
  store::Event e;
  e.type = "Warning";
  e.reason = "WaitingForResources";
  e.message = "m";
  e.source = "fleet:local";
  e.count = 3;
  e.first_at = 1000;
  e.last_at = 5000;
  EXPECT_EQ(EventJson(e), json::parse(R"({"type": "Warning", "reason": "WaitingForResources",
    "message": "m", "source": "fleet:local", "count": 3, "firstAt": "1970-01-01T00:00:01.000Z",
    "lastAt": "1970-01-01T00:00:05.000Z"})"));
}

TEST(ErrorJson, OptionalFieldAndErrors) {
  EXPECT_EQ(ErrorJson("NotFound", "job j-x not found"),
            json({{"error", "NotFound"}, {"message", "job j-x not found"}}));
  json e = ErrorJson("Invalid", "invalid JobSpec", "pools[0].machines",
                     {{"pools[0].machines", "must be ≥ 1"}, {"name", "required"}});
  EXPECT_EQ(e["field"], "pools[0].machines");
  EXPECT_EQ(e["errors"], json::parse(R"([{"field": "pools[0].machines", "message": "must be ≥ 1"},
    {"field": "name", "message": "required"}])"));
}

TEST(Cursor, RoundTripsAndRefusesForgeries) {
  EXPECT_EQ(DecodeCursor(EncodeCursor(42)), 42);
  EXPECT_EQ(DecodeCursor("42"), std::nullopt);
  EXPECT_EQ(DecodeCursor("s"), std::nullopt);
  EXPECT_EQ(DecodeCursor("s0"), std::nullopt);
  EXPECT_EQ(DecodeCursor("s-1"), std::nullopt);
  EXPECT_EQ(DecodeCursor("s99999999999999999999"), std::nullopt);
}

TEST(ParseListen, HostPortForms) {
  auto a = ParseListen("127.0.0.1:8080");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  a = ParseListen("[::1]:0");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 0);
  EXPECT_TRUE(ParseListen("localhost:65535"));
  for (const char* bad : {"", "8080", ":8080", "host:", "host:65536", "host:x", "::1:80", "h:-1"})
    EXPECT_FALSE(ParseListen(bad)) << bad;
}

TEST(ParseCount, DigitsOnly) {
  EXPECT_EQ(ParseCount("0"), 0);
  EXPECT_EQ(ParseCount("120"), 120);
  for (const char* bad : {"", "-1", "+1", "1.5", " 1", "1e3", "1234567890123456789"})
    EXPECT_EQ(ParseCount(bad), std::nullopt) << bad;
}

// Sample name (with labels) → value, from Prometheus text; comments must be HELP/TYPE.
std::map<std::string, double> ParseProm(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) {
      EXPECT_TRUE(line.starts_with("# HELP ") || line.starts_with("# TYPE ")) << line;
      continue;
    }
    const size_t sp = line.rfind(' ');
    EXPECT_NE(sp, std::string::npos) << line;
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}

TEST(MetricsText, EveryPhaseCountersAndAHistogram) {
  MetricsSnapshot m;
  m.jobs_by_phase = {{store::Phase::kRunning, 2}, {store::Phase::kSucceeded, 5}};
  m.transitions = 30;
  m.reconciles = 100;
  m.reconcile_errors = 1;
  m.fleet_errors = 2;
  m.bucket_bounds = {0.001, 0.5, 1};
  m.bucket_counts = {10, 90, 99};
  m.latency_count = 100;
  m.latency_sum_seconds = 12.5;
  const std::string text = MetricsText(m);
  auto v = ParseProm(text);
  EXPECT_EQ(v["starforge_jobs{phase=\"Queued\"}"], 0);
  EXPECT_EQ(v["starforge_jobs{phase=\"Running\"}"], 2);
  EXPECT_EQ(v["starforge_jobs{phase=\"Succeeded\"}"], 5);
  EXPECT_EQ(v["starforge_jobs{phase=\"Cancelled\"}"], 0);
  int phases = 0;
  for (const auto& [k, _] : v)
    phases += k.starts_with("starforge_jobs{");
  EXPECT_EQ(phases, 8);
  EXPECT_EQ(v["starforge_transitions_total"], 30);
  EXPECT_EQ(v["starforge_reconcile_duration_seconds_bucket{le=\"0.001\"}"], 10);
  EXPECT_EQ(v["starforge_reconcile_duration_seconds_bucket{le=\"1\"}"], 99);
  EXPECT_EQ(v["starforge_reconcile_duration_seconds_bucket{le=\"+Inf\"}"], 100);
  EXPECT_EQ(v["starforge_reconcile_duration_seconds_sum"], 12.5);
  EXPECT_EQ(v["starforge_reconcile_duration_seconds_count"], 100);
  EXPECT_EQ(v["starforge_reconciles_total"], 100);
  EXPECT_EQ(v["starforge_reconcile_errors_total"], 1);
  EXPECT_EQ(v["starforge_fleet_errors_total"], 2);
  EXPECT_THAT(text, HasSubstr("# TYPE starforge_reconcile_duration_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE starforge_jobs gauge\n"));
}

TEST(Sse, LogEventsOneDataLinePerLine) {
  EXPECT_EQ(SseLogEvent("a\nb\n", 4), "id: 4\nevent: log\ndata: a\ndata: b\n\n");
  EXPECT_EQ(SseLogEvent("partial", 7), "id: 7\nevent: log\ndata: partial\n\n");
  EXPECT_EQ(SseLogEvent("\n", 1), "id: 1\nevent: log\ndata: \n\n");
  EXPECT_EQ(SseLogEvent("win\r\n", 5), "id: 5\nevent: log\ndata: win\n\n");
  // A progress bar's carriage returns would end the data line for any SSE reader.
  EXPECT_EQ(SseLogEvent("10%\r50%\r100%\n", 13),
            "id: 13\nevent: log\ndata: 10%\ndata: 50%\ndata: 100%\n\n");
}

TEST(Sse, EndEvent) {
  store::Job j = SampleJob();
  j.phase = store::Phase::kSucceeded;
  j.reason = "Completed";
  j.exit_code = 0;
  EXPECT_EQ(SseEndEvent(j),
            "event: end\ndata: {\"exitCode\":0,\"message\":\"\",\"phase\":\"Succeeded\","
            "\"reason\":\"Completed\"}\n\n");
  j.exit_code.reset();
  EXPECT_THAT(SseEndEvent(j), HasSubstr("\"exitCode\":null"));
}

}  // namespace
}  // namespace starforge::api
