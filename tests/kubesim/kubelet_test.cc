// kubesim's kubelet against the real binary: pods run as real processes in a mount-namespace
// sandbox; what a client sees (status, events, logs, files on the host, the service proxy) is
// checked as kube-apiserver and the kubelet would show it.
#include <set>

#include "node_fixture.h"
#include "support/net.h"
#include "support/shell.h"

namespace {

using namespace node_test;
using starforge::support::FreePort;
using starforge::support::Shell;

const char* kOneNode = R"(
- metadata: {name: node-1}
  status: {allocatable: {cpu: "8", memory: 32Gi}}
)";

std::string WaitingReason(const json& pod, const std::string& container) {
  json st = ContainerStatus(pod, container);
  if (!st.is_object() || !st.contains("state") || !st["state"].contains("waiting")) return "";
  return st["state"]["waiting"].value("reason", "");
}

json Terminated(const json& pod, const std::string& container) {
  json st = ContainerStatus(pod, container);
  if (!st.is_object() || !st.contains("state") || !st["state"].contains("terminated")) {
    return json();
  }
  return st["state"]["terminated"];
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A file outside any cluster dir (e.g. the image policy), removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    static int n = 0;
    path_ = (fs::temp_directory_path() /
             ("kubelet-test-" + std::to_string(getpid()) + "-" + std::to_string(n++)))
                .string();
    std::ofstream(path_) << text;
  }
  ~TempFile() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Kubelet, ImagePullFailureEventsAndWaitingReasons) {
  TempFile policy("images:\n- busybox:*\n- docker.io/rayproject/ray:2.*\n");
  Cluster k(kOneNode, {"--images", policy.path()});
  ASSERT_GT(k.port(), 0);
  json p = ShPod("nopull", "echo never");
  p["spec"]["containers"][0]["image"] = "registry.example.com/team/missing:1.0";
  const json created = k.Post(kPods, p);
  // Both waiting reasons show up as the kubelet alternates between pulls and back-off. ErrImagePull
  // lasts only until the next sync, so every status write is read from a watch, not polled.
  std::set<std::string> reasons;
  auto c = k.Client();
  std::string buf;
  c.Get(kPods + "?watch=1&timeoutSeconds=30&fieldSelector=metadata.name%3Dnopull&resourceVersion=" +
            created["metadata"].value("resourceVersion", ""),
        [&](const char* data, size_t len) {
          buf.append(data, len);
          for (size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1)) {
            const json ev = json::parse(buf.substr(0, nl), nullptr, false);
            if (!ev.is_object() || !ev.contains("object")) continue;
            const std::string r = WaitingReason(ev["object"], "main");
            if (!r.empty()) reasons.insert(r);
          }
          return reasons.count("ErrImagePull") == 0 || reasons.count("ImagePullBackOff") == 0;
        });
  EXPECT_EQ(reasons, (std::set<std::string>{"ErrImagePull", "ImagePullBackOff"}));
  json pod = k.Pod("nopull");
  EXPECT_EQ(Phase(pod), "Pending");
  const std::string ref = "registry.example.com/team/missing:1.0";
  const std::string err = "rpc error: code = NotFound desc = failed to pull and unpack image \"" +
                          ref + "\": failed to resolve reference \"" + ref + "\": " + ref +
                          ": not found";
  auto failed = k.EventMessages("nopull", "Failed");
  EXPECT_TRUE(Has(k.EventMessages("nopull", "Pulling"), "Pulling image \"" + ref + "\""));
  EXPECT_TRUE(Has(failed, "Failed to pull image \"" + ref + "\": " + err));
  EXPECT_TRUE(Has(failed, "Error: ErrImagePull"));
  EXPECT_TRUE(Has(failed, "Error: ImagePullBackOff"));
  EXPECT_TRUE(Has(k.EventMessages("nopull", "BackOff"), "Back-off pulling image \"" + ref + "\""));
  for (const auto& e : k.Events("nopull")) {
    if (e.value("reason", "") == "Scheduled") continue;
    EXPECT_EQ(e["source"].value("component", ""), "kubelet");
    EXPECT_EQ(e["source"].value("host", ""), "node-1");
    EXPECT_EQ(e["involvedObject"].value("fieldPath", ""), "spec.containers{main}");
    EXPECT_GE(e.value("count", 0), 1);
    if (e.value("reason", "") == "BackOff") {
      EXPECT_EQ(e.value("type", ""), "Normal");
    }
  }
  // An image the policy lists (by glob) runs; an image without a tag is quoted with :latest.
  k.Post(kPods, ShPod("pulls", "echo ok"));
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("pulls")) == "Succeeded"; })) << k.Log();
  EXPECT_TRUE(Has(k.EventMessages("pulls", "Pulled"),
                  "Successfully pulled image \"busybox:1.36\" in 0s (0s including waiting). "
                  "Image size: 0 bytes."));
  json untagged = ShPod("untagged", "true");
  untagged["spec"]["containers"][0]["image"] = "alpine";
  k.Post(kPods, untagged);
  ASSERT_TRUE(WaitFor([&] { return !k.EventMessages("untagged", "Pulling").empty(); }));
  EXPECT_EQ(k.EventMessages("untagged", "Pulling")[0], "Pulling image \"alpine:latest\"");
}

TEST(Kubelet, FailingInitContainerBlocksThePod) {
  Cluster k(kOneNode);
  json p = ShPod("blocked", "echo main ran > /dev/null");
  p["spec"]["initContainers"] =
      json::array({{{"name", "check"},
                    {"image", "busybox:1.36"},
                    {"command", json::array({"sh", "-c", "echo checksum mismatch >&2; exit 1"})}}});
  k.Post(kPods, p);
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("blocked")) == "Failed"; })) << k.Log();
  json pod = k.Pod("blocked");
  json t = Terminated(pod, "check");
  EXPECT_EQ(t.value("exitCode", -1), 1);
  EXPECT_EQ(t.value("reason", ""), "Error");
  EXPECT_EQ(WaitingReason(pod, "main"), "PodInitializing");
  json init = Condition(pod, "Initialized");
  EXPECT_EQ(init.value("status", ""), "False");
  EXPECT_EQ(init.value("reason", ""), "ContainersNotInitialized");
  EXPECT_EQ(init.value("message", ""), "containers with incomplete status: [check]");
  EXPECT_EQ(k.Logs("blocked", "?container=check"), "checksum mismatch\n");
  // The main container never started.
  for (const auto& m : k.EventMessages("blocked", "Started")) {
    EXPECT_EQ(m, "Started container check");
  }
  // kubectl logs without -c on a one-container pod is the main container: still waiting.
  auto c = k.Client();
  auto r = c.Get(kPods + "/blocked/log");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body).value("message", ""),
            "container \"main\" in pod \"blocked\" is waiting to start: PodInitializing");

  // With restartPolicy Always the init container is retried with back-off; the pod stays Pending.
  json again = p;
  again["metadata"]["name"] = "retrying";
  again["spec"]["restartPolicy"] = "Always";
  k.Post(kPods, again);
  ASSERT_TRUE(WaitFor([&] {
    json s = ContainerStatus(k.Pod("retrying"), "check");
    return s.is_object() && s.value("restartCount", 0) >= 1 &&
           WaitingReason(k.Pod("retrying"), "check") == "CrashLoopBackOff";
  })) << k.Pod("retrying").dump();
  EXPECT_EQ(Phase(k.Pod("retrying")), "Pending");
  EXPECT_EQ(WaitingReason(k.Pod("retrying"), "main"), "PodInitializing");
  const std::string uid = k.Pod("retrying")["metadata"].value("uid", "");
  EXPECT_TRUE(
      Has(k.EventMessages("retrying", "BackOff"),
          "Back-off restarting failed container check in pod retrying_default(" + uid + ")"));
}

const std::string kClaims = "/api/v1/namespaces/default/persistentvolumeclaims";

// Binds a claim as kube-controller-manager's PV controller leaves it (kubesim has none).
void BindClaim(const Cluster& k, const std::string& name) {
  k.Patch(kClaims + "/" + name,
          {{"metadata", {{"annotations", {{"pv.kubernetes.io/bind-completed", "yes"}}}}},
           {"spec", {{"volumeName", "pv-" + name}}}});
  k.Patch(kClaims + "/" + name + "/status", {{"status", {{"phase", "Bound"}}}});
}

TEST(Kubelet, VolumesEnvAndWorkingDirAreWhatTheSpecPromises) {
  Cluster k(kOneNode);
  const fs::path storage = k.dir() / "storage-root";
  fs::create_directories(storage);
  // A PVC mapped to a host dir, a ConfigMap, a Secret.
  k.Post(kClaims, {{"apiVersion", "v1"},
                   {"kind", "PersistentVolumeClaim"},
                   {"metadata",
                    {{"name", "storage"},
                     {"annotations", {{"kubesim.starforge.dev/host-path", storage.string()}}}}},
                   {"spec",
                    {{"accessModes", json::array({"ReadWriteMany"})},
                     {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}});
  k.Post(kClaims, {{"apiVersion", "v1"},
                   {"kind", "PersistentVolumeClaim"},
                   {"metadata", {{"name", "scratch"}}},
                   {"spec", {{"accessModes", json::array({"ReadWriteOnce"})}}}});
  BindClaim(k, "storage");
  BindClaim(k, "scratch");
  k.Post("/api/v1/namespaces/default/configmaps",
         {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", "cfg"}}},
          {"data", {{"train.yaml", "lr: 0.1\n"}, {"mode", "fast"}}}});
  k.Post("/api/v1/namespaces/default/secrets", {{"apiVersion", "v1"},
                                                {"kind", "Secret"},
                                                {"metadata", {{"name", "creds"}}},
                                                {"data", {{"token", "czNjcjN0"}}}});  // "s3cr3t"
  const std::string script =
      "set -e; pwd; echo \"pod=$POD ns=$NS uid=$UID_ node=$NODE ip=$IP team=$TEAM mode=$MODE "
      "token=$TOKEN self=$KUBESIM_POD_IP\"; cat /etc/cfg/train.yaml; "
      "echo written-by-pod > /data/out.txt; stat -f -c %T /dev/shm; "
      "df -k /dev/shm | tail -1 | awk '{print $2}'; "
      "touch /etc/cfg/x 2>/dev/null && echo cfg-writable || echo cfg-read-only; "
      "echo scratch > /scratch/s.txt; mkdir -p /starforge-capsule && echo private; "
      "ls /starforge-capsule";
  json p = ShPod("vol", script);
  p["metadata"]["labels"] = {{"team", "ml"}};
  json& c = p["spec"]["containers"][0];
  c["workingDir"] = "/work/dir";
  c["env"] = json::array(
      {{{"name", "POD"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
       {{"name", "NS"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
       {{"name", "UID_"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.uid"}}}}}},
       {{"name", "NODE"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}},
       {{"name", "IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
       {{"name", "TEAM"},
        {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.labels['team']"}}}}}},
       {{"name", "MODE"}, {"valueFrom", {{"configMapKeyRef", {{"name", "cfg"}, {"key", "mode"}}}}}},
       {{"name", "TOKEN"},
        {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}}}}});
  c["volumeMounts"] = json::array({{{"name", "data"}, {"mountPath", "/data"}},
                                   {{"name", "cfg"}, {"mountPath", "/etc/cfg"}},
                                   {{"name", "shm"}, {"mountPath", "/dev/shm"}},
                                   {{"name", "scratch"}, {"mountPath", "/scratch"}}});
  p["spec"]["volumes"] =
      json::array({{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "storage"}}}},
                   {{"name", "cfg"}, {"configMap", {{"name", "cfg"}}}},
                   {{"name", "shm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "64Mi"}}}},
                   {{"name", "scratch"}, {"persistentVolumeClaim", {{"claimName", "scratch"}}}}});
  k.Post(kPods, p);
  ASSERT_TRUE(WaitFor([&] {
    const std::string ph = Phase(k.Pod("vol"));
    return ph == "Succeeded" || ph == "Failed";
  })) << k.Log();
  json pod = k.Pod("vol");
  const std::string logs = k.Logs("vol");
  ASSERT_EQ(Phase(pod), "Succeeded") << logs << pod.dump();
  const std::string ip = pod["status"].value("podIP", "");
  EXPECT_EQ(ip.rfind("127.", 0), 0u) << ip;
  const std::string expected =
      "/work/dir\npod=vol ns=default uid=" + pod["metadata"].value("uid", "") +
      " node=node-1 ip=" + ip + " team=ml mode=fast token=s3cr3t self=" + ip +
      "\nlr: 0.1\ntmpfs\n65536\ncfg-read-only\nprivate\n";
  EXPECT_EQ(logs, expected);
  // Written through the PVC mapped to a host dir, and into <pv-root>/<ns>/<claim>.
  EXPECT_EQ(Slurp(storage / "out.txt"), "written-by-pod\n");
  EXPECT_EQ(Slurp(k.dir() / "pv" / "default" / "scratch" / "s.txt"), "scratch\n");
  // What the container created outside its volumes stayed in its sandbox.
  EXPECT_FALSE(fs::exists("/starforge-capsule"));
  EXPECT_FALSE(fs::exists("/work/dir"));

  // A ConfigMap missing from env: CreateContainerConfigError with the kubelet's message.
  json bad = ShPod("badenv", "true");
  bad["spec"]["containers"][0]["env"] = json::array(
      {{{"name", "X"}, {"valueFrom", {{"configMapKeyRef", {{"name", "nope"}, {"key", "k"}}}}}}});
  k.Post(kPods, bad);
  ASSERT_TRUE(WaitFor(
      [&] { return WaitingReason(k.Pod("badenv"), "main") == "CreateContainerConfigError"; }));
  EXPECT_EQ(ContainerStatus(k.Pod("badenv"), "main")["state"]["waiting"].value("message", ""),
            "configmap \"nope\" not found");
  EXPECT_TRUE(Has(k.EventMessages("badenv", "Failed"), "Error: configmap \"nope\" not found"));

  // A missing PVC: the scheduler places no such pod (kube-scheduler's VolumeBinding PreFilter).
  json unplaced = ShPod("unplaced", "true");
  unplaced["spec"]["volumes"] =
      json::array({{{"name", "d"}, {"persistentVolumeClaim", {{"claimName", "absent"}}}}});
  k.Post(kPods, unplaced);
  ASSERT_TRUE(WaitFor([&] { return !k.EventMessages("unplaced", "FailedScheduling").empty(); }))
      << k.Log();
  EXPECT_EQ(k.EventMessages("unplaced", "FailedScheduling")[0],
            "0/1 nodes are available: persistentvolumeclaim \"absent\" not found. preemption: "
            "0/1 nodes are available: 1 Preemption is not helpful for scheduling.");
  // A pod bound by name (spec.nodeName, no scheduler) reaches the kubelet: FailedMount, and the
  // pod stays ContainerCreating.
  json nopvc = ShPod("nopvc", "true");
  nopvc["spec"]["nodeName"] = "node-1";
  nopvc["spec"]["volumes"] =
      json::array({{{"name", "d"}, {"persistentVolumeClaim", {{"claimName", "absent"}}}}});
  k.Post(kPods, nopvc);
  ASSERT_TRUE(WaitFor([&] { return !k.EventMessages("nopvc", "FailedMount").empty(); }));
  EXPECT_EQ(k.EventMessages("nopvc", "FailedMount")[0],
            "Unable to attach or mount volumes: unmounted volumes=[d], unattached volumes=[d], "
            "failed to process volumes=[d]: error processing PVC default/absent: failed to fetch "
            "PVC from API server: persistentvolumeclaims \"absent\" not found");
  EXPECT_TRUE(
      WaitFor([&] { return WaitingReason(k.Pod("nopvc"), "main") == "ContainerCreating"; }));
  EXPECT_EQ(Phase(k.Pod("nopvc")), "Pending");
  // A missing ConfigMap volume: MountVolume.SetUp failed.
  json nocm = ShPod("nocm", "true");
  nocm["spec"]["volumes"] = json::array({{{"name", "c"}, {"configMap", {{"name", "gone"}}}}});
  k.Post(kPods, nocm);
  ASSERT_TRUE(WaitFor([&] { return !k.EventMessages("nocm", "FailedMount").empty(); }));
  EXPECT_EQ(k.EventMessages("nocm", "FailedMount")[0],
            "MountVolume.SetUp failed for volume \"c\" : configmap \"gone\" not found");
  // Creating the claim lets the bound pod start; the other one waits for the claim to bind.
  k.Post(kClaims, {{"apiVersion", "v1"},
                   {"kind", "PersistentVolumeClaim"},
                   {"metadata", {{"name", "absent"}}},
                   {"spec", {{"accessModes", json::array({"ReadWriteOnce"})}}}});
  EXPECT_TRUE(WaitFor([&] { return Phase(k.Pod("nopvc")) == "Succeeded"; })) << k.Log();
  const std::string unbound =
      "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 "
      "nodes are available: 1 Preemption is not helpful for scheduling.";
  auto scheduled = [&] { return Condition(k.Pod("unplaced"), "PodScheduled"); };
  ASSERT_TRUE(WaitFor([&] { return scheduled().value("message", "") == unbound; }))
      << scheduled().dump();
  EXPECT_EQ(scheduled().value("reason", ""), "Unschedulable");
  EXPECT_EQ(scheduled().value("status", ""), "False");
  BindClaim(k, "absent");
  EXPECT_TRUE(WaitFor([&] { return Phase(k.Pod("unplaced")) == "Succeeded"; })) << k.Log();
}

// The ServiceAccount admission's kube-api-access-… volume is mounted where the pod spec says,
// read-only, inside the container: /var/run is a link to /run, and the mount point is resolved in
// the container's root (it once landed on the host's /run, invisible to the container). kubesim
// issues no tokens: the volume is an empty directory. automountServiceAccountToken: false → none.
TEST(Kubelet, ServiceAccountVolumeIsMountedInsideTheContainer) {
  Cluster k(kOneNode);
  const std::string mounted =
      "grep -q ' /run/secrets/kubernetes.io/serviceaccount ' /proc/self/mountinfo && echo mounted "
      "|| echo not-mounted";
  k.Post(kPods, ShPod("sa", mounted + "; touch /var/run/secrets/kubernetes.io/serviceaccount/x "
                                      "2>/dev/null && echo writable || echo read-only"));
  json quiet = ShPod("quiet", mounted);
  quiet["spec"]["automountServiceAccountToken"] = false;
  k.Post(kPods, quiet);
  for (const char* name : {"sa", "quiet"}) {
    ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod(name)) == "Succeeded"; })) << k.Log();
  }
  const json volumes = k.Pod("sa")["spec"]["volumes"];
  ASSERT_EQ(volumes.size(), 1u) << volumes.dump();
  EXPECT_EQ(volumes[0]["name"].get<std::string>().rfind("kube-api-access-", 0), 0u);
  EXPECT_EQ(k.Logs("sa"), "mounted\nread-only\n");
  EXPECT_FALSE(k.Pod("quiet")["spec"].contains("volumes"));
  EXPECT_EQ(k.Logs("quiet"), "not-mounted\n");
}

TEST(Kubelet, ExitCodesRestartPoliciesAndLogs) {
  Cluster k(kOneNode);
  k.Post(kPods, ShPod("fails", "echo about to fail; exit 3"));
  k.Post(kPods, ShPod("ok", "for i in 1 2 3; do echo line $i; sleep 0.3; done"));
  // Follow streams the log as it is written and ends when the container does.
  std::string followed;
  std::thread follower([&] {
    WaitFor([&] { return Phase(k.Pod("ok")) != "Pending"; });
    auto c = k.Client();
    c.Get(kPods + "/ok/log?follow=true", [&](const char* d, size_t n) {
      followed.append(d, n);
      return true;
    });
  });
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("fails")) == "Failed"; })) << k.Log();
  json t = Terminated(k.Pod("fails"), "main");
  EXPECT_EQ(t.value("exitCode", -1), 3);
  EXPECT_EQ(t.value("reason", ""), "Error");
  EXPECT_EQ(k.Logs("fails"), "about to fail\n");
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("ok")) == "Succeeded"; }));
  follower.join();
  EXPECT_EQ(followed, "line 1\nline 2\nline 3\n");
  EXPECT_EQ(Terminated(k.Pod("ok"), "main").value("reason", ""), "Completed");
  EXPECT_EQ(k.Logs("ok", "?tailLines=1"), "line 3\n");
  json ready = Condition(k.Pod("ok"), "Ready");
  EXPECT_EQ(ready.value("reason", ""), "PodCompleted");

  // A signal is 128+N.
  k.Post(kPods, ShPod("killed", "kill -9 $$$$"));  // "$$" is an escaped "$" in a pod spec
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("killed")) == "Failed"; }));
  EXPECT_EQ(Terminated(k.Pod("killed"), "main").value("exitCode", -1), 137);

  // OnFailure restarts a failing container with back-off (CrashLoopBackOff, lastState, count);
  // each run has its own log and previous=true reads the one before.
  k.Post(kPods, ShPod("flaky", "echo run; exit 2", "OnFailure"));
  ASSERT_TRUE(WaitFor([&] {
    json s = ContainerStatus(k.Pod("flaky"), "main");
    return s.is_object() && s.value("restartCount", 0) >= 2 &&
           WaitingReason(k.Pod("flaky"), "main") == "CrashLoopBackOff";
  })) << k.Pod("flaky").dump();
  json flaky = k.Pod("flaky");
  EXPECT_EQ(Phase(flaky), "Running");
  json s = ContainerStatus(flaky, "main");
  EXPECT_EQ(s["lastState"]["terminated"].value("exitCode", -1), 2);
  const std::string msg = s["state"]["waiting"].value("message", "");
  EXPECT_EQ(msg.rfind("back-off ", 0), 0u) << msg;
  EXPECT_NE(msg.find(" restarting failed container=main pod=flaky_default("), std::string::npos);
  EXPECT_EQ(k.Logs("flaky", "?previous=true"), "run\n");

  // A container without a command cannot run here: kubesim has no image metadata.
  json nocmd = ShPod("nocmd", "");
  nocmd["spec"]["containers"][0].erase("command");
  k.Post(kPods, nocmd);
  ASSERT_TRUE(
      WaitFor([&] { return WaitingReason(k.Pod("nocmd"), "main") == "CreateContainerError"; }));
  EXPECT_NE(ContainerStatus(k.Pod("nocmd"), "main")["state"]["waiting"]
                .value("message", "")
                .find("has no command"),
            std::string::npos);
  // A command not on PATH: StartError as containerd words it.
  json missing = ShPod("missing", "");
  missing["spec"]["containers"][0]["command"] = json::array({"no-such-program-xyz"});
  k.Post(kPods, missing);
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("missing")) == "Failed"; }));
  json st = Terminated(k.Pod("missing"), "main");
  EXPECT_EQ(st.value("reason", ""), "StartError");
  EXPECT_EQ(st.value("exitCode", -1), 128);
  EXPECT_NE(st.value("message", "")
                .find("exec: \"no-such-program-xyz\": executable file not found in $PATH"),
            std::string::npos);
}

TEST(Kubelet, DeletionSendsSigtermThenSigkillAfterTheGracePeriod) {
  Cluster k(kOneNode);
  const fs::path out = k.dir() / "out";
  fs::create_directories(out);
  auto with_out = [&](json p) {
    p["spec"]["containers"][0]["volumeMounts"] =
        json::array({{{"name", "out"}, {"mountPath", "/out"}}});
    p["spec"]["volumes"] = json::array({{{"name", "out"}, {"hostPath", {{"path", out.string()}}}}});
    return p;
  };
  // Handles SIGTERM: writes a marker and exits.
  k.Post(kPods, with_out(ShPod("polite",
                               "trap 'echo got-term > /out/polite; exit 0' TERM; "
                               "echo $$$$ > /out/polite.pid; while true; do sleep 0.1; done",
                               "Always")));
  // Ignores SIGTERM: must be killed after its grace period (1 s).
  json stubborn = with_out(ShPod("stubborn",
                                 "trap '' TERM; echo $$$$ > /out/stubborn.pid; "
                                 "while true; do sleep 0.1; done",
                                 "Always"));
  stubborn["spec"]["terminationGracePeriodSeconds"] = 1;
  k.Post(kPods, stubborn);
  ASSERT_TRUE(WaitFor([&] {
    return fs::exists(out / "polite.pid") && fs::exists(out / "stubborn.pid") &&
           Phase(k.Pod("polite")) == "Running" && Phase(k.Pod("stubborn")) == "Running";
  })) << k.Log();
  EXPECT_EQ(Condition(k.Pod("polite"), "Ready").value("status", ""), "True");
  const pid_t polite = std::stoi(Slurp(out / "polite.pid"));
  const pid_t stubborn_pid = std::stoi(Slurp(out / "stubborn.pid"));
  EXPECT_EQ(kill(polite, 0), 0);

  const auto t0 = std::chrono::steady_clock::now();
  k.Delete(kPods + "/polite");
  k.Delete(kPods + "/stubborn");
  ASSERT_TRUE(WaitFor([&] { return !k.PodExists("polite"); }, std::chrono::seconds(10)));
  EXPECT_EQ(Slurp(out / "polite"), "got-term\n");
  EXPECT_TRUE(Has(k.EventMessages("polite", "Killing"), "Stopping container main"));
  // The stubborn one outlives SIGTERM, then is gone once the grace period is over.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(k.PodExists("stubborn"));
  EXPECT_EQ(kill(stubborn_pid, 0), 0);
  ASSERT_TRUE(WaitFor([&] { return !k.PodExists("stubborn"); }, std::chrono::seconds(10)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(900));
  EXPECT_TRUE(WaitFor([&] { return kill(stubborn_pid, 0) != 0; }, std::chrono::seconds(2)));
  EXPECT_NE(kill(polite, 0), 0);
}

// spec.activeDeadlineSeconds, as the kubelet's active deadline handler enforces it: past the
// deadline (counted from the pod's start) the containers are killed and the pod ends Failed with
// reason DeadlineExceeded, and is NOT deleted; a pod without a deadline runs on.
TEST(Kubelet, ActiveDeadlineFailsThePodAndKillsItsContainers) {
  Cluster k(kOneNode);
  const fs::path out = k.dir() / "out";
  fs::create_directories(out);
  json p =
      ShPod("bounded", "echo $$$$ > /out/bounded.pid; while true; do sleep 0.1; done", "Never");
  p["spec"]["activeDeadlineSeconds"] = 2;
  p["spec"]["terminationGracePeriodSeconds"] = 1;
  p["spec"]["containers"][0]["volumeMounts"] =
      json::array({{{"name", "out"}, {"mountPath", "/out"}}});
  p["spec"]["volumes"] = json::array({{{"name", "out"}, {"hostPath", {{"path", out.string()}}}}});
  k.Post(kPods, p);
  k.Post(kPods, ShPod("unbounded", "while true; do sleep 0.1; done", "Never"));
  ASSERT_TRUE(WaitFor([&] { return fs::exists(out / "bounded.pid"); })) << k.Log();
  const pid_t pid = std::stoi(Slurp(out / "bounded.pid"));
  ASSERT_TRUE(
      WaitFor([&] { return Phase(k.Pod("bounded")) == "Failed"; }, std::chrono::seconds(20)))
      << k.Log();
  const json pod = k.Pod("bounded");
  EXPECT_EQ(pod["status"].value("reason", ""), "DeadlineExceeded");
  EXPECT_EQ(pod["status"].value("message", ""),
            "Pod was active on the node longer than the specified deadline");
  EXPECT_EQ(Condition(pod, "Ready").value("status", ""), "False");
  EXPECT_TRUE(Terminated(pod, "main").is_object()) << pod.dump();
  EXPECT_TRUE(WaitFor([&] { return kill(pid, 0) != 0; }, std::chrono::seconds(5)));
  EXPECT_TRUE(Has(k.EventMessages("bounded", "DeadlineExceeded"),
                  "Pod was active on the node longer than the specified deadline"));
  EXPECT_TRUE(k.PodExists("bounded"));
  EXPECT_EQ(Phase(k.Pod("unbounded")), "Running");
}

TEST(Kubelet, ServiceProxyAndHostsReachAPodServer) {
  Cluster k(kOneNode);
  // A real HTTP server bound to the pod's own address, ready once it answers. Its port is one the
  // kernel hands out, not a well-known one: on the loopback pod network a host program listening
  // on every address (a `forge serve` on 0.0.0.0:8080) holds that port on every pod address too.
  const std::string port = std::to_string(FreePort());
  json server = ShPod("web-0",
                      "mkdir -p /srv && echo hello-from-pod > /srv/index.html && cd /srv && "
                      "exec python3 -m http.server --bind $KUBESIM_POD_IP " +
                          port,
                      "Always");
  server["metadata"]["labels"] = {{"app", "web"}};
  server["spec"]["containers"][0]["ports"] =
      json::array({{{"name", "http"}, {"containerPort", std::stoi(port)}}});
  server["spec"]["containers"][0]["readinessProbe"] = {
      {"httpGet", {{"path", "/index.html"}, {"port", "http"}}}, {"periodSeconds", 1}};
  k.Post("/api/v1/namespaces/default/services",
         {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", {{"name", "web"}}},
          {"spec",
           {{"selector", {{"app", "web"}}},
            {"ports", json::array({{{"name", "web"}, {"port", 80}, {"targetPort", "http"}}})}}}});
  auto c = k.Client();
  auto r = c.Get("/api/v1/namespaces/default/services/web:80/proxy/index.html");
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body).value("message", ""),
            "no endpoints available for service \"web\"");
  k.Post(kPods, server);
  ASSERT_TRUE(WaitFor([&] {
    return Condition(k.Pod("web-0"), "Ready").value("status", "") == "True";
  })) << k.Log()
      << k.Logs("web-0");
  r = c.Get("/api/v1/namespaces/default/services/web:80/proxy/index.html");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello-from-pod\n");

  // Another pod resolves the service through its /etc/hosts and talks to it.
  const std::string ip = k.Pod("web-0")["status"].value("podIP", "");
  k.Post(kPods, ShPod("client",
                      "python3 -c \"import socket; print(*[socket.gethostbyname(n) for n in "
                      "('web', 'web.default', 'web.default.svc', 'web.default.svc.cluster.local', "
                      "'localhost', 'client')])\" || cat /etc/hosts; "
                      // A client retries a refused connection, as a real one would: the server
                      // pod's single listener may be busy with a readiness probe on a busy host.
                      "for i in 1 2 3 4 5; do wget -q -O- http://web:" +
                          port +
                          "/index.html 2>/dev/null "
                          "&& exit 0; sleep 1; done; wget -O- http://web:" +
                          port + "/index.html"));
  ASSERT_TRUE(WaitFor([&] {
    const std::string phase = Phase(k.Pod("client"));
    return phase == "Succeeded" || phase == "Failed";
  })) << k.Log();
  ASSERT_EQ(Phase(k.Pod("client")), "Succeeded")
      << k.Logs("client") << k.Logs("web-0") << k.Pod("client").dump();
  const std::string client_ip = k.Pod("client")["status"].value("podIP", "");
  EXPECT_NE(client_ip, ip);
  EXPECT_EQ(k.Logs("client"), ip + " " + ip + " " + ip + " " + ip + " " + client_ip + " " +
                                  client_ip + "\nhello-from-pod\n")
      << k.Log();
}

TEST(Kubelet, ExecReadinessProbesRunInsideTheContainer) {
  Cluster k(kOneNode);
  // /tmp/ready exists only in the container's own filesystem: the probe must run in there.
  json p = ShPod("probed", "sleep 1; touch /tmp/ready; sleep 30", "Always");
  p["spec"]["containers"][0]["readinessProbe"] = {
      {"exec", {{"command", json::array({"cat", "/tmp/ready"})}}}, {"periodSeconds", 1}};
  k.Post(kPods, p);
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("probed")) == "Running"; })) << k.Log();
  json ready = Condition(k.Pod("probed"), "Ready");
  EXPECT_EQ(ready.value("status", ""), "False");
  EXPECT_EQ(ready.value("reason", ""), "ContainersNotReady");
  EXPECT_EQ(ready.value("message", ""), "containers with unready status: [main]");
  ASSERT_TRUE(WaitFor([&] {
    return Condition(k.Pod("probed"), "Ready").value("status", "") == "True";
  })) << k.Log();
  EXPECT_TRUE(ContainerStatus(k.Pod("probed"), "main").value("ready", false));
  EXPECT_FALSE(fs::exists("/tmp/ready"));
  auto unhealthy = k.EventMessages("probed", "Unhealthy");
  ASSERT_FALSE(unhealthy.empty());
  EXPECT_EQ(unhealthy[0], "Readiness probe failed: cat: /tmp/ready: No such file or directory");
}

TEST(Kubelet, WithoutPrivilegesPodsFailWithAClearMessage) {
  // kubesim as nobody: no mount namespaces, so no sandbox; the pod fails and says why.
  Cluster k(kOneNode, {}, {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  ASSERT_GT(k.port(), 0) << k.Log();
  k.Post(kPods, ShPod("unprivileged", "echo hi"));
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("unprivileged")) == "Failed"; })) << k.Log();
  json pod = k.Pod("unprivileged");
  EXPECT_EQ(pod["status"].value("reason", ""), "SandboxUnavailable");
  const std::string msg = pod["status"].value("message", "");
  EXPECT_EQ(msg,
            "kubesim cannot run containers on this machine: kubesim runs as uid 65534: the "
            "kubelet needs root (mount namespaces, overlayfs)");
  EXPECT_TRUE(Has(k.EventMessages("unprivileged", "FailedCreatePodSandBox"),
                  "Failed to create pod sandbox: " + msg));
  EXPECT_NE(k.Log().find("containers cannot run here"), std::string::npos);
}

TEST(Kubelet, RayRealPutsTheGivenRayFirstOnPathWithSmallRayDefaults) {
  // A stand-in for a virtual environment's bin: its `ray` is found before the emulator's, and
  // Ray's usage stats and object-store cap come as the image's defaults, under the pod's own env.
  const fs::path bin =
      fs::temp_directory_path() / ("kubelet-test-venv-" + std::to_string(getpid()));
  fs::create_directories(bin);
  starforge::support::WriteFile(bin / "ray", "#!/bin/sh\necho \"venv ray $*\"\n");
  fs::permissions(bin / "ray", fs::perms::owner_all);
  Cluster k(kOneNode, {"--ray", "real", "--ray-bin-dir", bin.string()});
  json p = ShPod("real",
                 "ray --version; echo \"$RAY_USAGE_STATS_ENABLED "
                 "$RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES\"");
  p["spec"]["containers"][0]["env"] =
      json::array({{{"name", "RAY_DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES"}, {"value", "5"}}});
  k.Post(kPods, p);
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("real")) == "Succeeded"; })) << k.Log();
  EXPECT_EQ(k.Logs("real"), "venv ray --version\n0 5\n");
  fs::remove_all(bin);
}

TEST(Kubelet, RayRealWithoutRayRefusesToStartNamingTheFix) {
  Cluster k(kOneNode, {"--ray", "real", "--ray-bin-dir", "/nonexistent/bin"});
  ASSERT_TRUE(WaitFor([&] { return k.Log().find("--ray real") != std::string::npos; })) << k.Log();
  EXPECT_NE(k.Log().find("--ray real: no ray program in /nonexistent/bin (scripts/bootstrap "
                         "installs Ray's virtual environment in build/tools/ray-venv"),
            std::string::npos)
      << k.Log();
}

// The core/v1 events with `reason` about pod `name`, summed over their `count`.
int64_t EventCount(const Cluster& k, const std::string& name, const std::string& reason) {
  int64_t n = 0;
  for (const auto& e : k.Events(name)) {
    if (e.value("reason", "") == reason) n += e.value("count", int64_t{1});
  }
  return n;
}

TEST(Kubelet, ConfigMapVolumeCreatedAfterThePodIsWaitedFor) {
  // A long resync, so the pod can only start early through its retry back-off or the ConfigMap
  // waking it; KubeRay's sample lists its RayJob before its ConfigMap, so pods meet this often.
  Cluster k(kOneNode, {"--kubelet-sync-ms", "60000"});
  json p = ShPod("early", "cat /home/ray/samples/sample_code.py; ls -A /opt/creds | wc -l");
  p["spec"]["containers"][0]["volumeMounts"] =
      json::array({{{"name", "code-sample"}, {"mountPath", "/home/ray/samples"}},
                   {{"name", "creds"}, {"mountPath", "/opt/creds"}}});
  p["spec"]["volumes"] = json::array(
      {{{"name", "code-sample"},
        {"configMap",
         {{"name", "ray-job-code-sample"},
          {"items", json::array({{{"key", "sample_code.py"}, {"path", "sample_code.py"}}})}}}},
       // optional: mounted empty while the Secret does not exist.
       {{"name", "creds"}, {"secret", {{"secretName", "absent"}, {"optional", true}}}}});
  k.Post(kPods, p);
  // Warning FailedMount with the kubelet's wording, retried; the container is not started.
  // Retries 0.5 s apart, doubling: the fifth failure comes ~7.5 s in, the next ~8 s later.
  ASSERT_TRUE(WaitFor([&] { return EventCount(k, "early", "FailedMount") >= 5; })) << k.Log();
  EXPECT_EQ(k.EventMessages("early", "FailedMount"),
            std::vector<std::string>{"MountVolume.SetUp failed for volume \"code-sample\" : "
                                     "configmap \"ray-job-code-sample\" not found"});
  json pod = k.Pod("early");
  EXPECT_EQ(Phase(pod), "Pending");
  EXPECT_EQ(WaitingReason(pod, "main"), "ContainerCreating");
  EXPECT_TRUE(k.EventMessages("early", "Started").empty());

  // The next retry is seconds away: the ConfigMap's creation must wake the pod.
  const auto created = std::chrono::steady_clock::now();
  k.Post("/api/v1/namespaces/default/configmaps",
         {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", "ray-job-code-sample"}}},
          {"data", {{"sample_code.py", "print('hello')\n"}}}});
  ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("early")) == "Succeeded"; })) << k.Log();
  const auto waited = std::chrono::steady_clock::now() - created;
  EXPECT_LT(waited, std::chrono::seconds(4));
  EXPECT_EQ(k.Logs("early"), "print('hello')\n0\n");
  EXPECT_EQ(k.EventMessages("early", "Started"),
            std::vector<std::string>{"Started container main"});

  // A missing non-optional Secret is worded the same way.
  json s = ShPod("nosecret", "true");
  s["spec"]["volumes"] = json::array({{{"name", "s"}, {"secret", {{"secretName", "gone"}}}}});
  k.Post(kPods, s);
  ASSERT_TRUE(WaitFor([&] { return !k.EventMessages("nosecret", "FailedMount").empty(); }));
  EXPECT_EQ(k.EventMessages("nosecret", "FailedMount")[0],
            "MountVolume.SetUp failed for volume \"s\" : secret \"gone\" not found");
}

TEST(Kubelet, KubesimsOnOneHostGiveTheirPodsDifferentAddresses) {
  // Two kubesims at once (ctest -j, a test beside a bench): a server in each on its pod's address
  // and the same port; each service proxy must reach its own kubesim's pod.
  Cluster a(kOneNode);
  Cluster b(kOneNode);
  // A port the kernel hands out (not a well-known one a host program may hold on every address).
  const int port = FreePort();
  for (auto* k : {&a, &b}) {
    const std::string who = k == &a ? "a" : "b";
    json server = ShPod("web",
                        "mkdir -p /srv && echo from-" + who +
                            " > /srv/index.html && cd /srv && exec python3 -m http.server "
                            "--bind $KUBESIM_POD_IP " +
                            std::to_string(port),
                        "Always");
    server["metadata"]["labels"] = {{"app", "web"}};
    server["spec"]["containers"][0]["readinessProbe"] = {{"tcpSocket", {{"port", port}}},
                                                         {"periodSeconds", 1}};
    k->Post(kPods, server);
    k->Post(
        "/api/v1/namespaces/default/services",
        {{"apiVersion", "v1"},
         {"kind", "Service"},
         {"metadata", {{"name", "web"}}},
         {"spec", {{"selector", {{"app", "web"}}}, {"ports", json::array({{{"port", port}}})}}}});
  }
  for (auto* k : {&a, &b}) {
    ASSERT_TRUE(WaitFor([&] {
      return Condition(k->Pod("web"), "Ready").value("status", "") == "True";
    })) << k->Log()
        << k->Logs("web");
  }
  const std::string ip_a = a.Pod("web")["status"].value("podIP", "");
  const std::string ip_b = b.Pod("web")["status"].value("podIP", "");
  EXPECT_NE(ip_a, ip_b);
  // Different /16 blocks, so no address of one can be handed out by the other later.
  EXPECT_NE(ip_a.substr(0, ip_a.find('.', 4)), ip_b.substr(0, ip_b.find('.', 4)));
  for (auto* k : {&a, &b}) {
    auto c = k->Client();
    auto r = c.Get("/api/v1/namespaces/default/services/web:" + std::to_string(port) +
                   "/proxy/index.html");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, std::string("from-") + (k == &a ? "a" : "b") + "\n");
    EXPECT_EQ(k->Logs("web").find("Address already in use"), std::string::npos) << k->Logs("web");
  }
}

// --pod-network netns: each pod in a network namespace of its own (lo and an eth0 on a host
// bridge, an address from --pod-cidr), reached from the host (the service proxy) and from
// another pod by service name, sees no host interface, and nothing is left behind.
TEST(Kubelet, NetnsPodsGetPrivateAddressesOnABridgeAndLeaveNothingBehind) {
  std::string pid;
  {
    Cluster k(kOneNode, {"--pod-network", "netns", "--pod-cidr", "10.251.0.0/16"});
    pid = std::to_string(k.pid());
    json server = ShPod("web",
                        "mkdir -p /srv && echo hello > /srv/index.html && cd /srv && "
                        "exec python3 -m http.server --bind 0.0.0.0 8080",
                        "Always");
    server["metadata"]["labels"] = {{"app", "web"}};
    server["spec"]["containers"][0]["readinessProbe"] = {{"tcpSocket", {{"port", 8080}}},
                                                         {"periodSeconds", 1}};
    k.Post(kPods, server);
    k.Post(
        "/api/v1/namespaces/default/services",
        {{"apiVersion", "v1"},
         {"kind", "Service"},
         {"metadata", {{"name", "web"}}},
         {"spec", {{"selector", {{"app", "web"}}}, {"ports", json::array({{{"port", 8080}}})}}}});
    ASSERT_TRUE(WaitFor([&] {
      return Condition(k.Pod("web"), "Ready").value("status", "") == "True";
    })) << k.Log()
        << k.Logs("web");
    const std::string ip = k.Pod("web")["status"].value("podIP", "");
    EXPECT_EQ(ip.rfind("10.251.", 0), 0u) << ip;
    EXPECT_EQ(k.Pod("web")["status"].value("hostIP", ""), "127.0.0.1");  // the Node's InternalIP
    // The host reaches it through the bridge (the service proxy dials the pod's address)...
    auto c = k.Client();
    auto r = c.Get("/api/v1/namespaces/default/services/web:8080/proxy/index.html");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "hello\n");
    // ...and so does another pod, by name; it has lo and eth0 only (netlink's view: /sys stays the
    // host's sysfs), a default route, its own hostname, and a nameserver it can reach (the bridge
    // address: nothing listens there, so names outside /etc/hosts fail at once).
    k.Post(kPods,
           ShPod("client",
                 // The kubelet adds a service's name to /etc/hosts when its own view of the
                 // service and a ready endpoint arrive, as cluster DNS lags the API: retry.
                 "for i in $(seq 100); do wget -q -O- "
                 "http://web.default.svc.cluster.local:8080/index.html && break; sleep 0.1; done; "
                 "ip -o link show | cut -d: -f2 | cut -d@ -f1 | tr -d ' ' | sort | tr '\\n' ' '; "
                 "echo; ip -4 -o addr show eth0 | "
                 "awk '{print $4}'; ip route show default | awk '{print $1, $2, $3}'; hostname; "
                 "grep nameserver /etc/resolv.conf"));
    ASSERT_TRUE(WaitFor([&] { return Phase(k.Pod("client")) == "Succeeded"; })) << k.Log();
    const std::string client_ip = k.Pod("client")["status"].value("podIP", "");
    EXPECT_NE(client_ip, ip);
    EXPECT_EQ(k.Logs("client"), "hello\neth0 lo \n" + client_ip +
                                    "/16\ndefault via 10.251.0.1\nclient\nnameserver 10.251.0.1\n");
    // A deleted pod's namespace goes with it.
    k.Delete(kPods + "/client");
    ASSERT_TRUE(WaitFor([&] { return !k.PodExists("client"); })) << k.Log();
    ASSERT_TRUE(WaitFor([&] {
      return Shell("ip netns list | grep -c '^ks" + pid + "-'").out == "1\n";
    })) << Shell("ip netns list").out;
  }
  // kubesim has exited: no namespace, veth or bridge of it remains.
  EXPECT_EQ(Shell("ip netns list | grep '^ks" + pid + "-'").out, "");
  EXPECT_EQ(Shell("ip -o link show | grep -e 'ksv" + pid + "-' -e 'ksbr" + pid + ":'").out, "");
  EXPECT_EQ(Shell("ip -4 route show 10.251.0.0/16").out, "");
}

}  // namespace
