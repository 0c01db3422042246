// kubesim's protobuf request bodies (apiserver/protobuf.h): what kubectl sends for built-in kinds,
// built here with the same schema (apiserver/k8s.proto), decodes to the JSON object the same
// request would carry; what the subset cannot hold is refused, never dropped.
#include "apiserver/protobuf.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "apiserver/k8s.pb.h"
#include "apiserver/status.h"

using nlohmann::json;

namespace {

std::string Envelope(const std::string& api_version, const std::string& kind,
                     const std::string& raw) {
  kubesim::k8s::Unknown u;
  u.mutable_typemeta()->set_apiversion(api_version);
  u.mutable_typemeta()->set_kind(kind);
  u.set_raw(raw);
  return std::string("k8s\0", 4) + u.SerializeAsString();
}

int CodeOf(const std::string& body, const std::string& api_version, const std::string& kind,
           std::string* message = nullptr) {
  try {
    kubesim::DecodeProtobufBody(body, api_version, kind);
  } catch (const kubesim::ApiError& e) {
    if (message != nullptr) *message = e.message;
    return e.code;
  }
  return 0;
}

TEST(KubesimProtobuf, ConfigMapAsKubectlCreateSendsIt) {
  kubesim::k8s::ConfigMap cm;
  auto* md = cm.mutable_metadata();
  md->set_name("cm");
  md->set_generatename("");  // gogo-protobuf writes empty strings; JSON leaves them out
  md->set_namespace_("parity");
  (*md->mutable_labels())["app"] = "x";
  md->mutable_creationtimestamp()->set_seconds(0);  // zero time: null, left out
  (*cm.mutable_data())["greeting"] = "hello";
  (*cm.mutable_binarydata())["blob"] = std::string("bin\0ary\xff", 8);
  const json got = kubesim::DecodeProtobufBody(Envelope("v1", "ConfigMap", cm.SerializeAsString()),
                                               "v1", "ConfigMap");
  EXPECT_EQ(got, json::parse(R"({"apiVersion":"v1","kind":"ConfigMap",
    "metadata":{"name":"cm","namespace":"parity","labels":{"app":"x"}},
    "data":{"greeting":"hello"},"binaryData":{"blob":"YmluAGFyef8="}})"));
}

TEST(KubesimProtobuf, TimesOwnersAndPointerBooleans) {
  kubesim::k8s::ServiceAccount sa;
  auto* md = sa.mutable_metadata();
  md->set_name("robot");
  md->mutable_creationtimestamp()->set_seconds(1764615600);  // 2025-12-01T19:00:00Z
  auto* owner = md->add_ownerreferences();
  owner->set_apiversion("v1");
  owner->set_kind("Namespace");
  owner->set_name("team");
  owner->set_uid("u-1");
  owner->set_controller(false);
  md->add_finalizers("example.com/keep");
  auto* mf = md->add_managedfields();
  mf->set_manager("kubectl-create");
  mf->mutable_fieldsv1()->set_raw(R"({"f:metadata":{}})");
  sa.set_automountserviceaccounttoken(false);  // *bool: false is said, and kept
  const json got = kubesim::DecodeProtobufBody(
      Envelope("v1", "ServiceAccount", sa.SerializeAsString()), "v1", "ServiceAccount");
  EXPECT_EQ(got["metadata"]["creationTimestamp"], "2025-12-01T19:00:00Z");
  EXPECT_EQ(got["metadata"]["ownerReferences"],
            json::parse(R"([{"apiVersion":"v1","kind":"Namespace","name":"team","uid":"u-1",
              "controller":false}])"));
  EXPECT_EQ(got["metadata"]["finalizers"], json::array({"example.com/keep"}));
  EXPECT_EQ(got["metadata"]["managedFields"][0]["fieldsV1"], json::parse(R"({"f:metadata":{}})"));
  EXPECT_EQ(got["automountServiceAccountToken"], false);

  kubesim::k8s::Event ev;
  ev.mutable_eventtime()->set_seconds(1764615600);
  ev.mutable_eventtime()->set_nanos(123456789);
  const json e =
      kubesim::DecodeProtobufBody(Envelope("v1", "Event", ev.SerializeAsString()), "v1", "Event");
  EXPECT_EQ(e["eventTime"], "2025-12-01T19:00:00.123456Z");
}

// `kubectl create service clusterip s --tcp=80:8080`: gogo-protobuf writes every non-pointer
// field (nodePort 0, publishNotReadyAddresses false); Go's JSON would leave them out, and keep a
// pointer's zero (sessionAffinityConfig.clientIP.timeoutSeconds 0).
TEST(KubesimProtobuf, ServiceWithIntOrStringAndZeroValues) {
  kubesim::k8s::Service svc;
  svc.mutable_metadata()->set_name("s");
  auto* spec = svc.mutable_spec();
  (*spec->mutable_selector())["app"] = "s";
  spec->set_type("ClusterIP");
  spec->set_healthchecknodeport(0);
  spec->set_publishnotreadyaddresses(false);
  spec->mutable_sessionaffinityconfig()->mutable_clientip()->set_timeoutseconds(0);
  auto* p = spec->add_ports();
  p->set_name("80-8080");
  p->set_protocol("TCP");
  p->set_port(80);
  p->mutable_targetport()->set_type(0);
  p->mutable_targetport()->set_intval(8080);
  p->set_nodeport(0);
  auto* named = spec->add_ports();
  named->set_name("dash");
  named->set_port(8265);
  named->mutable_targetport()->set_type(1);
  named->mutable_targetport()->set_strval("dashboard");
  auto* plain = spec->add_ports();
  plain->set_port(6379);
  plain->mutable_targetport();  // zero IntOrString: left out (defaulted to the port)
  svc.mutable_status()->mutable_loadbalancer();
  const json got = kubesim::DecodeProtobufBody(Envelope("v1", "Service", svc.SerializeAsString()),
                                               "v1", "Service");
  EXPECT_EQ(got, json::parse(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},
    "spec":{"ports":[{"name":"80-8080","protocol":"TCP","port":80,"targetPort":8080},
      {"name":"dash","port":8265,"targetPort":"dashboard"},{"port":6379}],
      "selector":{"app":"s"},"type":"ClusterIP",
      "sessionAffinityConfig":{"clientIP":{"timeoutSeconds":0}}},
    "status":{"loadBalancer":{}}})"))
      << got.dump();
}

TEST(KubesimProtobuf, WhatTheSubsetCannotHoldIsRefused) {
  std::string message;
  // A field the subset lacks (number 99 of ConfigMap): 415, not silently dropped.
  kubesim::k8s::ConfigMap cm;
  cm.mutable_metadata()->set_name("cm");
  std::string raw = cm.SerializeAsString() + std::string("\x98\x06\x01", 3);
  EXPECT_EQ(CodeOf(Envelope("v1", "ConfigMap", raw), "v1", "ConfigMap", &message), 415);
  EXPECT_NE(message.find("field number 99 of ConfigMap"), std::string::npos) << message;
  EXPECT_NE(message.find("send the object as JSON"), std::string::npos) << message;
  // Kinds without a message (kubectl run's Pod), or events.k8s.io's Event: 415.
  EXPECT_EQ(CodeOf(Envelope("v1", "Pod", ""), "v1", "Pod", &message), 415);
  EXPECT_NE(message.find("kind Pod (v1) has no message"), std::string::npos) << message;
  EXPECT_EQ(CodeOf(Envelope("events.k8s.io/v1", "Event", ""), "events.k8s.io/v1", "Event"), 415);
  // Another kind than the endpoint's, no envelope, garbage: 400.
  EXPECT_EQ(CodeOf(Envelope("v1", "Secret", ""), "v1", "ConfigMap", &message), 400);
  EXPECT_EQ(message, "the object provided is unrecognized (must be of type ConfigMap): Secret");
  EXPECT_EQ(CodeOf("{\"kind\":\"ConfigMap\"}", "v1", "ConfigMap"), 400);
  EXPECT_EQ(CodeOf(std::string("k8s\0\xff\xff", 6), "v1", "ConfigMap"), 400);
  EXPECT_TRUE(kubesim::IsProtobufContentType("application/vnd.kubernetes.protobuf; charset=x"));
  EXPECT_FALSE(kubesim::IsProtobufContentType("application/json"));
}

}  // namespace
