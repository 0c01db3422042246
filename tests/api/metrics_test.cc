// A job's metrics.jsonl as GET /api/v1/jobs/{id}/metrics reads it (metrics.h).
#include "starforge/api/metrics.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>

#include "api_test_support.h"

namespace starforge::api {
namespace {

using nlohmann::json;
using testing::TempDir;

void Append(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::app) << text;
}

const json& Series(const json& answer, const std::string& name) {
  for (const json& s : answer.at("series"))
    if (s.at("name") == name) return s.at("points");
  static const json none = json::array();
  return none;
}

TEST(ReadMetrics, SeriesOfStepAndValueFromCompleteLinesThenFromTheOffset) {
  TempDir t;
  const auto f = t / "metrics.jsonl";
  json a = ReadMetrics(f, 0, false);  // no file yet
  EXPECT_EQ(a["series"], json::array());
  EXPECT_EQ(a["offset"], 0);
  EXPECT_FALSE(a["complete"]);
  Append(f, R"({"step": 0, "loss": 0.7, "time": 1.5, "note": "x"})"
            "\n"
            R"({"step": 10, "loss": 0.5, "accuracy": 0.8})"
            "\n"
            "not json\n"
            R"({"loss": 0.4})"
            "\n"
            R"({"step": 20, "loss": 0.)");  // still being written
  a = ReadMetrics(f, 0, false);
  EXPECT_EQ(Series(a, "loss"), json::parse("[[0, 0.7], [10, 0.5], [null, 0.4]]"));
  EXPECT_EQ(Series(a, "accuracy"), json::parse("[[10, 0.8]]"));
  EXPECT_EQ(a["series"].size(), 2u) << a.dump();  // not time, not the string
  EXPECT_EQ(a["series"][0]["name"], "loss");      // in the order the file has them
  EXPECT_EQ(a["lines"], 4);
  EXPECT_EQ(a["skipped"], 1);
  const int64_t off = a["offset"];
  EXPECT_LT(off, a["size"].get<int64_t>());
  Append(f, "3}\n");
  a = ReadMetrics(f, off, false);
  EXPECT_EQ(Series(a, "loss"), json::parse("[[20, 0.3]]"));
  EXPECT_EQ(a["offset"], a["size"]);
  // Once the job has ended a last line without '\n' counts, and the answer is complete.
  Append(f, R"({"step": 30, "loss": 0.2})");
  a = ReadMetrics(f, a["offset"], true);
  EXPECT_EQ(Series(a, "loss"), json::parse("[[30, 0.2]]"));
  EXPECT_TRUE(a["complete"]);
}

TEST(ReadMetrics, LimitsOnTheFileLinesAndSeries) {
  TempDir t;
  const auto f = t / "metrics.jsonl";
  std::string text;
  for (int i = 0; i < 1000; ++i)
    text += R"({"step": )" + std::to_string(i) +
            R"(, "loss": 1})"
            "\n";
  Append(f, text);
  MetricsLimits small{.max_chunk = 4096, .max_file = 10000, .max_line = 100, .max_series = 2};
  int64_t offset = 0;
  size_t points = 0;
  json a;
  for (int reads = 0; reads < 10; ++reads) {
    a = ReadMetrics(f, offset, true, small);
    points += Series(a, "loss").size();
    offset = a["offset"];
    if (a["complete"]) break;
  }
  EXPECT_TRUE(a["complete"]);
  EXPECT_EQ(offset, 10000);
  EXPECT_GT(points, 300u);
  EXPECT_LT(points, 450u);
  EXPECT_NE(a.value("warning", "").find("only its first"), std::string::npos) << a.dump();

  const auto g = t / "other.jsonl";
  Append(g, std::string(200, ' ') + R"({"a": 1})"
                                    "\n"
                                    R"({"a": 1, "b": 2, "c": 3})"
                                    "\n");
  a = ReadMetrics(g, 0, false, small);
  EXPECT_EQ(a["skipped"], 1);  // the over-long line
  EXPECT_EQ(a["series"].size(), 2u);
  EXPECT_NE(a.value("warning", "").find("scalar names"), std::string::npos);
}

TEST(ReadMetrics, NeitherASymlinkNorAFifoIsRead) {
  TempDir t;
  Append(t / "secret", R"({"step": 1, "loss": 1})"
                       "\n");
  std::filesystem::create_symlink(t / "secret", t / "metrics.jsonl");
  EXPECT_EQ(ReadMetrics(t / "metrics.jsonl", 0, true)["series"], json::array());
  TempDir u;
  ASSERT_EQ(::mkfifo((u / "metrics.jsonl").c_str(), 0600), 0);
  EXPECT_EQ(ReadMetrics(u / "metrics.jsonl", 0, true)["series"], json::array());  // no hang
}

}  // namespace
}  // namespace starforge::api
