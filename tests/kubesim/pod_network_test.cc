// kubesim's pod network across processes: kubesims running side by side on one machine (parallel
// tests, a loop beside a unit test) give their pods addresses from different blocks of 127/8, so
// two Ray heads never fight over 127.x.y.z:6379.
#include <gmock/gmock.h>

#include "node_fixture.h"

namespace {

using namespace node_test;

const char* kOneNode = R"(
- metadata: {name: node-1}
  status: {allocatable: {cpu: "8", memory: 32Gi}}
)";

std::string RunningPodIp(const Cluster& c, const std::string& name) {
  EXPECT_TRUE(WaitFor([&] { return Phase(c.Pod(name)) == "Running"; })) << c.Log();
  return c.Pod(name)["status"].value("podIP", "");
}

TEST(PodNetwork, SideBySideKubesimsUseDifferentAddressBlocks) {
  Cluster a(kOneNode);
  Cluster b(kOneNode);
  a.Post(kPods, ShPod("p", "sleep 30"));
  b.Post(kPods, ShPod("p", "sleep 30"));
  const std::string ip_a = RunningPodIp(a, "p");
  const std::string ip_b = RunningPodIp(b, "p");
  ASSERT_THAT(ip_a, ::testing::StartsWith("127."));
  ASSERT_THAT(ip_b, ::testing::StartsWith("127."));
  // 127.N.0.1: the first pod of each process, in its own block N.
  EXPECT_NE(ip_a, ip_b);
  EXPECT_NE(ip_a.substr(0, ip_a.find('.', 4)), ip_b.substr(0, ip_b.find('.', 4)));
  EXPECT_THAT(ip_a, ::testing::EndsWith(".0.1"));
  EXPECT_THAT(ip_b, ::testing::EndsWith(".0.1"));
}

}  // namespace
