// The address arithmetic of kubelet --pod-network netns (node/pod_netns.h): what the pods' range,
// the bridge address and each node's podCIDR are.
#include "node/pod_netns.h"

#include <stdexcept>

#include <gtest/gtest.h>

namespace {

using kubesim::node::FormatIp;
using kubesim::node::GatewayOf;
using kubesim::node::NodePodCidr;
using kubesim::node::ParseCidr;

TEST(PodNetns, RangesNodesAndTheBridgeAddress) {
  const auto cluster = ParseCidr("10.244.0.0/16");
  EXPECT_EQ(cluster.ToString(), "10.244.0.0/16");
  EXPECT_EQ(FormatIp(GatewayOf(cluster)), "10.244.0.1");
  // A /24 per node after the bridge's, as kube-controller-manager's node IPAM hands them out.
  EXPECT_EQ(NodePodCidr(cluster, 0).ToString(), "10.244.1.0/24");
  EXPECT_EQ(NodePodCidr(cluster, 4).ToString(), "10.244.5.0/24");
  EXPECT_TRUE(cluster.Contains(NodePodCidr(cluster, 254).addr));
  EXPECT_THROW(NodePodCidr(cluster, 255), std::invalid_argument);
  EXPECT_FALSE(NodePodCidr(cluster, 0).Contains(GatewayOf(cluster)));
  // A small range: /28s of a /24.
  EXPECT_EQ(NodePodCidr(ParseCidr("192.168.7.0/24"), 1).ToString(), "192.168.7.32/28");
  EXPECT_TRUE(ParseCidr("10.0.0.0/8").Overlaps(cluster));
  EXPECT_FALSE(ParseCidr("10.245.0.0/16").Overlaps(cluster));
}

TEST(PodNetns, BadRangesAreRefusedSayingWhy) {
  auto why = [](const std::string& text) {
    try {
      ParseCidr(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(why("10.244.0.0"), "'10.244.0.0' is not an IPv4 CIDR such as 10.244.0.0/16");
  EXPECT_EQ(why("10.244.1.0/16"),
            "'10.244.1.0/16' has host bits set; the network is 10.244.0.0/16");
  EXPECT_EQ(why("127.0.0.0/8"), "'127.0.0.0/8' is loopback; pick a private range (10.244.0.0/16)");
  EXPECT_EQ(why("10.0.0.0/31"), "'10.0.0.0/31': the prefix length must be 8..30");
}

}  // namespace
