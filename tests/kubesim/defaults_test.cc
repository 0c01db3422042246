// kubesim's defaulting of built-in kinds (apiserver/defaults.h) as pure functions, against what
// kube-apiserver 1.32 stores for the same input (pkg/apis/core/v1/defaults.go, the registry
// strategies and admission plugins named in defaults.h).
#include "apiserver/defaults.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

json Container(const std::string& image, json resources = json()) {
  json c = {{"name", "c"}, {"image", image}};
  if (!resources.is_null()) c["resources"] = resources;
  return c;
}

json PodOf(json containers, json init = json()) {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "p"}}},
              {"spec", {{"containers", containers}}}};
  if (!init.is_null()) pod["spec"]["initContainers"] = init;
  return pod;
}

TEST(KubesimDefaults, PodSpecAndAdmissionFields) {
  json c = Container("rayproject/ray:2.46.0");
  c["ports"] = json::array({{{"containerPort", 6379}}});
  c["env"] = json::array(
      {{{"name", "X"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.nodeName"}}}}}}});
  c["readinessProbe"] = {{"httpGet", {{"port", 8265}}}};
  json pod = kubesim::DefaultPod(PodOf(json::array({c})));
  const json& s = pod["spec"];
  const json& c0 = s["containers"][0];
  EXPECT_EQ(c0["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(c0["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(c0["terminationMessagePolicy"], "File");
  EXPECT_EQ(c0["ports"][0]["protocol"], "TCP");
  EXPECT_EQ(c0["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
  EXPECT_EQ(c0["readinessProbe"],
            json({{"httpGet", {{"port", 8265}, {"path", "/"}, {"scheme", "HTTP"}}},
                  {"timeoutSeconds", 1},
                  {"periodSeconds", 10},
                  {"successThreshold", 1},
                  {"failureThreshold", 3}}));
  EXPECT_EQ(s["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(s["restartPolicy"], "Always");
  EXPECT_EQ(s["securityContext"], json::object());
  EXPECT_EQ(s["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(s["schedulerName"], "default-scheduler");
  EXPECT_EQ(s["enableServiceLinks"], true);
  EXPECT_EQ(s["serviceAccountName"], "default");
  EXPECT_EQ(s["serviceAccount"], "default");
  EXPECT_EQ(s["priority"], 0);
  EXPECT_EQ(s["preemptionPolicy"], "PreemptLowerPriority");
  EXPECT_EQ(s["tolerations"],
            json::parse(R"([{"key":"node.kubernetes.io/not-ready","operator":"Exists",
              "effect":"NoExecute","tolerationSeconds":300},{"key":"node.kubernetes.io/unreachable",
              "operator":"Exists","effect":"NoExecute","tolerationSeconds":300}])"));
  EXPECT_EQ(pod["status"], json({{"phase", "Pending"}, {"qosClass", "BestEffort"}}));
}

TEST(KubesimDefaults, ImagePullPolicyFollowsTheTag) {
  for (const auto& [image, want] : std::vector<std::pair<std::string, std::string>>{
           {"busybox", "Always"},
           {"busybox:latest", "Always"},
           {"busybox:1.36", "IfNotPresent"},
           {"registry:5000/team/img", "Always"},  // the colon is the registry's port
           {"registry:5000/team/img:v2", "IfNotPresent"},
           {"img@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "IfNotPresent"}}) {
    json pod = kubesim::DefaultPod(PodOf(json::array({Container(image)})));
    EXPECT_EQ(pod["spec"]["containers"][0]["imagePullPolicy"], want) << image;
  }
  json given = Container("busybox");
  given["imagePullPolicy"] = "Never";
  EXPECT_EQ(
      kubesim::DefaultPod(PodOf(json::array({given})))["spec"]["containers"][0]["imagePullPolicy"],
      "Never");
}

TEST(KubesimDefaults, PodKeepsWhatTheClientSet) {
  json pod = PodOf(json::array({Container("busybox:1.36")}));
  json& s = pod["spec"];
  s["serviceAccount"] = "legacy";  // the deprecated alias names the account
  s["enableServiceLinks"] = false;
  s["priorityClassName"] = "system-node-critical";
  s["tolerations"] = json::array({{{"operator", "Exists"}}});  // tolerates every taint
  s["dnsPolicy"] = "Default";
  pod = kubesim::DefaultPod(pod);
  EXPECT_EQ(pod["spec"]["serviceAccountName"], "legacy");
  EXPECT_EQ(pod["spec"]["serviceAccount"], "legacy");
  EXPECT_EQ(pod["spec"]["enableServiceLinks"], false);
  EXPECT_EQ(pod["spec"]["priority"], 2000001000);
  EXPECT_EQ(pod["spec"]["tolerations"], json::array({{{"operator", "Exists"}}}));
  EXPECT_EQ(pod["spec"]["dnsPolicy"], "Default");
}

TEST(KubesimDefaults, PodVolumesAndHostNetwork) {
  json pod = PodOf(json::array({Container("busybox:1.36")}));
  pod["spec"]["hostNetwork"] = true;
  pod["spec"]["containers"][0]["ports"] = json::array({{{"containerPort", 8080}}});
  pod["spec"]["volumes"] = json::parse(R"([{"name":"scratch"},
    {"name":"cfg","configMap":{"name":"c"}},{"name":"key","secret":{"secretName":"s"}},
    {"name":"info","downwardAPI":{"items":[{"path":"n","fieldRef":{"fieldPath":"metadata.name"}}]}},
    {"name":"tok","projected":{"sources":[{"serviceAccountToken":{"path":"token"}}]}}])");
  pod = kubesim::DefaultPod(pod);
  const json& v = pod["spec"]["volumes"];
  EXPECT_EQ(v[0]["emptyDir"], json::object());
  EXPECT_EQ(v[1]["configMap"]["defaultMode"], 420);
  EXPECT_EQ(v[2]["secret"]["defaultMode"], 420);
  EXPECT_EQ(v[3]["downwardAPI"]["defaultMode"], 420);
  EXPECT_EQ(v[3]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"], "v1");
  EXPECT_EQ(v[4]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3600);
  EXPECT_EQ(pod["spec"]["containers"][0]["ports"][0]["hostPort"], 8080);
}

TEST(KubesimDefaults, SchedulingGatesGiveTheGatedCondition) {
  json pod = PodOf(json::array({Container("busybox:1.36")}));
  pod["spec"]["schedulingGates"] = json::array({{{"name", "wait"}}});
  pod = kubesim::DefaultPod(pod);
  ASSERT_TRUE(pod["status"]["conditions"].is_array());
  EXPECT_EQ(pod["status"]["conditions"][0]["reason"], "SchedulingGated");
}

TEST(KubesimDefaults, QosClassIsComputedFromCpuAndMemory) {
  auto qos = [](json containers, json init = json()) {
    return kubesim::DefaultPod(PodOf(containers, init))["status"]["qosClass"];
  };
  const json both = {{"limits", {{"cpu", "2"}, {"memory", "4Gi"}}},
                     {"requests", {{"cpu", "2000m"}, {"memory", "4096Mi"}}}};
  // The Ray head: requests = limits (different spellings of the same amounts).
  EXPECT_EQ(qos(json::array({Container("ray:2", both)})), "Guaranteed");
  // Limits only: requests default to them.
  EXPECT_EQ(qos(json::array({Container("ray:2", {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}}})})),
            "Guaranteed");
  EXPECT_EQ(qos(json::array({Container("ray:2", {{"limits", {{"cpu", "1"}}}})})), "Burstable");
  EXPECT_EQ(qos(json::array({Container("ray:2", {{"requests", {{"memory", "1Gi"}}}})})),
            "Burstable");
  EXPECT_EQ(
      qos(json::array({Container("ray:2", {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}},
                                           {"requests", {{"cpu", "500m"}, {"memory", "1Gi"}}}})})),
      "Burstable");
  // Every container counts, init containers too.
  EXPECT_EQ(qos(json::array({Container("ray:2", both), Container("busybox:1")})), "Burstable");
  EXPECT_EQ(qos(json::array({Container("ray:2", both)}), json::array({Container("busybox:1")})),
            "Burstable");
  // Only cpu and memory matter; zero amounts do not count.
  EXPECT_EQ(qos(json::array({Container("ray:2", {{"limits", {{"nvidia.com/gpu", "1"}}}})})),
            "BestEffort");
  EXPECT_EQ(qos(json::array({Container("ray:2", {{"requests", {{"cpu", "0"}}}})})), "BestEffort");
  EXPECT_EQ(qos(json::array({Container("busybox:1")})), "BestEffort");
}

json JobOf(json labels = json(), json tmpl_labels = json()) {
  const json pod_spec = {{"restartPolicy", "Never"},
                         {"containers", json::array({Container("busybox:1.36")})}};
  json job = {{"apiVersion", "batch/v1"},
              {"kind", "Job"},
              {"metadata", {{"name", "sub"}, {"uid", "u-1"}}},
              {"spec", {{"template", {{"spec", pod_spec}}}}}};
  if (!labels.is_null()) job["metadata"]["labels"] = labels;
  if (!tmpl_labels.is_null()) job["spec"]["template"]["metadata"]["labels"] = tmpl_labels;
  return job;
}

TEST(KubesimDefaults, JobSelectorAndLabels) {
  const json kuberay = {{"ray.io/originated-from-crd", "RayJob"}};
  json job = kubesim::DefaultJob(JobOf(kuberay, kuberay));
  const json generated = {{"batch.kubernetes.io/controller-uid", "u-1"},
                          {"batch.kubernetes.io/job-name", "sub"},
                          {"controller-uid", "u-1"},
                          {"job-name", "sub"}};
  json want_tmpl = generated;
  want_tmpl["ray.io/originated-from-crd"] = "RayJob";
  EXPECT_EQ(job["spec"]["selector"],
            json({{"matchLabels", {{"batch.kubernetes.io/controller-uid", "u-1"}}}}));
  EXPECT_EQ(job["spec"]["template"]["metadata"]["labels"], want_tmpl);
  EXPECT_EQ(job["metadata"]["labels"], kuberay);  // the client's labels stay as they are
  EXPECT_EQ(job["spec"]["completions"], 1);
  EXPECT_EQ(job["spec"]["parallelism"], 1);
  EXPECT_EQ(job["spec"]["backoffLimit"], 6);
  EXPECT_EQ(job["spec"]["completionMode"], "NonIndexed");
  EXPECT_EQ(job["spec"]["suspend"], false);
  EXPECT_EQ(job["spec"]["manualSelector"], false);
  EXPECT_EQ(job["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
  EXPECT_EQ(job["status"], json::object());
  // The template gets PodSpec defaults, not the Pod-only ones.
  const json& ts = job["spec"]["template"]["spec"];
  EXPECT_EQ(ts["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(ts["containers"][0]["terminationMessagePath"], "/dev/termination-log");
  EXPECT_FALSE(ts.contains("enableServiceLinks"));
  EXPECT_FALSE(ts.contains("serviceAccountName"));

  // A Job without labels gets its template's, the generated ones included.
  EXPECT_EQ(kubesim::DefaultJob(JobOf())["metadata"]["labels"], generated);
  // Parallelism alone leaves completions unset.
  json par = JobOf();
  par["spec"]["parallelism"] = 3;
  EXPECT_FALSE(kubesim::DefaultJob(par)["spec"].contains("completions"));
}

TEST(KubesimDefaults, JobManualSelectorIsLeftAlone) {
  json job = JobOf(json(), {{"app", "x"}});
  job["spec"]["manualSelector"] = true;
  job["spec"]["selector"] = {{"matchLabels", {{"app", "x"}}}};
  job = kubesim::DefaultJob(job);
  EXPECT_EQ(job["spec"]["selector"], json({{"matchLabels", {{"app", "x"}}}}));
  EXPECT_EQ(job["spec"]["template"]["metadata"]["labels"], json({{"app", "x"}}));
  // A label the client set on the template is kept over the generated value.
  json own = kubesim::DefaultJob(JobOf(json(), {{"job-name", "mine"}}));
  EXPECT_EQ(own["spec"]["template"]["metadata"]["labels"]["job-name"], "mine");
  EXPECT_EQ(own["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"], "sub");
}

json ServiceOf(json spec) {
  return {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "s"}}}, {"spec", spec}};
}

TEST(KubesimDefaults, ServiceClusterIpFamiliesAndPorts) {
  const json svc = ServiceOf(
      {{"selector", {{"app", "x"}}}, {"ports", json::array({{{"name", "http"}, {"port", 80}}})}});
  ASSERT_TRUE(kubesim::ServiceNeedsClusterIp(svc));
  json s = kubesim::DefaultService(svc, json(), "10.96.3.4");
  EXPECT_EQ(s["spec"]["type"], "ClusterIP");
  EXPECT_EQ(s["spec"]["clusterIP"], "10.96.3.4");
  EXPECT_EQ(s["spec"]["clusterIPs"], json::array({"10.96.3.4"}));
  EXPECT_EQ(s["spec"]["ipFamilies"], json::array({"IPv4"}));
  EXPECT_EQ(s["spec"]["ipFamilyPolicy"], "SingleStack");
  EXPECT_EQ(s["spec"]["internalTrafficPolicy"], "Cluster");
  EXPECT_EQ(s["spec"]["sessionAffinity"], "None");
  EXPECT_EQ(s["spec"]["ports"][0],
            json({{"name", "http"}, {"port", 80}, {"protocol", "TCP"}, {"targetPort", 80}}));
  EXPECT_FALSE(s["spec"].contains("externalTrafficPolicy"));
  EXPECT_EQ(s["status"], json({{"loadBalancer", json::object()}}));

  // An update without the allocated fields keeps them.
  json update = svc;
  update["spec"]["ports"][0]["port"] = 81;
  json u = kubesim::DefaultService(update, s, "");
  EXPECT_EQ(u["spec"]["clusterIP"], "10.96.3.4");
  EXPECT_EQ(u["spec"]["clusterIPs"], json::array({"10.96.3.4"}));
  EXPECT_EQ(u["spec"]["ipFamilies"], json::array({"IPv4"}));
  EXPECT_EQ(u["spec"]["ports"][0]["targetPort"], 81);
  EXPECT_FALSE(u.contains("status"));
}

TEST(KubesimDefaults, ServiceKinds) {
  // Headless with a selector: single stack. Headless without one: RequireDualStack, both families.
  json headless = ServiceOf({{"clusterIP", "None"}, {"selector", {{"app", "x"}}}});
  EXPECT_FALSE(kubesim::ServiceNeedsClusterIp(headless));
  json h = kubesim::DefaultService(headless, json(), "");
  EXPECT_EQ(h["spec"]["clusterIPs"], json::array({"None"}));
  EXPECT_EQ(h["spec"]["ipFamilies"], json::array({"IPv4"}));
  EXPECT_EQ(h["spec"]["ipFamilyPolicy"], "SingleStack");
  json bare = kubesim::DefaultService(ServiceOf({{"clusterIP", "None"}}), json(), "");
  EXPECT_EQ(bare["spec"]["ipFamilyPolicy"], "RequireDualStack");
  EXPECT_EQ(bare["spec"]["ipFamilies"], json::array({"IPv4", "IPv6"}));
  // ExternalName: no addresses, families or internal policy.
  json ext = ServiceOf({{"type", "ExternalName"}, {"externalName", "example.com"}});
  EXPECT_FALSE(kubesim::ServiceNeedsClusterIp(ext));
  json e = kubesim::DefaultService(ext, json(), "");
  for (const char* f : {"clusterIP", "clusterIPs", "ipFamilies", "internalTrafficPolicy"})
    EXPECT_FALSE(e["spec"].contains(f)) << f;
  // NodePort: external traffic policy; ClientIP affinity: the 3 h timeout.
  json np = kubesim::DefaultService(
      ServiceOf({{"type", "NodePort"}, {"sessionAffinity", "ClientIP"}}), json(), "10.96.9.9");
  EXPECT_EQ(np["spec"]["externalTrafficPolicy"], "Cluster");
  EXPECT_EQ(np["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"], 10800);
  // A client-chosen address is kept; a string targetPort too.
  json fixed = kubesim::DefaultService(
      ServiceOf({{"clusterIP", "10.96.0.50"},
                 {"ports", json::array({{{"port", 80}, {"targetPort", "http"}}})}}),
      json(), "");
  EXPECT_EQ(fixed["spec"]["clusterIPs"], json::array({"10.96.0.50"}));
  EXPECT_EQ(fixed["spec"]["ports"][0]["targetPort"], "http");
}

// The ServiceAccount admission plugin's projected token volume, as kube-apiserver 1.32 stores it
// (read back from the real control plane: tests/e2e/real_parity_test.sh).
TEST(KubesimDefaults, ServiceAccountTokenVolumeAndMounts) {
  const std::string path = "/var/run/secrets/kubernetes.io/serviceaccount";
  json pod = PodOf(json::array({Container("busybox:1.36")}), json::array({Container("init:1")}));
  json out = kubesim::MountServiceAccountToken(pod, json(), "kube-api-access-x7k2p");
  const json mount = {{"name", "kube-api-access-x7k2p"}, {"readOnly", true}, {"mountPath", path}};
  EXPECT_EQ(out["spec"]["containers"][0]["volumeMounts"], json::array({mount}));
  EXPECT_EQ(out["spec"]["initContainers"][0]["volumeMounts"], json::array({mount}));
  EXPECT_EQ(out["spec"]["volumes"], json::parse(R"([{"name":"kube-api-access-x7k2p","projected":{
    "defaultMode":420,"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},
    {"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},
    {"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"apiVersion":"v1",
    "fieldPath":"metadata.namespace"}}]}}]}}])"));
  // The pod's false wins; else the account's false; the pod's true beats the account's false.
  json off = pod;
  off["spec"]["automountServiceAccountToken"] = false;
  EXPECT_EQ(kubesim::MountServiceAccountToken(off, json(), "kube-api-access-x7k2p"), off);
  const json quiet_sa = {{"metadata", {{"name", "default"}}},
                         {"automountServiceAccountToken", false}};
  EXPECT_EQ(kubesim::MountServiceAccountToken(pod, quiet_sa, "kube-api-access-x7k2p"), pod);
  json on = pod;
  on["spec"]["automountServiceAccountToken"] = true;
  EXPECT_TRUE(
      kubesim::MountServiceAccountToken(on, quiet_sa, "kube-api-access-x7k2p")["spec"].contains(
          "volumes"));
  // A container that mounts something at the path keeps it; a mirror pod is left alone.
  json own = pod;
  own["spec"]["containers"][0]["volumeMounts"] =
      json::array({{{"name", "mine"}, {"mountPath", path}}});
  json kept = kubesim::MountServiceAccountToken(own, json(), "kube-api-access-x7k2p");
  EXPECT_EQ(kept["spec"]["containers"][0]["volumeMounts"],
            own["spec"]["containers"][0]["volumeMounts"]);
  EXPECT_EQ(kept["spec"]["initContainers"][0]["volumeMounts"], json::array({mount}));
  json mirror = pod;
  mirror["metadata"]["annotations"] = {{"kubernetes.io/config.mirror", "abc"}};
  EXPECT_EQ(kubesim::MountServiceAccountToken(mirror, json(), "kube-api-access-x7k2p"), mirror);
}

TEST(KubesimDefaults, NamespaceAndSecret) {
  json ns = kubesim::DefaultNamespace(
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "team-a"}}}});
  EXPECT_EQ(ns["metadata"]["labels"], json({{"kubernetes.io/metadata.name", "team-a"}}));
  EXPECT_EQ(ns["spec"], json({{"finalizers", json::array({"kubernetes"})}}));
  EXPECT_EQ(ns["status"], json({{"phase", "Active"}}));
  EXPECT_EQ(kubesim::DefaultSecret({{"metadata", {{"name", "s"}}}})["type"], "Opaque");
  EXPECT_EQ(kubesim::DefaultSecret({{"type", "kubernetes.io/tls"}})["type"], "kubernetes.io/tls");
}

}  // namespace
