// Reading driver.log for the API: the last N lines, and following a growing file as SSE.
#include "starforge/api/logs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "api_test_support.h"

namespace starforge::api {
namespace {

using testing::TempDir;

void Append(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::app) << text;
}

TEST(TailOffset, LastLinesWithOrWithoutAFinalNewline) {
  TempDir t;
  const auto f = t / "driver.log";
  EXPECT_EQ(TailOffset(f, 3), 0);  // no file yet
  Append(f, "a\nbb\nccc\n");
  EXPECT_EQ(TailOffset(f, 0), 9);
  EXPECT_EQ(TailOffset(f, 1), 5);
  EXPECT_EQ(TailOffset(f, 2), 2);
  EXPECT_EQ(TailOffset(f, 3), 0);
  EXPECT_EQ(TailOffset(f, 100), 0);
  Append(f, "partial");
  EXPECT_EQ(TailOffset(f, 1), 9);
  EXPECT_EQ(TailOffset(f, 2), 5);
}

TEST(TailOffset, AcrossReadBlocks) {
  TempDir t;
  const auto f = t / "driver.log";
  std::string text;
  for (int i = 0; i < 20000; ++i)
    text += "line " + std::to_string(i) + "\n";
  Append(f, text);
  const int64_t off = TailOffset(f, 15000);
  EXPECT_EQ(text.substr(static_cast<size_t>(off), 11), "line 5000\nl");
}

TEST(LogFollower, CompleteLinesNowThePartialOneAtTheEnd) {
  TempDir t;
  const auto f = t / "driver.log";
  LogFollower follow(f, 0);
  EXPECT_EQ(follow.Poll(false), "");  // no file yet
  Append(f, "step 1\nstep 2\nloss=0.");
  EXPECT_EQ(follow.Poll(false), "id: 14\nevent: log\ndata: step 1\ndata: step 2\n\n");
  EXPECT_EQ(follow.Poll(false), "");  // the line being written waits for its end
  Append(f, "5\n");
  EXPECT_EQ(follow.Poll(false), "id: 23\nevent: log\ndata: loss=0.5\n\n");
  Append(f, "bye");
  EXPECT_EQ(follow.Poll(true), "id: 26\nevent: log\ndata: bye\n\n");
  EXPECT_EQ(follow.offset(), 26);
  EXPECT_EQ(follow.Poll(true), "");
}

TEST(LogFollower, ResumesAtAnOffsetAndClampsOneBeyondTheEnd) {
  TempDir t;
  const auto f = t / "driver.log";
  Append(f, "a\nb\nc\n");
  LogFollower from_b(f, 2);
  EXPECT_EQ(from_b.Poll(false), "id: 6\nevent: log\ndata: b\ndata: c\n\n");
  LogFollower beyond(f, 1000);
  EXPECT_EQ(beyond.Poll(false), "");
  EXPECT_EQ(beyond.offset(), 6);
  Append(f, "d\n");
  EXPECT_EQ(beyond.Poll(false), "id: 8\nevent: log\ndata: d\n\n");
}

TEST(LogFollower, AnEndlessLineIsSentInBoundedPieces) {
  TempDir t;
  const auto f = t / "driver.log";
  Append(f, std::string(LogFollower::kMaxChunk + 10, 'x'));
  LogFollower follow(f, 0);
  const std::string events = follow.Poll(false);
  EXPECT_EQ(follow.offset(), static_cast<int64_t>(LogFollower::kMaxChunk));
  EXPECT_THAT(events, ::testing::StartsWith("id: " + std::to_string(LogFollower::kMaxChunk) +
                                            "\nevent: log\ndata: xxx"));
}

}  // namespace
}  // namespace starforge::api
