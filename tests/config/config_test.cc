#include "starforge/config/config.h"

#include <cstdlib>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace starforge::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// The message of the only error, failing the test when there is not exactly one.
std::string OnlyError(const LoadResult& result) {
  if (result.errors.size() != 1) {
    ADD_FAILURE() << "expected exactly one error, got:\n" << JoinErrors(result.errors);
    return "";
  }
  return result.errors[0].ToString();
}

std::string ErrorFor(const std::string& name, const std::string& value) {
  return OnlyError(Load({{name, value}}));
}

// An endpoint with everything it needs, so that only the endpoint itself is judged.
std::map<std::string, std::string> S3Env(const std::string& endpoint) {
  return {{"FORGE_S3_ENDPOINT", endpoint},
          {"FORGE_S3_BUCKET", "starforge"},
          {"FORGE_S3_ACCESS_KEY", "AKIAEXAMPLE"},
          {"FORGE_S3_SECRET_KEY", "secretsecret"}};
}

LoadResult LoadOne(const std::string& name, const std::string& value) {
  LoadResult result = Load({{name, value}});
  EXPECT_TRUE(result.ok()) << name << "=" << value << ":\n" << JoinErrors(result.errors);
  return result;
}

// ---------------------------------------------------------------------------------------------
// The table and the defaults.

TEST(Settings, ListsEverySettingOnceWithItsDefault) {
  // The spec's settings and the defaults the issue fixes; a change here is a user-visible change.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"FORGE_DEFAULT_FLEET_KIND", "local"},
      {"FORGE_IMAGE_NEMO_RL", ""},
      {"FORGE_NEMO_RL_DIR", "/opt/nemo-rl"},
      {"FORGE_IMAGE_VLLM", ""},
      {"FORGE_LOCAL_VLLM_COMMAND", "vllm"},
      {"FORGE_K8S_API_SERVER", ""},
      {"FORGE_K8S_TOKEN", ""},
      {"FORGE_K8S_CA_FILE", ""},
      {"FORGE_K8S_INSECURE_SKIP_TLS_VERIFY", "false"},
      {"FORGE_K8S_CONTEXT", ""},
      {"FORGE_K8S_NAMESPACE", "starforge"},
      {"FORGE_K8S_GPU_NODE_LABEL", "starforge/gpu-series"},
      {"FORGE_K8S_SHM_SIZE", "64Gi"},
      {"FORGE_STORAGE_ROOT", "/starforge"},
      {"FORGE_STATE_DIR", ""},
      {"FORGE_K8S_STORAGE_PVC", ""},
      {"FORGE_K8S_STORAGE_SHARED", "true"},
      {"FORGE_K8S_CORPUS_PVC", ""},
      {"FORGE_K8S_STORAGE_MOUNT", ""},
      {"FORGE_K8S_GPU_PASSTHROUGH", "true"},
      {"FORGE_K8S_FETCH_IMAGE", ""},
      {"FORGE_K8S_S3_CA_CONFIGMAP", ""},
      {"FORGE_KUBERAY_RAY_VERSION", "2.60.0"},
      {"FORGE_KUBERAY_TTL_SECONDS", "600"},
      {"FORGE_KUBERAY_PRERUNNING_DEADLINE_S", "1800"},
      {"FORGE_KUBERAY_SUBMISSION_MODE", "K8sJobMode"},
      {"FORGE_KUEUE_MAX_WORKER_GROUPS", "6"},
      {"FORGE_CAPSULE_MAX_BYTES", "536870912"},
      {"FORGE_SUBMIT_DEADLINE_S", "1800"},
      {"FORGE_PLAYGROUND_MAX_TTL_S", "28800"},
      {"FORGE_S3_ENDPOINT", ""},
      {"FORGE_S3_BUCKET", ""},
      {"FORGE_S3_ACCESS_KEY", ""},
      {"FORGE_S3_SECRET_KEY", ""},
      {"FORGE_S3_REGION", "us-east-1"},
      {"FORGE_S3_ADDRESSING", "path"},
      {"FORGE_S3_CA_FILE", ""},
      {"FORGE_LISTEN", "127.0.0.1:8080"},
      {"FORGE_SERVER", ""},
      {"FORGE_TOKEN", ""},
  };
  std::vector<std::pair<std::string, std::string>> actual;
  for (const SettingInfo& s : Settings())
    actual.emplace_back(s.name, s.default_value);
  EXPECT_EQ(actual, expected);
}

TEST(Settings, EveryEntryIsDocumentedAndOnlyCredentialsAreSecret) {
  std::set<std::string> secrets;
  for (const SettingInfo& s : Settings()) {
    EXPECT_THAT(s.name, StartsWith("FORGE_"));
    EXPECT_FALSE(s.type.empty()) << s.name;
    EXPECT_FALSE(s.help.empty()) << s.name;
    if (s.secret) {
      secrets.insert(s.name);
      EXPECT_EQ(s.type, "secret");
    }
  }
  EXPECT_EQ(secrets, (std::set<std::string>{"FORGE_K8S_TOKEN", "FORGE_S3_ACCESS_KEY",
                                            "FORGE_S3_SECRET_KEY", "FORGE_TOKEN"}));
}

TEST(Settings, TypesDescribeTheAcceptedValues) {
  std::map<std::string, std::string> types;
  for (const SettingInfo& s : Settings())
    types[s.name] = s.type;
  EXPECT_EQ(types["FORGE_DEFAULT_FLEET_KIND"], "local|kuberay");
  EXPECT_EQ(types["FORGE_KUBERAY_SUBMISSION_MODE"], "K8sJobMode|HTTPMode");
  EXPECT_EQ(types["FORGE_S3_ADDRESSING"], "path|virtual");
  EXPECT_EQ(types["FORGE_KUBERAY_TTL_SECONDS"], "non-negative integer");
  EXPECT_EQ(types["FORGE_KUBERAY_PRERUNNING_DEADLINE_S"], "positive integer");
  EXPECT_EQ(types["FORGE_K8S_STORAGE_SHARED"], "bool");
}

TEST(Load, NothingSetGivesTheDefaults) {
  const LoadResult result = Load({});
  EXPECT_TRUE(result.ok()) << JoinErrors(result.errors);
  EXPECT_THAT(result.warnings, IsEmpty());
  const Config& c = result.config;
  EXPECT_EQ(c.default_fleet_kind, FleetKind::kLocal);
  EXPECT_EQ(c.image_nemo_rl, "");
  EXPECT_EQ(c.nemo_rl_dir, "/opt/nemo-rl");
  EXPECT_EQ(c.k8s_api_server, "");
  EXPECT_TRUE(c.k8s_token.empty());
  EXPECT_FALSE(c.k8s_insecure_skip_tls_verify);
  EXPECT_EQ(c.k8s_namespace, "starforge");
  EXPECT_EQ(c.k8s_gpu_node_label, "starforge/gpu-series");
  EXPECT_EQ(c.k8s_shm_size, "64Gi");
  EXPECT_EQ(c.storage_root, "/starforge");
  EXPECT_TRUE(c.k8s_storage_shared);
  EXPECT_TRUE(c.k8s_gpu_passthrough);
  EXPECT_EQ(c.kuberay_ray_version, "2.60.0");
  EXPECT_EQ(c.kuberay_ttl_seconds, 600);
  EXPECT_EQ(c.kuberay_prerunning_deadline_s, 1800);
  EXPECT_EQ(c.kuberay_submission_mode, SubmissionMode::kK8sJobMode);
  EXPECT_EQ(c.kueue_max_worker_groups, 6);
  EXPECT_EQ(c.capsule_max_bytes, 536870912);
  EXPECT_EQ(c.s3_region, "us-east-1");
  EXPECT_EQ(c.s3_addressing, S3Addressing::kPath);
  EXPECT_EQ(c.listen, "127.0.0.1:8080");
  EXPECT_EQ(c.PodStorageMount(), "/starforge");
}

TEST(Load, EmptyValuesCountAsUnset) {
  std::map<std::string, std::string> env;
  for (const SettingInfo& s : Settings())
    env[s.name] = "";
  const LoadResult result = Load(env);
  EXPECT_TRUE(result.ok()) << JoinErrors(result.errors);
  EXPECT_THAT(result.warnings, IsEmpty());
  EXPECT_EQ(Dump(result.config), Dump(Config{}));
}

TEST(Load, EveryDocumentedDefaultIsAcceptedAndMeansTheSame) {
  for (const SettingInfo& s : Settings()) {
    if (s.default_value.empty()) continue;
    const LoadResult result = LoadOne(s.name, s.default_value);
    EXPECT_EQ(Dump(result.config), Dump(Config{})) << s.name;
  }
}

TEST(Load, TheSpecExampleLoads) {
  // The 配置 block of the spec (seeds/000), with its placeholders filled in.
  const LoadResult result = Load({
      {"FORGE_DEFAULT_FLEET_KIND", "kuberay"},
      {"FORGE_IMAGE_NEMO_RL", "registry.internal/starforge/nemo-rl:v0.7.0"},
      {"FORGE_NEMO_RL_DIR", "/opt/nemo-rl"},
      {"FORGE_K8S_API_SERVER", "https://10.0.0.1:6443"},
      {"FORGE_K8S_TOKEN", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"},
      {"FORGE_K8S_NAMESPACE", "starforge"},
      {"FORGE_K8S_GPU_NODE_LABEL", "starforge/gpu-series"},
      {"FORGE_K8S_SHM_SIZE", "64Gi"},
      {"FORGE_STORAGE_ROOT", "/starforge"},
      {"FORGE_K8S_STORAGE_PVC", "starforge-storage"},
      {"FORGE_K8S_STORAGE_SHARED", "true"},
      {"FORGE_K8S_CORPUS_PVC", "starforge-corpus"},
      {"FORGE_K8S_STORAGE_MOUNT", "/storage"},
      {"FORGE_KUBERAY_RAY_VERSION", "2.55.1"},
      {"FORGE_KUBERAY_TTL_SECONDS", "600"},
      {"FORGE_KUBERAY_PRERUNNING_DEADLINE_S", "1800"},
      {"FORGE_S3_ENDPOINT", "https://s3.internal:9000"},
      {"FORGE_S3_BUCKET", "starforge"},
      {"FORGE_S3_ACCESS_KEY", "AKIAEXAMPLE"},
      {"FORGE_S3_SECRET_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
  });
  ASSERT_TRUE(result.ok()) << JoinErrors(result.errors);
  EXPECT_THAT(result.warnings, IsEmpty());
  const Config& c = result.config;
  EXPECT_EQ(c.default_fleet_kind, FleetKind::kKuberay);
  EXPECT_EQ(c.image_nemo_rl, "registry.internal/starforge/nemo-rl:v0.7.0");
  EXPECT_EQ(c.k8s_api_server, "https://10.0.0.1:6443");
  EXPECT_EQ(c.k8s_token.Reveal(), "eyJhbGciOiJSUzI1NiJ9.e30.c2ln");
  EXPECT_EQ(c.k8s_storage_pvc, "starforge-storage");
  EXPECT_EQ(c.k8s_corpus_pvc, "starforge-corpus");
  EXPECT_EQ(c.PodStorageMount(), "/storage");
  EXPECT_EQ(c.s3_endpoint, "https://s3.internal:9000");
  EXPECT_EQ(c.s3_bucket, "starforge");
  EXPECT_EQ(c.s3_access_key.Reveal(), "AKIAEXAMPLE");
  EXPECT_EQ(c.s3_secret_key.Reveal(), "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
}

TEST(Load, ReportsEveryBadValueInTableOrder) {
  const LoadResult result = Load({
      {"FORGE_LISTEN", "8080"},
      {"FORGE_KUBERAY_TTL_SECONDS", "ten"},
      {"FORGE_K8S_STORAGE_SHARED", "maybe"},
      {"FORGE_DEFAULT_FLEET_KIND", "k8s"},
      {"FORGE_K8S_NAMESPACE", "Star_Forge"},
  });
  ASSERT_EQ(result.errors.size(), 5u) << JoinErrors(result.errors);
  std::vector<std::string> paths;
  for (const FieldError& e : result.errors)
    paths.push_back(e.path);
  EXPECT_THAT(paths,
              ElementsAre("FORGE_DEFAULT_FLEET_KIND", "FORGE_K8S_NAMESPACE",
                          "FORGE_K8S_STORAGE_SHARED", "FORGE_KUBERAY_TTL_SECONDS", "FORGE_LISTEN"));
  EXPECT_FALSE(result.ok());
}

TEST(Load, BadValuesLeaveTheDefaultInPlace) {
  const LoadResult result = Load({{"FORGE_KUBERAY_TTL_SECONDS", "ten"}});
  EXPECT_EQ(result.config.kuberay_ttl_seconds, 600);
}

// ---------------------------------------------------------------------------------------------
// Integers.

// The local playgrounds' vLLM program: a name looked up on PATH or an absolute path, one word.
TEST(Load, TheLocalVllmCommandIsANameOrAnAbsolutePath) {
  EXPECT_EQ(LoadOne("FORGE_LOCAL_VLLM_COMMAND", "vllm").config.local_vllm_command, "vllm");
  EXPECT_EQ(LoadOne("FORGE_LOCAL_VLLM_COMMAND", "/opt/vllm/bin/vllm").config.local_vllm_command,
            "/opt/vllm/bin/vllm");
  EXPECT_NE(ErrorFor("FORGE_LOCAL_VLLM_COMMAND", "bin/vllm").find("absolute path"),
            std::string::npos);
  EXPECT_NE(ErrorFor("FORGE_LOCAL_VLLM_COMMAND", "vllm serve").find("program name"),
            std::string::npos);
}

TEST(Integers, GoodValues) {
  EXPECT_EQ(LoadOne("FORGE_KUBERAY_TTL_SECONDS", "0").config.kuberay_ttl_seconds, 0);
  EXPECT_EQ(LoadOne("FORGE_KUBERAY_TTL_SECONDS", "2147483647").config.kuberay_ttl_seconds,
            2147483647);
  EXPECT_EQ(
      LoadOne("FORGE_KUBERAY_PRERUNNING_DEADLINE_S", "1").config.kuberay_prerunning_deadline_s, 1);
  EXPECT_EQ(LoadOne("FORGE_KUEUE_MAX_WORKER_GROUPS", "8").config.kueue_max_worker_groups, 8);
}

TEST(Integers, BadValuesSayWhatWasExpectedAndWhatWasRead) {
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_TTL_SECONDS", "ten"),
            R"(FORGE_KUBERAY_TTL_SECONDS: expected a non-negative integer, got "ten")");
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_TTL_SECONDS", "-5"),
            R"(FORGE_KUBERAY_TTL_SECONDS: expected a non-negative integer, got "-5")");
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_PRERUNNING_DEADLINE_S", "0"),
            R"(FORGE_KUBERAY_PRERUNNING_DEADLINE_S: expected a positive integer, got "0")");
  EXPECT_EQ(ErrorFor("FORGE_KUEUE_MAX_WORKER_GROUPS", "0"),
            R"(FORGE_KUEUE_MAX_WORKER_GROUPS: expected a positive integer, got "0")");
  for (const char* bad : {"1.5", "600s", " 600", "+600", "6e2", "0x10"}) {
    EXPECT_THAT(ErrorFor("FORGE_KUBERAY_TTL_SECONDS", bad),
                StartsWith("FORGE_KUBERAY_TTL_SECONDS: expected a non-negative integer, got "))
        << bad;
  }
}

TEST(Integers, RayJobFieldsMustFitInAnInt32) {
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_TTL_SECONDS", "2147483648"),
            "FORGE_KUBERAY_TTL_SECONDS: must be at most 2147483647 (the RayJob field is an int32), "
            "got \"2147483648\"");
  EXPECT_THAT(ErrorFor("FORGE_KUBERAY_PRERUNNING_DEADLINE_S", "99999999999999999999999"),
              HasSubstr("must be at most 2147483647"));
}

TEST(Integers, ControlCharactersAreEscapedInTheEcho) {
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_TTL_SECONDS", "600\n"),
            R"(FORGE_KUBERAY_TTL_SECONDS: expected a non-negative integer, got "600\n")");
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_TTL_SECONDS", "\"600\""),
            R"(FORGE_KUBERAY_TTL_SECONDS: expected a non-negative integer, got "\"600\"")");
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_TTL_SECONDS", std::string("6\x01", 2)),
            R"(FORGE_KUBERAY_TTL_SECONDS: expected a non-negative integer, got "6\x01")");
}

TEST(Integers, VeryLongValuesAreCutInTheEcho) {
  const std::string message = ErrorFor("FORGE_KUBERAY_TTL_SECONDS", std::string(5000, 'x'));
  EXPECT_LT(message.size(), 300u);
  EXPECT_THAT(message, HasSubstr("(5000 bytes)"));
}

// ---------------------------------------------------------------------------------------------
// Booleans.

TEST(Bools, AcceptTheUsualSpellingsInAnyCase) {
  for (const char* yes : {"true", "TRUE", "True", "1", "yes", "YES"}) {
    EXPECT_TRUE(
        LoadOne("FORGE_K8S_INSECURE_SKIP_TLS_VERIFY", yes).config.k8s_insecure_skip_tls_verify)
        << yes;
  }
  for (const char* no : {"false", "False", "0", "no", "NO"}) {
    EXPECT_FALSE(LoadOne("FORGE_K8S_STORAGE_SHARED", no).config.k8s_storage_shared) << no;
  }
}

TEST(Bools, AnythingElseIsAnError) {
  EXPECT_EQ(ErrorFor("FORGE_K8S_STORAGE_SHARED", "maybe"),
            R"(FORGE_K8S_STORAGE_SHARED: expected true or false (or 1/0), got "maybe")");
  for (const char* bad : {"on", "off", "2", "y", " true"}) {
    EXPECT_THAT(ErrorFor("FORGE_K8S_GPU_PASSTHROUGH", bad),
                HasSubstr("expected true or false (or 1/0)"))
        << bad;
  }
}

TEST(Bools, GpuPassthroughZeroTurnsItOffWithAWarning) {
  const LoadResult result = LoadOne("FORGE_K8S_GPU_PASSTHROUGH", "0");
  EXPECT_FALSE(result.config.k8s_gpu_passthrough);
  EXPECT_THAT(result.warnings, ElementsAre(HasSubstr("tests only")));
}

// ---------------------------------------------------------------------------------------------
// Choices.

TEST(Choices, FleetKind) {
  EXPECT_EQ(LoadOne("FORGE_DEFAULT_FLEET_KIND", "local").config.default_fleet_kind,
            FleetKind::kLocal);
  EXPECT_EQ(Load({{"FORGE_DEFAULT_FLEET_KIND", "kuberay"}}).config.default_fleet_kind,
            FleetKind::kKuberay);
  EXPECT_EQ(ErrorFor("FORGE_DEFAULT_FLEET_KIND", "k8s"),
            R"(FORGE_DEFAULT_FLEET_KIND: expected local or kuberay, got "k8s")");
  EXPECT_THAT(ErrorFor("FORGE_DEFAULT_FLEET_KIND", "kuberey"),
              HasSubstr(R"(did you mean "kuberay"?)"));
}

TEST(Choices, SubmissionMode) {
  EXPECT_EQ(LoadOne("FORGE_KUBERAY_SUBMISSION_MODE", "HTTPMode").config.kuberay_submission_mode,
            SubmissionMode::kHTTPMode);
  EXPECT_EQ(LoadOne("FORGE_KUBERAY_SUBMISSION_MODE", "K8sJobMode").config.kuberay_submission_mode,
            SubmissionMode::kK8sJobMode);
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_SUBMISSION_MODE", "Bogus"),
            R"(FORGE_KUBERAY_SUBMISSION_MODE: expected K8sJobMode or HTTPMode, got "Bogus")");
}

TEST(Choices, SubmissionModesStarForgeCannotDriveAreRefusedWithTheReason) {
  const std::string interactive = ErrorFor("FORGE_KUBERAY_SUBMISSION_MODE", "InteractiveMode");
  EXPECT_THAT(interactive, HasSubstr("InteractiveMode is not supported"));
  EXPECT_THAT(interactive, HasSubstr("by hand"));
  EXPECT_THAT(interactive, HasSubstr("use K8sJobMode or HTTPMode"));
  const std::string sidecar = ErrorFor("FORGE_KUBERAY_SUBMISSION_MODE", "SidecarMode");
  EXPECT_THAT(sidecar, HasSubstr("SidecarMode is not supported"));
  EXPECT_THAT(sidecar, HasSubstr("use K8sJobMode or HTTPMode"));
}

TEST(Choices, S3Addressing) {
  EXPECT_EQ(LoadOne("FORGE_S3_ADDRESSING", "virtual").config.s3_addressing, S3Addressing::kVirtual);
  EXPECT_EQ(ErrorFor("FORGE_S3_ADDRESSING", "vhost"),
            R"(FORGE_S3_ADDRESSING: expected path or virtual, got "vhost")");
}

TEST(Choices, EnumNamesRoundTrip) {
  EXPECT_EQ(ToString(FleetKind::kLocal), "local");
  EXPECT_EQ(ToString(FleetKind::kKuberay), "kuberay");
  EXPECT_EQ(ToString(SubmissionMode::kK8sJobMode), "K8sJobMode");
  EXPECT_EQ(ToString(SubmissionMode::kHTTPMode), "HTTPMode");
  EXPECT_EQ(ToString(S3Addressing::kPath), "path");
  EXPECT_EQ(ToString(S3Addressing::kVirtual), "virtual");
  EXPECT_EQ(ParseFleetKind("local"), FleetKind::kLocal);
  EXPECT_EQ(ParseFleetKind("kuberay"), FleetKind::kKuberay);
  EXPECT_EQ(ParseFleetKind("KubeRay"), std::nullopt);
  EXPECT_EQ(ParseFleetKind(""), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// Paths pasted into shells and pod specs.

TEST(Paths, AbsoluteSafePathsAreAcceptedAndTrailingSlashesDropped) {
  EXPECT_EQ(LoadOne("FORGE_STORAGE_ROOT", "/data/star-forge_1.2").config.storage_root,
            "/data/star-forge_1.2");
  EXPECT_EQ(LoadOne("FORGE_STORAGE_ROOT", "/mnt/sf/").config.storage_root, "/mnt/sf");
  EXPECT_EQ(LoadOne("FORGE_K8S_STORAGE_MOUNT", "/storage").config.PodStorageMount(), "/storage");
  EXPECT_EQ(LoadOne("FORGE_NEMO_RL_DIR", "/workspace/nemo-rl").config.nemo_rl_dir,
            "/workspace/nemo-rl");
}

TEST(Paths, MustBeAbsolute) {
  EXPECT_EQ(ErrorFor("FORGE_STORAGE_ROOT", "starforge"),
            R"(FORGE_STORAGE_ROOT: expected an absolute path (starting with /), got "starforge")");
  EXPECT_THAT(ErrorFor("FORGE_NEMO_RL_DIR", "~/nemo-rl"), HasSubstr("expected an absolute path"));
}

TEST(Paths, ShellMetacharactersAreRefusedWithTheReason) {
  for (const char* bad :
       {"/my data", "/a\tb", "/it's", "/a\"b", "/a$HOME", "/a`id`", "/a\\b", "/a;b", "/a*b"}) {
    for (const char* name :
         {"FORGE_STORAGE_ROOT", "FORGE_K8S_STORAGE_MOUNT", "FORGE_NEMO_RL_DIR"}) {
      EXPECT_THAT(ErrorFor(name, bad), HasSubstr("pasted into shell commands and pod specs"))
          << name << "=" << bad;
    }
  }
  EXPECT_EQ(ErrorFor("FORGE_STORAGE_ROOT", "/my data"),
            "FORGE_STORAGE_ROOT: must contain only letters, digits and / . _ - + @ , = because it "
            "is pasted into shell commands and pod specs, where whitespace, quotes, '$', '`', '\\' "
            "and the like would change its meaning, got \"/my data\"");
}

TEST(Paths, RootAndDotDotAreRefused) {
  EXPECT_EQ(ErrorFor("FORGE_STORAGE_ROOT", "/"),
            R"(FORGE_STORAGE_ROOT: must be a directory below /, got "/")");
  EXPECT_THAT(ErrorFor("FORGE_K8S_STORAGE_MOUNT", "//"), HasSubstr("must be a directory below /"));
  EXPECT_THAT(ErrorFor("FORGE_K8S_STORAGE_MOUNT", "/data/../etc"), HasSubstr("\"..\""));
  EXPECT_THAT(ErrorFor("FORGE_K8S_STORAGE_MOUNT", "/.."), HasSubstr("\"..\""));
  EXPECT_EQ(LoadOne("FORGE_K8S_STORAGE_MOUNT", "/data/..hidden").config.k8s_storage_mount,
            "/data/..hidden");
}

// ---------------------------------------------------------------------------------------------
// URLs.

TEST(Urls, HttpAndHttpsBaseUrlsAreAccepted) {
  EXPECT_EQ(Load(S3Env("http://127.0.0.1:9000")).config.s3_endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(Load(S3Env("HTTPS://s3.example.com/")).config.s3_endpoint, "HTTPS://s3.example.com");
  EXPECT_EQ(Load({{"FORGE_K8S_API_SERVER", "https://k8s.example.com:6443/"}}).config.k8s_api_server,
            "https://k8s.example.com:6443");
  EXPECT_EQ(Load({{"FORGE_K8S_API_SERVER", "https://[fd00::1]:6443"}}).config.k8s_api_server,
            "https://[fd00::1]:6443");
  EXPECT_EQ(Load({{"FORGE_K8S_API_SERVER", "https://rancher.example.com/k8s/clusters/c-1"}})
                .config.k8s_api_server,
            "https://rancher.example.com/k8s/clusters/c-1");
}

TEST(Urls, BadUrls) {
  EXPECT_EQ(ErrorFor("FORGE_K8S_API_SERVER", "apiserver:6443"),
            R"(FORGE_K8S_API_SERVER: expected an http:// or https:// URL, got "apiserver:6443")");
  EXPECT_EQ(OnlyError(Load(S3Env("ftp://files"))),
            R"(FORGE_S3_ENDPOINT: expected an http:// or https:// URL, got "ftp://files")");
  EXPECT_THAT(ErrorFor("FORGE_K8S_API_SERVER", "https://"), HasSubstr("with a host name"));
  EXPECT_THAT(ErrorFor("FORGE_K8S_API_SERVER", "https://h:99999"), HasSubstr("invalid port"));
  EXPECT_THAT(ErrorFor("FORGE_K8S_API_SERVER", "https://h:"), HasSubstr("invalid port"));
  const std::string query = ErrorFor("FORGE_K8S_API_SERVER", "https://h/x?X-Amz-Signature=abcd");
  EXPECT_THAT(query, HasSubstr("must not have a query"));
  EXPECT_THAT(query, Not(HasSubstr("X-Amz-Signature")));
  EXPECT_THAT(ErrorFor("FORGE_K8S_API_SERVER", "https://h x"), HasSubstr("whitespace"));
}

TEST(Urls, CredentialsInAUrlAreRefusedWithoutEchoingThem) {
  const std::string s3 = OnlyError(Load(S3Env("https://AKIA:hunter2hunter2@minio:9000")));
  EXPECT_THAT(s3, HasSubstr("must not contain credentials"));
  EXPECT_THAT(s3, HasSubstr("FORGE_S3_ACCESS_KEY and FORGE_S3_SECRET_KEY"));
  EXPECT_THAT(s3, Not(HasSubstr("hunter2")));
  const std::string k8s = ErrorFor("FORGE_K8S_API_SERVER", "admin:hunter2hunter2@k8s:6443");
  EXPECT_THAT(k8s, HasSubstr("FORGE_K8S_TOKEN"));
  EXPECT_THAT(k8s, Not(HasSubstr("hunter2")));
}

// ---------------------------------------------------------------------------------------------
// Kubernetes names and quantities.

TEST(KubernetesNames, Namespace) {
  EXPECT_EQ(LoadOne("FORGE_K8S_NAMESPACE", "ml-team-1").config.k8s_namespace, "ml-team-1");
  const std::string error = ErrorFor("FORGE_K8S_NAMESPACE", "Star_Forge");
  EXPECT_THAT(error, StartsWith("FORGE_K8S_NAMESPACE: must be "));
  EXPECT_THAT(error, HasSubstr(R"(, got "Star_Forge")"));
  EXPECT_THAT(ErrorFor("FORGE_K8S_NAMESPACE", "a.b"), StartsWith("FORGE_K8S_NAMESPACE: must be "));
  EXPECT_THAT(ErrorFor("FORGE_K8S_NAMESPACE", std::string(64, 'a')),
              StartsWith("FORGE_K8S_NAMESPACE: "));
}

TEST(KubernetesNames, Pvcs) {
  EXPECT_EQ(LoadOne("FORGE_K8S_STORAGE_PVC", "starforge-storage").config.k8s_storage_pvc,
            "starforge-storage");
  EXPECT_EQ(LoadOne("FORGE_K8S_CORPUS_PVC", "corpus.v2").config.k8s_corpus_pvc, "corpus.v2");
  EXPECT_THAT(ErrorFor("FORGE_K8S_STORAGE_PVC", "Starforge_Storage"),
              StartsWith("FORGE_K8S_STORAGE_PVC: must be "));
  EXPECT_THAT(ErrorFor("FORGE_K8S_CORPUS_PVC", "-corpus"),
              StartsWith("FORGE_K8S_CORPUS_PVC: must be "));
}

TEST(KubernetesNames, GpuNodeLabelKey) {
  EXPECT_EQ(LoadOne("FORGE_K8S_GPU_NODE_LABEL", "nvidia.com/gpu.product").config.k8s_gpu_node_label,
            "nvidia.com/gpu.product");
  EXPECT_EQ(LoadOne("FORGE_K8S_GPU_NODE_LABEL", "gpu-series").config.k8s_gpu_node_label,
            "gpu-series");
  EXPECT_THAT(ErrorFor("FORGE_K8S_GPU_NODE_LABEL", "gpu series!"),
              StartsWith("FORGE_K8S_GPU_NODE_LABEL: must "));
  EXPECT_THAT(ErrorFor("FORGE_K8S_GPU_NODE_LABEL", "a/b/c"),
              StartsWith("FORGE_K8S_GPU_NODE_LABEL: must "));
  EXPECT_THAT(ErrorFor("FORGE_K8S_GPU_NODE_LABEL", "a/b/c"), HasSubstr(R"(, got "a/b/c")"));
}

TEST(Quantities, ShmSize) {
  for (const char* good : {"64Gi", "1G", "512Mi", "1e9", "100000000"}) {
    EXPECT_EQ(LoadOne("FORGE_K8S_SHM_SIZE", good).config.k8s_shm_size, good);
  }
  EXPECT_EQ(ErrorFor("FORGE_K8S_SHM_SIZE", "lots"),
            R"(FORGE_K8S_SHM_SIZE: expected a Kubernetes quantity such as 64Gi, got "lots")");
  EXPECT_EQ(ErrorFor("FORGE_K8S_SHM_SIZE", "64GB"),
            "FORGE_K8S_SHM_SIZE: expected a Kubernetes quantity such as 64Gi, got \"64GB\" "
            "(Kubernetes quantities have no B: write 64Gi or 64G)");
  EXPECT_EQ(ErrorFor("FORGE_K8S_SHM_SIZE", "0"),
            R"(FORGE_K8S_SHM_SIZE: expected a quantity greater than zero, got "0")");
  EXPECT_THAT(ErrorFor("FORGE_K8S_SHM_SIZE", "-1Gi"), HasSubstr("greater than zero"));
}

TEST(Quantities, CapsuleMaxBytesTakesBytesOrAQuantity) {
  EXPECT_EQ(LoadOne("FORGE_CAPSULE_MAX_BYTES", "1048576").config.capsule_max_bytes, 1048576);
  EXPECT_EQ(LoadOne("FORGE_CAPSULE_MAX_BYTES", "512Mi").config.capsule_max_bytes, 536870912);
  EXPECT_EQ(LoadOne("FORGE_CAPSULE_MAX_BYTES", "2Gi").config.capsule_max_bytes, 2147483648);
  EXPECT_EQ(LoadOne("FORGE_CAPSULE_MAX_BYTES", "1.5Ki").config.capsule_max_bytes, 1536);
  EXPECT_EQ(ErrorFor("FORGE_CAPSULE_MAX_BYTES", "big"),
            "FORGE_CAPSULE_MAX_BYTES: expected a positive number of bytes (e.g. 536870912 or "
            "512Mi), got \"big\"");
  EXPECT_THAT(ErrorFor("FORGE_CAPSULE_MAX_BYTES", "0"),
              HasSubstr("expected a positive number of bytes"));
  EXPECT_THAT(ErrorFor("FORGE_CAPSULE_MAX_BYTES", "0Mi"),
              HasSubstr("expected a positive number of bytes"));
  EXPECT_THAT(ErrorFor("FORGE_CAPSULE_MAX_BYTES", "-1Mi"),
              HasSubstr("expected a positive number of bytes"));
  EXPECT_THAT(ErrorFor("FORGE_CAPSULE_MAX_BYTES", "500m"), HasSubstr("whole number of bytes"));
  EXPECT_THAT(ErrorFor("FORGE_CAPSULE_MAX_BYTES", "512MB"), HasSubstr("have no B"));
  EXPECT_THAT(ErrorFor("FORGE_CAPSULE_MAX_BYTES", "99999999999999999999"), HasSubstr("too large"));
  EXPECT_THAT(ErrorFor("FORGE_CAPSULE_MAX_BYTES", "100Ei"), HasSubstr("too large"));
}

// ---------------------------------------------------------------------------------------------
// Images and versions.

TEST(Images, ReferencesDockerAccepts) {
  for (const char* good :
       {"registry.internal/starforge/nemo-rl:v0.7.0", "nvcr.io/nvidia/nemo:24.07", "ubuntu",
        "busybox:1.36", "localhost:5000/team/img", "Registry.Example.COM/team/img",
        "ghcr.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "ghcr.io/a/b:v1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "my_org/my__img", "a/b-c---d"}) {
    EXPECT_EQ(LoadOne("FORGE_IMAGE_NEMO_RL", good).config.image_nemo_rl, good);
  }
  EXPECT_EQ(LoadOne("FORGE_K8S_FETCH_IMAGE", "curlimages/curl:8.10.1").config.k8s_fetch_image,
            "curlimages/curl:8.10.1");
}

TEST(Images, BadReferences) {
  EXPECT_EQ(ErrorFor("FORGE_IMAGE_NEMO_RL", "nemo rl"),
            "FORGE_IMAGE_NEMO_RL: expected an image reference such as "
            "registry.example.com/team/nemo-rl:v0.7.0 (lower-case repository path, optional :tag "
            "and @sha256:digest), got \"nemo rl\"");
  const std::vector<std::string> bad_refs = {"Team/Image",
                                             "img:",
                                             ":tag",
                                             "a//b",
                                             "img:-tag",
                                             "img@sha256:abc",
                                             "https://registry/img",
                                             std::string(600, 'a')};
  for (const std::string& bad : bad_refs) {
    EXPECT_THAT(ErrorFor("FORGE_K8S_FETCH_IMAGE", bad), HasSubstr("expected an image reference"))
        << bad;
  }
}

TEST(Versions, RayVersion) {
  EXPECT_EQ(LoadOne("FORGE_KUBERAY_RAY_VERSION", "2.9.0").config.kuberay_ray_version, "2.9.0");
  EXPECT_EQ(ErrorFor("FORGE_KUBERAY_RAY_VERSION", "latest"),
            R"(FORGE_KUBERAY_RAY_VERSION: expected a Ray version such as 2.60.0, got "latest")");
  for (const char* bad : {"2.55", "v2.55.1", "2.55.1.1", "2..1", "2.55.", "2.55.1rc1"}) {
    EXPECT_THAT(ErrorFor("FORGE_KUBERAY_RAY_VERSION", bad), HasSubstr("expected a Ray version"))
        << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// Object storage and the listen address.

TEST(ObjectStorage, BucketNames) {
  for (const std::string& good :
       std::vector<std::string>{"starforge", "abc", "my.bucket-1", std::string(63, 'a')}) {
    EXPECT_EQ(Load({{"FORGE_S3_BUCKET", good}}).errors.size(), 0u) << good;
  }
  EXPECT_EQ(ErrorFor("FORGE_S3_BUCKET", "My_Bucket"),
            "FORGE_S3_BUCKET: must be an S3 bucket name (3-63 characters of a-z, 0-9, '.' and '-', "
            "starting and ending with a letter or digit), got \"My_Bucket\"");
  for (const std::string& bad :
       std::vector<std::string>{"ab", "-abc", "abc-", std::string(64, 'a')}) {
    EXPECT_THAT(ErrorFor("FORGE_S3_BUCKET", bad), HasSubstr("must be an S3 bucket name")) << bad;
  }
  EXPECT_THAT(ErrorFor("FORGE_S3_BUCKET", "a..b"), HasSubstr("two adjacent periods"));
  EXPECT_THAT(ErrorFor("FORGE_S3_BUCKET", "192.168.1.1"), HasSubstr("IP address"));
  EXPECT_THAT(ErrorFor("FORGE_S3_BUCKET", "xn--bucket"), HasSubstr("must not start with \"xn--\""));
  EXPECT_THAT(ErrorFor("FORGE_S3_BUCKET", "data-s3alias"),
              HasSubstr("must not end with \"-s3alias\""));
}

TEST(ObjectStorage, Region) {
  EXPECT_EQ(LoadOne("FORGE_S3_REGION", "eu-central-1").config.s3_region, "eu-central-1");
  EXPECT_EQ(LoadOne("FORGE_S3_REGION", "garage").config.s3_region, "garage");
  EXPECT_EQ(ErrorFor("FORGE_S3_REGION", "us east"),
            "FORGE_S3_REGION: expected a region name such as us-east-1 (letters, digits, '-', "
            "'_'), got \"us east\"");
  EXPECT_THAT(ErrorFor("FORGE_S3_REGION", "us/east"), HasSubstr("expected a region name"));
}

TEST(Listen, HostAndPort) {
  for (const char* good : {"0.0.0.0:9000", "localhost:8080", "[::]:8080", "[::1]:443"}) {
    EXPECT_EQ(LoadOne("FORGE_LISTEN", good).config.listen, good);
  }
  EXPECT_EQ(
      ErrorFor("FORGE_LISTEN", "8080"),
      R"(FORGE_LISTEN: expected host:port such as 127.0.0.1:8080 (port 1-65535), got "8080")");
  for (const char* bad : {":8080", "host:0", "host:65536", "host:http", "my host:80", "[::1]"}) {
    EXPECT_THAT(ErrorFor("FORGE_LISTEN", bad), HasSubstr("expected host:port")) << bad;
  }
}

// ---------------------------------------------------------------------------------------------
// Unknown variables.

TEST(Unknown, MisspeltSettingsGetADidYouMean) {
  const LoadResult result = Load({{"FORGE_KUBERAY_TTL_SECOND", "600"}});
  EXPECT_TRUE(result.ok());
  EXPECT_THAT(result.warnings,
              ElementsAre("FORGE_KUBERAY_TTL_SECOND is not a StarForge setting (did you mean "
                          "\"FORGE_KUBERAY_TTL_SECONDS\"?)"));
  EXPECT_EQ(result.config.kuberay_ttl_seconds, 600);  // not silently applied to the near miss
}

TEST(Unknown, NamesFarFromAnySettingGetNoSuggestion) {
  EXPECT_THAT(Load({{"FORGE_ZZZZZZZZZZZZZZZZZZZZZZZZ", "1"}}).warnings,
              ElementsAre("FORGE_ZZZZZZZZZZZZZZZZZZZZZZZZ is not a StarForge setting"));
}

TEST(Unknown, OtherVariablesAreNotOurBusiness) {
  const LoadResult result = Load({{"HOME", "/root"}, {"forge_listen", "x"}, {"PATH", "/bin"}});
  EXPECT_TRUE(result.ok());
  EXPECT_THAT(result.warnings, IsEmpty());
}

// ---------------------------------------------------------------------------------------------
// Checks across settings.

TEST(CrossChecks, S3EndpointNeedsBucketAndKeys) {
  const LoadResult result = Load({{"FORGE_S3_ENDPOINT", "http://127.0.0.1:9000"}});
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].path, "FORGE_S3_ENDPOINT");
  EXPECT_THAT(result.errors[0].message,
              StartsWith("is set without FORGE_S3_BUCKET, FORGE_S3_ACCESS_KEY and "
                         "FORGE_S3_SECRET_KEY: "));

  const std::string one = OnlyError(Load({{"FORGE_S3_ENDPOINT", "http://127.0.0.1:9000"},
                                          {"FORGE_S3_BUCKET", "starforge"},
                                          {"FORGE_S3_ACCESS_KEY", "AKIAEXAMPLE"}}));
  EXPECT_THAT(one, StartsWith("FORGE_S3_ENDPOINT: is set without FORGE_S3_SECRET_KEY: "));
  EXPECT_THAT(one, Not(HasSubstr("FORGE_S3_BUCKET")));
}

TEST(CrossChecks, CompleteS3SettingsAreFine) {
  const LoadResult result = Load({{"FORGE_S3_ENDPOINT", "http://127.0.0.1:9000"},
                                  {"FORGE_S3_BUCKET", "starforge"},
                                  {"FORGE_S3_ACCESS_KEY", "AKIAEXAMPLE"},
                                  {"FORGE_S3_SECRET_KEY", "secretsecret"}});
  EXPECT_TRUE(result.ok()) << JoinErrors(result.errors);
  EXPECT_THAT(result.warnings, IsEmpty());
}

TEST(CrossChecks, S3PartsWithoutAnEndpointAreIgnoredWithAWarning) {
  const LoadResult result =
      Load({{"FORGE_S3_BUCKET", "starforge"}, {"FORGE_S3_ACCESS_KEY", "AKIAEXAMPLE"}});
  EXPECT_TRUE(result.ok());
  EXPECT_THAT(result.warnings,
              ElementsAre(StartsWith("FORGE_S3_BUCKET and FORGE_S3_ACCESS_KEY are ignored because "
                                     "FORGE_S3_ENDPOINT is not set")));
}

TEST(CrossChecks, KuberayWithoutObjectStorageWarns) {
  EXPECT_THAT(Load({{"FORGE_DEFAULT_FLEET_KIND", "kuberay"}}).warnings,
              ElementsAre(HasSubstr("kuberay jobs cannot start")));
}

// Jobs write under the storage root: the control plane's state there would be theirs to rewrite.
TEST(CrossChecks, TheStateDirectoryIsNeverUnderTheStorageRoot) {
  for (const char* state : {"/starforge", "/starforge/control"}) {
    const LoadResult result =
        Load({{"FORGE_STORAGE_ROOT", "/starforge"}, {"FORGE_STATE_DIR", state}});
    ASSERT_EQ(result.errors.size(), 1u) << state;
    EXPECT_EQ(result.errors[0].path, "FORGE_STATE_DIR");
    EXPECT_THAT(result.errors[0].message, HasSubstr("inside FORGE_STORAGE_ROOT"));
  }
  EXPECT_TRUE(
      Load({{"FORGE_STORAGE_ROOT", "/starforge"}, {"FORGE_STATE_DIR", "/starforge-x"}}).ok());
  const LoadResult defaults = Load({{"FORGE_STORAGE_ROOT", "/data/sf"}});
  EXPECT_TRUE(defaults.ok());
  EXPECT_EQ(defaults.config.StateDir(), "/data/sf-state");
}

TEST(CrossChecks, TokenNeedsAnApiServer) {
  const LoadResult result = Load({{"FORGE_K8S_TOKEN", "tok-123456"}});
  ASSERT_EQ(result.errors.size(), 1u);
  EXPECT_EQ(result.errors[0].path, "FORGE_K8S_TOKEN");
  EXPECT_THAT(result.errors[0].message, StartsWith("is set without FORGE_K8S_API_SERVER"));
  EXPECT_TRUE(
      Load({{"FORGE_K8S_TOKEN", "tok-123456"}, {"FORGE_K8S_API_SERVER", "https://k8s:6443"}}).ok());
}

TEST(CrossChecks, ATokenOverPlainHttpWarns) {
  const LoadResult result =
      Load({{"FORGE_K8S_TOKEN", "tok-123456"}, {"FORGE_K8S_API_SERVER", "http://127.0.0.1:8001"}});
  EXPECT_TRUE(result.ok());
  EXPECT_THAT(result.warnings, ElementsAre(HasSubstr("FORGE_K8S_TOKEN is sent unencrypted")));
}

TEST(CrossChecks, ContextIsIgnoredWithAnExplicitServer) {
  const LoadResult result =
      Load({{"FORGE_K8S_CONTEXT", "kind-kind"}, {"FORGE_K8S_API_SERVER", "https://k8s:6443"}});
  EXPECT_TRUE(result.ok());
  EXPECT_THAT(result.warnings, ElementsAre(StartsWith("FORGE_K8S_CONTEXT is ignored")));
  EXPECT_THAT(LoadOne("FORGE_K8S_CONTEXT", "kind-kind").warnings, IsEmpty());
}

TEST(CrossChecks, InsecureTlsWarns) {
  EXPECT_THAT(LoadOne("FORGE_K8S_INSECURE_SKIP_TLS_VERIFY", "true").warnings,
              ElementsAre(HasSubstr("tests only")));
}

TEST(CrossChecks, DottedBucketWithVirtualHostsOverHttpsWarns) {
  const LoadResult result = Load({{"FORGE_S3_ENDPOINT", "https://s3.example.com"},
                                  {"FORGE_S3_BUCKET", "my.bucket"},
                                  {"FORGE_S3_ACCESS_KEY", "AKIAEXAMPLE"},
                                  {"FORGE_S3_SECRET_KEY", "secretsecret"},
                                  {"FORGE_S3_ADDRESSING", "virtual"}});
  EXPECT_TRUE(result.ok());
  EXPECT_THAT(result.warnings, ElementsAre(HasSubstr("TLS certificate")));
}

// ---------------------------------------------------------------------------------------------
// Dump and the process environment.

TEST(Dump, HasEverySettingWithTypedValues) {
  const nlohmann::json dump = Dump(Config{});
  ASSERT_TRUE(dump.is_object());
  EXPECT_EQ(dump.size(), Settings().size());
  for (const SettingInfo& s : Settings())
    EXPECT_TRUE(dump.contains(s.name)) << s.name;
  EXPECT_EQ(dump["FORGE_DEFAULT_FLEET_KIND"], "local");
  EXPECT_EQ(dump["FORGE_KUBERAY_TTL_SECONDS"], 600);
  EXPECT_EQ(dump["FORGE_CAPSULE_MAX_BYTES"], 536870912);
  EXPECT_EQ(dump["FORGE_K8S_STORAGE_SHARED"], true);
  EXPECT_EQ(dump["FORGE_KUBERAY_SUBMISSION_MODE"], "K8sJobMode");
  EXPECT_EQ(dump["FORGE_K8S_TOKEN"], "");
  EXPECT_EQ(dump["FORGE_S3_SECRET_KEY"], "");
}

TEST(Dump, ShowsEffectiveValues) {
  const LoadResult result = Load({{"FORGE_KUBERAY_TTL_SECONDS", "30"},
                                  {"FORGE_S3_ADDRESSING", "virtual"},
                                  {"FORGE_STORAGE_ROOT", "/data/"}});
  ASSERT_TRUE(result.ok());
  const nlohmann::json dump = Dump(result.config);
  EXPECT_EQ(dump["FORGE_KUBERAY_TTL_SECONDS"], 30);
  EXPECT_EQ(dump["FORGE_S3_ADDRESSING"], "virtual");
  EXPECT_EQ(dump["FORGE_STORAGE_ROOT"], "/data");
}

TEST(ProcessEnvironment, KeepsOnlyForgeVariables) {
  ASSERT_EQ(setenv("FORGE_CONFIG_TEST_PROCESS_ENV", "a=b", 1), 0);
  ASSERT_EQ(setenv("NOT_FORGE_CONFIG_TEST", "x", 1), 0);
  const auto env = ProcessEnvironment();
  unsetenv("FORGE_CONFIG_TEST_PROCESS_ENV");
  unsetenv("NOT_FORGE_CONFIG_TEST");
  ASSERT_TRUE(env.contains("FORGE_CONFIG_TEST_PROCESS_ENV"));
  EXPECT_EQ(env.at("FORGE_CONFIG_TEST_PROCESS_ENV"), "a=b");
  for (const auto& [name, value] : env)
    EXPECT_THAT(name, StartsWith("FORGE_"));
}

}  // namespace
}  // namespace starforge::config
