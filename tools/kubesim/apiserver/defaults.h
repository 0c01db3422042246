// Defaulting of built-in kinds, as kube-apiserver 1.32 fills fields in on create: the scheme's
// defaulters (k8s.io/kubernetes pkg/apis/core/v1/defaults.go, pkg/apis/batch/v1/defaults.go and
// their generated walkers), the registry strategies' PrepareForCreate (Pod status and qosClass,
// the Job's generated selector, Service cluster IPs and IP families) and the admission plugins
// that add fields (ServiceAccount, Priority, DefaultTolerationSeconds). One pure function per
// kind: the object in, the defaulted object out; no store, no I/O. See docs/kubesim.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kubesim {

// The PodSpec defaults every pod-carrying object gets (SetDefaults_PodSpec and the container,
// port, env fieldRef, probe and volume defaults); Pods get more (DefaultPod).
nlohmann::json DefaultPodSpec(nlohmann::json spec);

// A Pod on create: DefaultPodSpec, requests from limits, enableServiceLinks, hostNetwork ports,
// serviceAccountName/serviceAccount "default", priority 0 / PreemptLowerPriority (or a built-in
// system-* class), the not-ready/unreachable NoExecute tolerations (300 s), and status
// {phase: Pending, qosClass[, the SchedulingGated condition]}.
nlohmann::json DefaultPod(nlohmann::json pod);

// The ServiceAccount admission plugin's token volume (plugin/pkg/admission/serviceaccount
// mountServiceAccountToken): unless the pod (first) or its `service_account` (then) says
// automountServiceAccountToken: false, or the pod is a mirror pod, every init container and
// container without a mount at /var/run/secrets/kubernetes.io/serviceaccount gets a read-only
// one of the volume, and the pod gets the volume (named `volume_name`,
// "kube-api-access-<5 random>", unless it already has a "kube-api-access-…" volume): projected,
// defaultMode 420, sources serviceAccountToken {path token, expirationSeconds 3607}, configMap
// kube-root-ca.crt (ca.crt) and downwardAPI metadata.namespace (namespace).
nlohmann::json MountServiceAccountToken(nlohmann::json pod, const nlohmann::json& service_account,
                                        const std::string& volume_name);

// "Guaranteed", "Burstable" or "BestEffort" from the cpu/memory requests and limits of a pod's
// containers and init containers (pkg/apis/core/helper/qos ComputePodQOS).
std::string PodQosClass(const nlohmann::json& pod);

// A batch/v1 Job on create (metadata.name and metadata.uid set): SetDefaults_Job, the template's
// PodSpec defaults, and unless spec.manualSelector the generated selector
// batch.kubernetes.io/controller-uid=<uid> with the controller-uid/job-name labels (both forms) on
// the template, copied to the Job when it has no labels; status {}.
nlohmann::json DefaultJob(nlohmann::json job);

// Whether a Service of this spec gets a cluster IP allocated (ClusterIP, NodePort or
// LoadBalancer without spec.clusterIP / spec.clusterIPs).
bool ServiceNeedsClusterIp(const nlohmann::json& svc);

// A Service on create (`old` null) or update: SetDefaults_Service (type, sessionAffinity, port
// protocol and targetPort, traffic policies), clusterIP/clusterIPs (the allocated `cluster_ip`
// when ServiceNeedsClusterIp, else the old ones on update), ipFamilyPolicy and ipFamilies of a
// single-stack IPv4 cluster, and status {loadBalancer: {}} on create.
nlohmann::json DefaultService(nlohmann::json svc, const nlohmann::json& old,
                              const std::string& cluster_ip);

// A Namespace on create: the kubernetes.io/metadata.name label, spec.finalizers [kubernetes],
// status.phase Active.
nlohmann::json DefaultNamespace(nlohmann::json ns);

// A Secret on create: type Opaque when none is given.
nlohmann::json DefaultSecret(nlohmann::json secret);

}  // namespace kubesim
