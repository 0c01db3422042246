// What the local fleet refuses up front, and what it detects of this machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include "fleet_test_support.h"

namespace starforge::fleet {
namespace {

using testing::FleetFixture;
using testing::ScopedEnv;
using testing::SpecYaml;

class AdmitTest : public FleetFixture {
 protected:
  Admission Admit(const std::string& pool, int64_t cpus = 2, int64_t gpus = 0,
                  int64_t memory = 1LL << 30) {
    LocalFleetOptions o = Options(cpus, gpus);
    o.resources.memory_bytes = memory;
    LocalFleet fleet(o, *store_);
    return fleet.Admit(testing::ParseSpec(SpecYaml("python3 main.py", pool)));
  }
};

TEST_F(AdmitTest, AcceptsWhatFits) {
  EXPECT_TRUE(Admit("").possible);
  EXPECT_TRUE(Admit(", cpusPerMachine: \"2\", memoryPerMachine: 1Gi").possible);
  EXPECT_TRUE(Admit(", cpusPerMachine: 1500m").possible);
  EXPECT_TRUE(Admit(", gpuSeries: h200, gpusPerMachine: 2", 2, 2).possible);
}

TEST_F(AdmitTest, RefusesMoreThanOneMachine) {
  Admission a = Admit(", machines: 3");
  EXPECT_FALSE(a.possible);
  EXPECT_EQ(a.message,
            "this job asks for 3 machines; the local fleet is this one machine — use `fleet: "
            "kuberay`");
  EXPECT_EQ(a.field, "pools[0].machines");

  LocalFleet fleet(Options(), *store_);
  Admission two =
      fleet.Admit(testing::ParseSpec("name: two\nimage: python:3.11\nentrypoint: python3 main.py\n"
                                     "pools: [{name: a}, {name: b}]\n"));
  EXPECT_FALSE(two.possible);
  EXPECT_EQ(two.message,
            "this job asks for 2 machines; the local fleet is this one machine — use `fleet: "
            "kuberay`");
  EXPECT_EQ(two.field, "pools[1].machines");
}

TEST_F(AdmitTest, RefusesMoreGpusThanExistAndSaysWhy) {
  {
    ScopedEnv path("PATH", (tmp_.path() / "empty-bin").string());  // no nvidia-smi here
    Admission a = Admit(", gpuSeries: h200, gpusPerMachine: 8");
    EXPECT_FALSE(a.possible);
    EXPECT_EQ(a.message,
              "this job asks for 8 GPUs; this machine has 0 (no nvidia-smi) — use `fleet: "
              "kuberay`");
    EXPECT_EQ(a.field, "pools[0].gpusPerMachine");
  }
  Admission b = Admit(", gpuSeries: h200, gpusPerMachine: 4", 2, 2);
  EXPECT_EQ(b.message, "this job asks for 4 GPUs; this machine has 2 — use `fleet: kuberay`");
}

TEST_F(AdmitTest, RefusesMoreCpusOrMemoryThanThisMachineHas) {
  Admission cpus = Admit(", cpusPerMachine: \"64\"");
  EXPECT_FALSE(cpus.possible);
  EXPECT_EQ(cpus.message,
            "this job asks for 64 CPUs; this machine has 2 — lower cpusPerMachine or use `fleet: "
            "kuberay`");
  EXPECT_EQ(cpus.field, "pools[0].cpusPerMachine");
  EXPECT_FALSE(Admit(", cpusPerMachine: 2001m").possible);

  Admission memory = Admit(", memoryPerMachine: 256Gi");
  EXPECT_FALSE(memory.possible);
  EXPECT_EQ(memory.message,
            "this job asks for 256Gi of memory; this machine has 1.0 GiB — lower "
            "memoryPerMachine or use `fleet: kuberay`");
  EXPECT_EQ(memory.field, "pools[0].memoryPerMachine");
}

TEST_F(AdmitTest, SubmitRejectsWhatAdmitRefuses) {
  LocalFleet fleet(Options(), *store_);
  SubmitRequest r = PyJob("j-big", "print(1)\n", ", machines: 2");
  SubmitResult s = fleet.Submit(r);
  EXPECT_FALSE(s.status.ok());
  EXPECT_EQ(s.status.reason(), "Rejected");
  EXPECT_FALSE(s.status.retryable());
  EXPECT_THAT(s.status.message(), ::testing::HasSubstr("use `fleet: kuberay`"));
  EXPECT_EQ(fleet.Observe("j-big", "local:j-big", {}).state, State::kUnknown);
}

TEST(StateTest, Names) {
  EXPECT_EQ(ToString(State::kPending), "Pending");
  EXPECT_EQ(ToString(State::kRunning), "Running");
  EXPECT_EQ(ToString(State::kSucceeded), "Succeeded");
  EXPECT_EQ(ToString(State::kFailed), "Failed");
  EXPECT_EQ(ToString(State::kCancelled), "Cancelled");
  EXPECT_EQ(ToString(State::kUnknown), "Unknown");
}

TEST(DetectLocalResourcesTest, SeesThisMachine) {
  const LocalResources r = DetectLocalResources();
  EXPECT_GE(r.cpus, 1);
  EXPECT_LE(r.cpus, ::sysconf(_SC_NPROCESSORS_CONF));
  EXPECT_GT(r.memory_bytes, 64LL << 20);
  EXPECT_GE(r.gpus, 0);
}

TEST(DetectLocalResourcesTest, CountsGpusThatNvidiaSmiLists) {
  testing::TempDir tmp;
  testing::WriteFile(tmp.path() / "nvidia-smi",
                     "#!/bin/sh\n[ \"$1\" = -L ] || exit 2\n"
                     "echo 'GPU 0: NVIDIA H200 (UUID: GPU-aaaa)'\n"
                     "echo 'GPU 1: NVIDIA H200 (UUID: GPU-bbbb)'\n");
  std::filesystem::permissions(tmp.path() / "nvidia-smi", std::filesystem::perms(0755));
  ScopedEnv path("PATH", tmp.path().string() + ":/usr/bin:/bin");
  EXPECT_EQ(DetectLocalResources().gpus, 2);
}

}  // namespace
}  // namespace starforge::fleet
