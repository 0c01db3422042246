// kubesim's scheduler against the real binary: binding, the FailedScheduling message grammar of
// kube-scheduler 1.32 (compared exactly), and retries when nodes change through the API.
#include "node_fixture.h"

namespace {

using namespace node_test;

const char* kFiveNodes = R"(
- metadata: {name: gpu-a, labels: {pool: gpu}}
  status: {allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "1"}}
- metadata: {name: gpu-b, labels: {pool: gpu}}
  status: {allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "1"}}
- metadata: {name: cpu-a, labels: {pool: cpu}}
  status: {allocatable: {cpu: "4", memory: 8Gi}}
- metadata: {name: cpu-b, labels: {pool: cpu}}
  status: {allocatable: {cpu: "4", memory: 8Gi}}
- metadata: {name: cpu-c, labels: {pool: cpu}}
  status: {allocatable: {cpu: "4", memory: 8Gi}}
)";

// A pod that asks for resources (limits = requests) and optionally a pool.
json AskingPod(const std::string& name, const json& limits, const std::string& pool = "") {
  json p = ShPod(name, "sleep 30");
  p["spec"]["containers"][0]["resources"] = {{"limits", limits}};
  if (!pool.empty()) p["spec"]["nodeSelector"] = {{"pool", pool}};
  return p;
}

std::string NodeOf(const Cluster& k, const std::string& pod) {
  json p = k.Pod(pod);
  return p.contains("spec") ? p["spec"].value("nodeName", "") : "";
}

// Waits for the PodScheduled=False condition and returns its message.
std::string UnschedulableMessage(const Cluster& k, const std::string& pod) {
  std::string msg;
  WaitFor([&] {
    json c = Condition(k.Pod(pod), "PodScheduled");
    if (c.value("status", "") != "False") return false;
    EXPECT_EQ(c.value("reason", ""), "Unschedulable");
    msg = c.value("message", "");
    return true;
  });
  return msg;
}

// The message of the pod's PodScheduled condition once it is `want`, or the last one seen. The
// scheduler reads claims through an informer, as kube-scheduler does, so a first attempt can come
// before the informer has a claim's last change; that change requeues the pod, and the message
// then converges.
std::string SettledUnschedulableMessage(const Cluster& k, const std::string& pod,
                                        const std::string& want) {
  std::string msg;
  WaitFor([&] {
    msg = Condition(k.Pod(pod), "PodScheduled").value("message", "");
    return msg == want;
  });
  return msg;
}

TEST(Scheduler, BindsAFittingPodAndSaysSo) {
  Cluster k(kFiveNodes);
  ASSERT_GT(k.port(), 0);
  k.Post(kPods, AskingPod("train", {{"nvidia.com/gpu", "1"}, {"cpu", "2"}}, "gpu"));
  ASSERT_TRUE(WaitFor([&] { return !NodeOf(k, "train").empty(); })) << k.Log();
  const std::string node = NodeOf(k, "train");
  EXPECT_TRUE(node == "gpu-a" || node == "gpu-b") << node;
  json cond = Condition(k.Pod("train"), "PodScheduled");
  EXPECT_EQ(cond.value("status", ""), "True");
  ASSERT_TRUE(WaitFor([&] { return !k.EventMessages("train", "Scheduled").empty(); }));
  EXPECT_EQ(k.EventMessages("train", "Scheduled")[0],
            "Successfully assigned default/train to " + node);
  // The scheduler's events are events.k8s.io events from default-scheduler.
  json list = k.Get("/apis/events.k8s.io/v1/namespaces/default/events");
  bool found = false;
  for (const auto& e : list["items"]) {
    if (e.value("reason", "") != "Scheduled") continue;
    found = true;
    EXPECT_EQ(e.value("reportingController", ""), "default-scheduler");
    EXPECT_EQ(e.value("action", ""), "Binding");
    EXPECT_EQ(e.value("type", ""), "Normal");
    EXPECT_EQ(e["regarding"].value("name", ""), "train");
  }
  EXPECT_TRUE(found);

  // A second pod asking for a GPU takes the other GPU node; a third finds none free.
  k.Post(kPods, AskingPod("train2", {{"nvidia.com/gpu", "1"}}, "gpu"));
  ASSERT_TRUE(WaitFor([&] { return !NodeOf(k, "train2").empty(); }));
  EXPECT_NE(NodeOf(k, "train2"), node);
  k.Post(kPods, AskingPod("train3", {{"nvidia.com/gpu", "1"}}, "gpu"));
  EXPECT_EQ(UnschedulableMessage(k, "train3"),
            "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) didn't match "
            "Pod's node affinity/selector. preemption: 0/5 nodes are available: 2 No preemption "
            "victims found for incoming pod, 3 Preemption is not helpful for scheduling.");
  // Deleting a GPU holder frees its GPU: the pending pod is retried and placed there.
  k.Delete(kPods + "/train", {{"gracePeriodSeconds", 0}});
  ASSERT_TRUE(WaitFor([&] { return NodeOf(k, "train3") == node; })) << k.Log();
}

TEST(Scheduler, InsufficientGpusAndSelectorMismatchHaveTheSchedulersWording) {
  Cluster k(kFiveNodes);
  k.Post(kPods, AskingPod("big", {{"nvidia.com/gpu", "2"}}, "gpu"));
  const std::string msg =
      "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node "
      "affinity/selector. preemption: 0/5 nodes are available: 2 No preemption victims found for "
      "incoming pod, 3 Preemption is not helpful for scheduling.";
  EXPECT_EQ(UnschedulableMessage(k, "big"), msg);
  // The same text in a Warning FailedScheduling event from default-scheduler.
  ASSERT_TRUE(WaitFor([&] { return !k.EventMessages("big", "FailedScheduling").empty(); }));
  json ev = k.Events("big")[0];
  EXPECT_EQ(ev.value("type", ""), "Warning");
  EXPECT_EQ(ev.value("reason", ""), "FailedScheduling");
  EXPECT_EQ(ev.value("message", ""), msg);
  EXPECT_EQ(ev.value("reportingComponent", ""), "default-scheduler");

  // A selector no node has; cpu and memory shortfalls on one node are two reasons, sorted.
  k.Post(kPods, AskingPod("nowhere", {{"cpu", "1"}}, "tpu"));
  EXPECT_EQ(UnschedulableMessage(k, "nowhere"),
            "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.");
  k.Post(kPods, AskingPod("fat", {{"cpu", "8"}, {"memory", "16Gi"}}, "cpu"));
  EXPECT_EQ(UnschedulableMessage(k, "fat"),
            "0/5 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 3 "
            "Insufficient cpu, 3 Insufficient memory. preemption: 0/5 nodes are available: 2 "
            "Preemption is not helpful for scheduling, 3 No preemption victims found for incoming "
            "pod.");

  // Init containers count as max(init, sum of containers): 3 cpu of init on 4-cpu nodes fits,
  // 5 does not, although the containers ask for 1.
  json init = AskingPod("init-heavy", {{"cpu", "1"}}, "cpu");
  init["spec"]["initContainers"] =
      json::array({{{"name", "prep"},
                    {"image", "busybox:1.36"},
                    {"command", json::array({"true"})},
                    {"resources", {{"requests", {{"cpu", "5"}}}, {"limits", {{"cpu", "5"}}}}}}});
  k.Post(kPods, init);
  EXPECT_EQ(UnschedulableMessage(k, "init-heavy"),
            "0/5 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 3 "
            "Insufficient cpu. preemption: 0/5 nodes are available: 2 Preemption is not helpful "
            "for scheduling, 3 No preemption victims found for incoming pod.");

  // Retries do not spam: still one FailedScheduling event for "big" after nodes changed.
  k.Patch(kNodes + "/cpu-a", {{"metadata", {{"labels", {{"touched", "yes"}}}}}});
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_EQ(k.EventMessages("big", "FailedScheduling").size(), 1u);
}

TEST(Scheduler, CordonedNodeThenUncordonViaPatch) {
  Cluster k(R"(
- metadata: {name: only}
  spec: {unschedulable: true}
  status: {allocatable: {cpu: "4", memory: 8Gi}}
)");
  k.Post(kPods, AskingPod("waits", {{"cpu", "1"}}));
  EXPECT_EQ(UnschedulableMessage(k, "waits"),
            "0/1 nodes are available: 1 node(s) were unschedulable. preemption: 0/1 nodes are "
            "available: 1 Preemption is not helpful for scheduling.");
  EXPECT_TRUE(NodeOf(k, "waits").empty());
  // kubectl uncordon is this patch; the scheduler retries on the node update.
  k.Patch(kNodes + "/only", {{"spec", {{"unschedulable", false}}}});
  ASSERT_TRUE(WaitFor([&] { return NodeOf(k, "waits") == "only"; }, std::chrono::seconds(10)))
      << k.Log();
  EXPECT_EQ(Condition(k.Pod("waits"), "PodScheduled").value("status", ""), "True");
}

TEST(Scheduler, TaintsTolerationsNotReadyAndNewNodes) {
  Cluster k(R"(
- metadata: {name: tainted}
  spec: {taints: [{key: dedicated, value: ml, effect: NoSchedule}]}
  status: {allocatable: {cpu: "4", memory: 8Gi}}
- metadata: {name: sick}
  status:
    allocatable: {cpu: "4", memory: 8Gi}
    conditions: [{type: Ready, status: "False", reason: KubeletNotReady}]
)");
  k.Post(kPods, AskingPod("plain", {{"cpu", "1"}}));
  EXPECT_EQ(UnschedulableMessage(k, "plain"),
            "0/2 nodes are available: 1 node(s) had untolerated taint {dedicated: ml}, 1 node(s) "
            "had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/2 nodes are "
            "available: 2 Preemption is not helpful for scheduling.");
  // A toleration for the taint: placed on the tainted node.
  json tolerant = AskingPod("tolerant", {{"cpu", "1"}});
  tolerant["spec"]["tolerations"] = json::array(
      {{{"key", "dedicated"}, {"operator", "Equal"}, {"value", "ml"}, {"effect", "NoSchedule"}}});
  k.Post(kPods, tolerant);
  ASSERT_TRUE(WaitFor([&] { return NodeOf(k, "tolerant") == "tainted"; })) << k.Log();
  // A node created through the API takes the waiting pod.
  k.Post(kNodes, {{"apiVersion", "v1"},
                  {"kind", "Node"},
                  {"metadata", {{"name", "fresh"}}},
                  {"status", {{"allocatable", {{"cpu", "2"}, {"memory", "4Gi"}}}}}});
  ASSERT_TRUE(WaitFor([&] { return NodeOf(k, "plain") == "fresh"; })) << k.Log();
}

// kube-scheduler's VolumeBinding PreFilter: a pod whose claim is lost, being deleted or unbound
// is placed nowhere, whatever the nodes, with its words; a claim the PV controller bound (or
// marked Bound by hand, as kubesim's fixtures do) lets it through.
TEST(Scheduler, ClaimsThatAreNotBoundKeepThePodUnplaced) {
  Cluster k(kFiveNodes);
  const std::string claims = "/api/v1/namespaces/default/persistentvolumeclaims";
  auto claim_pod = [&](const std::string& pod, const std::string& claim) {
    json p = AskingPod(pod, {{"cpu", "1"}});
    p["spec"]["volumes"] =
        json::array({{{"name", "d"}, {"persistentVolumeClaim", {{"claimName", claim}}}}});
    k.Post(kPods, p);
  };
  auto new_claim = [&](const std::string& name, json metadata = json::object()) {
    metadata["name"] = name;
    k.Post(claims, {{"apiVersion", "v1"},
                    {"kind", "PersistentVolumeClaim"},
                    {"metadata", metadata},
                    {"spec", {{"accessModes", json::array({"ReadWriteOnce"})}}}});
  };
  const std::string tail =
      ". preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling.";
  new_claim("lost");
  k.Patch(claims + "/lost", {{"spec", {{"volumeName", "pv-gone"}}}});
  k.Patch(claims + "/lost/status", {{"status", {{"phase", "Lost"}}}});
  claim_pod("on-lost", "lost");
  const std::string lost =
      "0/5 nodes are available: persistentvolumeclaim \"lost\" bound to "
      "non-existent persistentvolume \"pv-gone\"" +
      tail;
  EXPECT_EQ(SettledUnschedulableMessage(k, "on-lost", lost), lost);
  new_claim("going", {{"finalizers", json::array({"kubernetes.io/pvc-protection"})}});
  k.Delete(claims + "/going");
  claim_pod("on-going", "going");
  const std::string going =
      "0/5 nodes are available: persistentvolumeclaim \"going\" is being deleted" + tail;
  EXPECT_EQ(SettledUnschedulableMessage(k, "on-going", going), going);
  new_claim("pending");
  claim_pod("on-pending", "pending");
  const std::string pending =
      "0/5 nodes are available: pod has unbound immediate PersistentVolumeClaims" + tail;
  EXPECT_EQ(SettledUnschedulableMessage(k, "on-pending", pending), pending);
  // The PV controller's binding: spec.volumeName and the bind-completed annotation.
  k.Patch(claims + "/pending",
          {{"metadata", {{"annotations", {{"pv.kubernetes.io/bind-completed", "yes"}}}}},
           {"spec", {{"volumeName", "pv-1"}}}});
  ASSERT_TRUE(WaitFor([&] { return !NodeOf(k, "on-pending").empty(); })) << k.Log();
  new_claim("by-hand");
  claim_pod("on-by-hand", "by-hand");
  UnschedulableMessage(k, "on-by-hand");
  k.Patch(claims + "/by-hand/status", {{"status", {{"phase", "Bound"}}}});
  ASSERT_TRUE(WaitFor([&] { return !NodeOf(k, "on-by-hand").empty(); })) << k.Log();
}

TEST(Scheduler, NoNodesAndTheBindingSubresource) {
  Cluster k("[]");
  k.Post(kPods, AskingPod("lonely", {{"cpu", "1"}}));
  EXPECT_EQ(UnschedulableMessage(k, "lonely"), "no nodes available to schedule pods");

  // pods/binding as kube-apiserver answers it.
  int status = 0;
  json res = k.Post(kPods + "/lonely/binding",
                    {{"apiVersion", "v1"},
                     {"kind", "Binding"},
                     {"metadata", {{"name", "lonely"}}},
                     {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "n1"}}}},
                    &status);
  EXPECT_EQ(status, 201) << res.dump();
  EXPECT_EQ(res.value("status", ""), "Success");
  EXPECT_EQ(NodeOf(k, "lonely"), "n1");
  EXPECT_EQ(Condition(k.Pod("lonely"), "PodScheduled").value("status", ""), "True");
  res = k.Post(kPods + "/lonely/binding",
               {{"apiVersion", "v1"},
                {"kind", "Binding"},
                {"metadata", {{"name", "lonely"}}},
                {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "n2"}}}},
               &status);
  EXPECT_EQ(status, 409);
  EXPECT_EQ(res.value("message", ""),
            "Operation cannot be fulfilled on pods/binding \"lonely\": pod lonely is already "
            "assigned to node \"n1\"");
  res = k.Post(kPods + "/ghost/binding",
               {{"apiVersion", "v1"}, {"kind", "Binding"}, {"target", {{"name", "n1"}}}}, &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(res.value("message", ""), "pods \"ghost\" not found");
}

}  // namespace
