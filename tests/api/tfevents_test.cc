// TensorBoard event files as GET /api/v1/jobs/{id}/metrics reads them (tfevents.h, metrics.h):
// files written by a real writer (tensorboardX, from PyPI through uv), and hostile ones.
#include "starforge/api/tfevents.h"

#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "api/tfevents.pb.h"
#include "api_test_support.h"
#include "starforge/api/metrics.h"

namespace starforge::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using testing::TempDir;

void Append(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::app) << bytes;
}

std::string Le(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += static_cast<char>((v >> (8 * i)) & 0xFF);
  return out;
}

// One TFRecord around `data`, as TensorBoard's writers frame it.
std::string Record(const std::string& data) {
  const std::string len = Le(data.size(), 8);
  return len + Le(MaskedCrc32c(len), 4) + data + Le(MaskedCrc32c(data), 4);
}

std::string ScalarEvent(int64_t step, const std::string& tag, float value) {
  tfevents::Event e;
  e.set_wall_time(1.7e9);
  e.set_step(step);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  return Record(e.SerializeAsString());
}

const json& Series(const json& answer, const std::string& name) {
  for (const json& s : answer.at("series"))
    if (s.at("name") == name) return s.at("points");
  static const json none = json::array();
  return none;
}

json Read(const fs::path& dir, const std::string& cursor = "0", bool final = false,
          const MetricsLimits& limits = {}) {
  std::string warning;
  const auto files = FindJobEventFiles(dir, limits, &warning);
  return ReadJobMetrics(dir, *MetricsCursor::Decode(cursor), files, final, limits, warning);
}

TEST(TfEvents, Crc32cIsCastagnoli) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);  // the standard check value
  EXPECT_EQ(Crc32c(""), 0u);
}

// The writer tests/api/tfevents_writer.py runs: tensorboardX from PyPI, installed by uv into its
// cache (scripts/bootstrap fills it ahead).
TEST(TfEvents, ScalarsOfARealWriterMergedWithMetricsJsonl) {
  TempDir t;
  const std::string uv = std::string(STARFORGE_SOURCE_DIR) + "/build/tools/bin/uv";
  ASSERT_EQ(::access(uv.c_str(), X_OK), 0) << uv << " missing: run scripts/bootstrap";
  const std::string cmd = "cd '" + std::string(STARFORGE_SOURCE_DIR) + "' && '" + uv +
                          "' run --quiet --script tests/api/tfevents_writer.py '" +
                          t.path().string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Append(t / "metrics.jsonl", R"({"step": 0, "loss": 0.9})"
                              "\n"
                              R"({"step": 1, "train/acc": 0.05})"
                              "\n");
  const json a = Read(t.path(), "0", true);
  // metrics.jsonl first, then the event files by path: runs/a, then runs/b.
  EXPECT_EQ(a["series"][0]["name"], "loss") << a.dump();
  EXPECT_EQ(Series(a, "loss"), json::parse("[[0, 0.9]]"));
  const json& loss = Series(a, "train/loss");
  ASSERT_EQ(loss.size(), 10u) << a.dump();
  for (int s = 0; s < 10; ++s) {
    EXPECT_EQ(loss[s][0], s);
    EXPECT_FLOAT_EQ(loss[s][1].get<double>(), 1.0F / static_cast<float>(s + 1));
  }
  // A tag a job also writes to metrics.jsonl is one series.
  const json& acc = Series(a, "train/acc");
  ASSERT_EQ(acc.size(), 11u);
  EXPECT_EQ(acc[0], json::parse("[1, 0.05]"));
  EXPECT_FLOAT_EQ(acc[10][1].get<double>(), 0.9F);
  // Scalars written as tensors (a float's float_val, a double's tensor_content); the histogram
  // is not a scalar.
  EXPECT_EQ(Series(a, "eval/score"), json::parse("[[0, 0.5], [5, 0.75]]"));
  EXPECT_EQ(Series(a, "eval/weights"), json::array());
  ASSERT_EQ(a["eventFiles"].size(), 2u);
  EXPECT_TRUE(
      a["eventFiles"][0]["path"].get<std::string>().starts_with("runs/a/events.out.tfevents."));
  EXPECT_EQ(a["eventFiles"][0]["offset"], a["eventFiles"][0]["size"]);
  EXPECT_TRUE(a["complete"]) << a.dump();
  EXPECT_FALSE(a.contains("warning")) << a.dump();
  // From the answer's cursor: nothing new.
  const json again = Read(t.path(), a["cursor"], true);
  EXPECT_EQ(again["series"], json::array());
  EXPECT_TRUE(again["complete"]);
}

TEST(TfEvents, RecordsAreReadWholeFromTheCursorAsTheyAreWritten) {
  TempDir t;
  const fs::path f = t / "tb" / "events.out.tfevents.1.host";
  Append(f, Record(""));  // a record that is no Event's scalars (file_version-like: empty)
  const std::string second = ScalarEvent(1, "loss", 0.5F);
  Append(f, ScalarEvent(0, "loss", 1.0F) + second.substr(0, 20));  // half of the second
  json a = Read(t.path());
  EXPECT_EQ(Series(a, "loss"), json::parse("[[0, 1.0]]"));
  EXPECT_FALSE(a["complete"]);
  const std::string cursor = a["cursor"];
  EXPECT_THAT(cursor, HasSubstr("tb/events.out.tfevents.1.host:"));
  Append(f, second.substr(20));
  a = Read(t.path(), cursor);
  EXPECT_EQ(Series(a, "loss"), json::parse("[[1, 0.5]]"));
  // A byte offset of metrics.jsonl is a cursor too (the event files from their start).
  EXPECT_EQ(Series(Read(t.path(), "0"), "loss").size(), 2u);
}

TEST(TfEvents, CursorsRoundTripAndMalformedOnesAreRefused) {
  MetricsCursor c;
  c.jsonl = 42;
  c.events["a,b:c%d/events.out.tfevents.1"] = 7;
  c.events["runs/x/events.out.tfevents.2"] = 0;
  const auto back = MetricsCursor::Decode(c.Encode());
  ASSERT_TRUE(back) << c.Encode();
  EXPECT_EQ(back->jsonl, 42);
  EXPECT_EQ(back->events, c.events);
  EXPECT_EQ(MetricsCursor::Decode("123")->jsonl, 123);
  for (const char* bad :
       {"", "x", "-1", "1,", "1,a", "1,a:", "1,:3", "1,a%2:3", "1,a%zz:3", "99999999999999999999"})
    EXPECT_FALSE(MetricsCursor::Decode(bad)) << bad;
}

TEST(TfEvents, HostileFilesAreReadNoFurtherThanTheirLastGoodRecordWithAReason) {
  TempDir t;
  // A bad CRC in a header: not read past it; the records before it are.
  Append(t / "a" / "events.out.tfevents.bad-header",
         ScalarEvent(0, "a", 1.0F) + std::string(16, 'x') + ScalarEvent(1, "a", 2.0F));
  // A bad CRC over the data: that record skipped, the next read.
  std::string corrupt = ScalarEvent(0, "b", 1.0F);
  corrupt[14] ^= 1;
  Append(t / "b" / "events.out.tfevents.bad-data", corrupt + ScalarEvent(1, "b", 2.0F));
  // A length of 2^62 with a correct CRC: refused without reading (or allocating) it.
  const std::string huge = Le(uint64_t{1} << 62, 8);
  Append(t / "c" / "events.out.tfevents.huge", huge + Le(MaskedCrc32c(huge), 4) + "abc");
  // Cut in the middle of a record (the writer died): the whole records are read.
  Append(t / "d" / "events.out.tfevents.cut",
         ScalarEvent(0, "d", 1.0F) + std::string("\x20\0\0", 3));
  // Not TensorBoard at all.
  Append(t / "e" / "events.out.tfevents.text", "hello, I am not an event file at all\n");

  const json a = Read(t.path(), "0", true);
  EXPECT_EQ(Series(a, "a"), json::parse("[[0, 1.0]]")) << a.dump();
  EXPECT_EQ(Series(a, "b"), json::parse("[[1, 2.0]]"));
  EXPECT_EQ(Series(a, "d"), json::parse("[[0, 1.0]]"));
  const std::string w = a.value("warning", "");
  EXPECT_THAT(w,
              HasSubstr("a/events.out.tfevents.bad-header: bad CRC in the record header at byte"));
  EXPECT_THAT(w, HasSubstr("b/events.out.tfevents.bad-data: a record with a bad CRC at byte 0 "
                           "was skipped"));
  EXPECT_THAT(w, HasSubstr("c/events.out.tfevents.huge: a record of 4611686018427387904 bytes"));
  EXPECT_THAT(w, HasSubstr("d/events.out.tfevents.cut: ends in an incomplete record"));
  EXPECT_THAT(w, HasSubstr("e/events.out.tfevents.text: bad CRC in the record header at byte 0"));
  // The job has ended and nothing more can be read: complete, not waiting forever.
  EXPECT_TRUE(a["complete"]) << a.dump();
}

TEST(TfEvents, LimitsOnRecordsBytesFilesAndWhereTheyAreLookedFor) {
  TempDir t;
  MetricsLimits limits;
  limits.max_record = 100;
  limits.max_chunk = 300;
  limits.max_event_files = 2;
  limits.max_event_depth = 2;
  tfevents::Event big;
  big.set_step(3);
  big.mutable_summary()->add_value()->set_tag(std::string(150, 'x'));  // a record over 100 bytes
  std::string records = Record(big.SerializeAsString());
  for (int i = 0; i < 20; ++i)
    records += ScalarEvent(i, "loss", static_cast<float>(i));
  Append(t / "1" / "events.out.tfevents.1", records);
  Append(t / "2" / "events.out.tfevents.2", ScalarEvent(0, "two", 2.0F));
  Append(t / "3" / "events.out.tfevents.3", ScalarEvent(0, "three", 3.0F));  // the third file
  Append(t / "x" / "y" / "z" / "events.out.tfevents.deep", ScalarEvent(0, "deep", 1.0F));

  // 300 bytes per answer: the long record is skipped unread, the rest comes over several answers.
  json a = Read(t.path(), "0", true, limits);
  EXPECT_TRUE(a["more"]) << a.dump();
  EXPECT_FALSE(a["complete"]);
  EXPECT_THAT(a.value("warning", ""), HasSubstr("was skipped"));
  EXPECT_THAT(a.value("warning", ""), HasSubstr("more than 2 TensorBoard event files"));
  size_t points = Series(a, "loss").size();
  for (int n = 0; n < 20 && a["more"]; ++n) {
    a = Read(t.path(), a["cursor"], true, limits);
    points += Series(a, "loss").size();
  }
  EXPECT_EQ(points, 20u);
  EXPECT_TRUE(a["complete"]) << a.dump();
  EXPECT_EQ(Series(Read(t.path(), "0", true), "three").size(), 1u);  // with the default limits
  EXPECT_EQ(Series(Read(t.path(), "0", true), "deep").size(), 1u);
  EXPECT_EQ(Series(Read(t.path(), "0", true, limits), "deep").size(), 0u);  // 3 levels down

  std::string warning;
  EXPECT_LE(FindEventFiles(t.path(), 4, 6, 16, &warning).size(), 2u);  // 6 entries looked at
  EXPECT_THAT(warning, HasSubstr("more than 6 entries"));
}

TEST(TfEvents, NeitherASymlinkNorAFifoIsFollowedOrRead) {
  TempDir t;
  TempDir outside;
  Append(outside / "events.out.tfevents.secret", ScalarEvent(0, "secret", 1.0F));
  const fs::path job = t / "job";
  fs::create_directories(job);
  fs::create_directory_symlink(outside.path(), job / "linked-dir");
  fs::create_symlink(outside / "events.out.tfevents.secret", job / "events.out.tfevents.link");
  ASSERT_EQ(::mkfifo((job / "events.out.tfevents.fifo").c_str(), 0600), 0);
  const json a = Read(job, "0", true);
  EXPECT_EQ(a["series"], json::array()) << a.dump();
  EXPECT_EQ(a["eventFiles"], json::array());
  // A path swapped for a symlink after it was found is not read through either.
  Append(job / "runs" / "events.out.tfevents.1", ScalarEvent(0, "ok", 1.0F));
  std::string warning;
  const auto files = FindJobEventFiles(job, {}, &warning);
  ASSERT_EQ(files.size(), 1u);
  fs::remove_all(job / "runs");
  fs::create_directory_symlink(outside.path(), job / "runs");
  fs::rename(outside / "events.out.tfevents.secret", outside / "events.out.tfevents.1");
  const json b = ReadJobMetrics(job, {}, files, true);
  EXPECT_EQ(b["series"], json::array()) << b.dump();
}

}  // namespace
}  // namespace starforge::api
