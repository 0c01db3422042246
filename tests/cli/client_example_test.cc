// examples/tiny-train, run directly (no StarForge around it): a real training loop whose loss
// falls, and a checkpoint where the job directory says (or ./checkpoints by hand).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "support/files.h"
#include "support/shell.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
namespace support = starforge::support;
using nlohmann::json;
using support::ReadFile;
using support::TempDir;
using ::testing::HasSubstr;

const std::string kExample = std::string(STARFORGE_SOURCE_DIR) + "/examples/tiny-train";

// Its stdout and stderr together in `out`.
support::Captured Train(const TempDir& tmp, const std::string& env) {
  return support::Capture(
      "env -i PATH=/usr/bin:/bin " + env + " python3 " + kExample + "/train.py --steps 200 2>&1",
      tmp.path());
}

std::vector<double> Losses(const std::string& out) {
  std::vector<double> losses;
  const std::regex re("(^|\n)step ([0-9]+) loss ([0-9.]+)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it)
    losses.push_back(std::stod((*it)[3]));
  return losses;
}

TEST(TinyTrainExample, TheLossFallsAndTheCheckpointGoesToTheJobDirectory) {
  TempDir tmp;
  const support::Captured run = Train(tmp, "FORGE_JOB_DIR=" + (tmp / "job").string());
  ASSERT_EQ(run.code, 0) << run.out;
  const std::vector<double> losses = Losses(run.out);
  ASSERT_EQ(losses.size(), 21u) << run.out;  // step 0, 10, …, 200
  EXPECT_LT(losses.back(), losses.front() / 4) << run.out;
  int rises = 0;
  for (size_t i = 1; i < losses.size(); ++i)
    rises += losses[i] > losses[i - 1];
  EXPECT_LE(rises, 2) << "the loss over the whole dataset falls (nearly) every time\n" << run.out;

  const fs::path checkpoint = tmp.path() / "job/checkpoints/tiny-train-step200.json";
  EXPECT_THAT(run.out, HasSubstr("checkpoint written to " + checkpoint.string() + "\n"));
  const json state = json::parse(ReadFile(checkpoint));
  EXPECT_EQ(state["step"], 200);
  EXPECT_EQ(state["params"]["w1"].size(), 16u);
  EXPECT_NEAR(state["loss"].get<double>(), losses.back(), 1e-3);

  // Deterministic: the same curve every run.
  TempDir again;
  EXPECT_EQ(Losses(Train(again, "FORGE_JOB_DIR=" + (again / "job").string()).out), losses);
}

TEST(TinyTrainExample, ByHandTheCheckpointGoesToTheWorkingDirectory) {
  TempDir tmp;
  const support::Captured run = Train(tmp, "");
  ASSERT_EQ(run.code, 0) << run.out;
  EXPECT_TRUE(fs::exists(tmp.path() / "checkpoints/tiny-train-step200.json")) << run.out;
}

}  // namespace
