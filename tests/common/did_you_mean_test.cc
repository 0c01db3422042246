#include "starforge/common/did_you_mean.h"

#include <gtest/gtest.h>

namespace starforge {
namespace {

const std::vector<std::string> kPoolFields = {
    "name", "gpuSeries", "machines", "gpusPerMachine", "cpusPerMachine", "memoryPerMachine"};

TEST(DidYouMeanTest, EditDistance) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("Name", "name"), 0u);  // case-insensitive
  EXPECT_EQ(EditDistance("gpuPerMachine", "gpusPerMachine"), 1u);
  EXPECT_EQ(EditDistance("flaw", "lawn"), 2u);
}

TEST(DidYouMeanTest, ClosestMatch) {
  EXPECT_EQ(ClosestMatch("gpuPerMachine", kPoolFields), "gpusPerMachine");
  EXPECT_EQ(ClosestMatch("gpus_per_machine", kPoolFields), "gpusPerMachine");
  EXPECT_EQ(ClosestMatch("machine", kPoolFields), "machines");
  EXPECT_EQ(ClosestMatch("NAME", kPoolFields), "name");
  EXPECT_EQ(ClosestMatch("memoryPerMachin", kPoolFields), "memoryPerMachine");
  EXPECT_EQ(ClosestMatch("replicas", kPoolFields), "");
  EXPECT_EQ(ClosestMatch("xy", {"ab"}), "");  // nothing of the word survives
  EXPECT_EQ(ClosestMatch("", kPoolFields), "");
  EXPECT_EQ(ClosestMatch("anything", {}), "");
  // Long words tolerate a third of their length in edits.
  EXPECT_EQ(ClosestMatch("preRunningSecs", {"preRunningSeconds", "runningSeconds"}),
            "preRunningSeconds");
}

TEST(DidYouMeanTest, FirstOfEquallyCloseCandidatesWins) {
  EXPECT_EQ(ClosestMatch("ab", {"ac", "ad"}), "ac");
}

TEST(DidYouMeanTest, Suffix) {
  EXPECT_EQ(DidYouMeanSuffix("kuberey", {"local", "kuberay"}), " (did you mean \"kuberay\"?)");
  EXPECT_EQ(DidYouMeanSuffix("slurm", {"local", "kuberay"}), "");
}

}  // namespace
}  // namespace starforge
