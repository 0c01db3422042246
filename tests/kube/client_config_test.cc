// Configuration discovery: explicit settings, in-cluster, kubeconfig merging, token rotation.
#include "starforge/kube/client_config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace starforge::kube {
namespace {

namespace fs = std::filesystem;
using support::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// A kubeconfig with one context; `user` is the YAML body of the user (indented 4 spaces).
std::string Kubeconfig(const std::string& ctx, const std::string& server, const std::string& user,
                       const std::string& cluster_extra = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: " + ctx + "\nclusters:\n- name: " + ctx +
         "-cluster\n  cluster:\n    server: " + server + "\n" + cluster_extra +
         "users:\n- name: " + ctx + "-user\n  user:\n" + user + "contexts:\n- name: " + ctx +
         "\n  context:\n    cluster: " + ctx + "-cluster\n    user: " + ctx +
         "-user\n    namespace: " + ctx + "-ns\n";
}

ConfigSources Sources(std::map<std::string, std::string> env, const std::string& sa_dir) {
  ConfigSources s;
  s.env = std::move(env);
  s.service_account_dir = sa_dir;
  return s;
}

TEST(ClientConfigTest, ForgeSettingsWinOverEverything) {
  TempDir dir;
  dir.Write("sa/token", "in-cluster-token");
  std::string kc = dir.Write("kc", Kubeconfig("a", "https://kc:6443", "    token: t\n"));
  ApiServerSettings cfg;
  cfg.server = "https://api.example:6443/";
  cfg.token = Secret("forge-token");
  cfg.ca_file = "/etc/ca.pem";
  cfg.insecure_skip_tls_verify = true;
  ClientConfig c = LoadClientConfig(cfg, Sources({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                                                  {"KUBERNETES_SERVICE_PORT", "443"},
                                                  {"KUBECONFIG", kc}},
                                                 dir.path().string() + "/sa"))
                       .value();
  EXPECT_EQ(c.server, "https://api.example:6443");
  EXPECT_EQ(c.token.Reveal(), "forge-token");
  EXPECT_EQ(c.ca_file, "/etc/ca.pem");
  EXPECT_TRUE(c.insecure_skip_tls_verify);
  EXPECT_EQ(c.source, "FORGE_K8S_API_SERVER");
}

TEST(ClientConfigTest, InClusterUsesServiceAccount) {
  TempDir dir;
  dir.Write("sa/token", "sa-token\n");
  dir.Write("sa/ca.crt", "PEM");
  dir.Write("sa/namespace", "team-a\n");
  std::string kc = dir.Write("kc", Kubeconfig("a", "https://kc:6443", "    token: t\n"));
  ClientConfig c =
      LoadClientConfig(ApiServerSettings{}, Sources({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                                     {"KUBERNETES_SERVICE_PORT", "443"},
                                                     {"KUBECONFIG", kc}},
                                                    dir.path().string() + "/sa"))
          .value();
  EXPECT_EQ(c.server, "https://10.96.0.1:443");
  EXPECT_EQ(c.token_file, dir.path().string() + "/sa/token");
  EXPECT_TRUE(c.token.empty());
  EXPECT_EQ(c.ca_file, dir.path().string() + "/sa/ca.crt");
  EXPECT_EQ(c.namespace_, "team-a");
  EXPECT_EQ(c.source, "in-cluster service account");
  TokenSource tokens(c);
  EXPECT_EQ(tokens.Get().value().Reveal(), "sa-token");  // trailing newline trimmed
}

TEST(ClientConfigTest, InClusterBracketsIpv6) {
  TempDir dir;
  dir.Write("sa/token", "t");
  ClientConfig c =
      LoadClientConfig(ApiServerSettings{}, Sources({{"KUBERNETES_SERVICE_HOST", "fd00::1"},
                                                     {"KUBERNETES_SERVICE_PORT", "443"}},
                                                    dir.path().string() + "/sa"))
          .value();
  EXPECT_EQ(c.server, "https://[fd00::1]:443");
}

TEST(ClientConfigTest, InClusterWithoutTokenFallsBackToKubeconfig) {
  TempDir dir;
  std::string kc = dir.Write("kc", Kubeconfig("a", "https://kc:6443", "    token: t\n"));
  ClientConfig c =
      LoadClientConfig(ApiServerSettings{}, Sources({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                                     {"KUBERNETES_SERVICE_PORT", "443"},
                                                     {"KUBECONFIG", kc}},
                                                    dir.path().string() + "/no-sa"))
          .value();
  EXPECT_EQ(c.server, "https://kc:6443");
}

TEST(ClientConfigTest, KubeconfigCurrentContextWithTokenAndCaData) {
  TempDir dir;
  // "PEM-CA" and "PEM-CERT" / "PEM-KEY" in base64.
  std::string kc = dir.Write(
      "kc",
      Kubeconfig("dev", "https://dev:6443/",
                 "    client-certificate-data: UEVNLUNFUlQ=\n    client-key-data: UEVNLUtFWQ==\n",
                 "    certificate-authority-data: UEVNLUNB\n    insecure-skip-tls-verify: true\n"));
  ClientConfig c =
      LoadClientConfig(ApiServerSettings{}, Sources({{"KUBECONFIG", kc}}, "/nonexistent")).value();
  EXPECT_EQ(c.server, "https://dev:6443");
  EXPECT_EQ(c.ca_data, "PEM-CA");
  EXPECT_EQ(c.client_cert_data, "PEM-CERT");
  EXPECT_EQ(c.client_key_data.Reveal(), "PEM-KEY");
  EXPECT_TRUE(c.insecure_skip_tls_verify);
  EXPECT_EQ(c.namespace_, "dev-ns");
  EXPECT_THAT(c.source, HasSubstr("context dev"));
}

TEST(ClientConfigTest, DefaultKubeconfigUnderHome) {
  TempDir dir;
  dir.Write(".kube/config", Kubeconfig("home", "https://home:6443", "    token: abc\n"));
  ClientConfig c = LoadClientConfig(ApiServerSettings{},
                                    Sources({{"HOME", dir.path().string()}}, "/nonexistent"))
                       .value();
  EXPECT_EQ(c.server, "https://home:6443");
  EXPECT_EQ(c.token.Reveal(), "abc");
}

TEST(ClientConfigTest, ForgeContextOverridesCurrentContext) {
  TempDir dir;
  std::string text =
      "current-context: a\n"
      "clusters:\n"
      "- {name: ca, cluster: {server: 'https://a:1'}}\n"
      "- {name: cb, cluster: {server: 'https://b:2'}}\n"
      "users:\n"
      "- {name: u, user: {token: x}}\n"
      "contexts:\n"
      "- {name: a, context: {cluster: ca, user: u}}\n"
      "- {name: b, context: {cluster: cb, user: u, namespace: nb}}\n";
  std::string kc = dir.Write("kc", text);
  ApiServerSettings cfg;
  cfg.context = "b";
  ClientConfig c = LoadClientConfig(cfg, Sources({{"KUBECONFIG", kc}}, "/nonexistent")).value();
  EXPECT_EQ(c.server, "https://b:2");
  EXPECT_EQ(c.namespace_, "nb");
  cfg.context = "missing";
  {
    const StatusOr<ClientConfig> e =
        LoadClientConfig(cfg, Sources({{"KUBECONFIG", kc}}, "/nonexistent"));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(e.status().message(), HasSubstr("context \"missing\" not found"));
  }
}

TEST(ClientConfigTest, KubeconfigListMergesLikeKubectl) {
  TempDir dir;
  // The first file has no current-context but defines cluster "shared" first: it wins.
  std::string first =
      dir.Write("one", "clusters:\n- {name: shared, cluster: {server: 'https://first:1'}}\n");
  std::string second =
      dir.Write("two",
                "current-context: ctx\n"
                "clusters:\n- {name: shared, cluster: {server: 'https://second:2'}}\n"
                "users:\n- {name: u, user: {tokenFile: tokens/t}}\n"
                "contexts:\n- {name: ctx, context: {cluster: shared, user: u}}\n");
  std::string third = dir.Write("three", "current-context: other\n");
  ClientConfig c =
      LoadClientConfig(ApiServerSettings{},
                       Sources({{"KUBECONFIG", dir.path().string() + "/missing:" + first + ":" +
                                                   second + ":" + third}},
                               "/nonexistent"))
          .value();
  EXPECT_EQ(c.server, "https://first:1");
  // tokenFile resolves against the directory of the file that defined the user.
  EXPECT_EQ(c.token_file, dir.path().string() + "/tokens/t");
}

TEST(ClientConfigTest, ExecPluginIsNotSupportedYet) {
  TempDir dir;
  std::string kc = dir.Write(
      "kc", Kubeconfig("gke", "https://gke:443",
                       "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                       "      command: gke-gcloud-auth-plugin\n      interactiveMode: Never\n"));
  {
    const StatusOr<ClientConfig> e =
        LoadClientConfig(ApiServerSettings{}, Sources({{"KUBECONFIG", kc}}, "/nonexistent"));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(e.status().message(), HasSubstr("exec credential plugin (gke-gcloud-auth-plugin)"));
    EXPECT_THAT(e.status().message(), HasSubstr("not support yet"));
  }
}

TEST(ClientConfigTest, AuthProviderIsNotSupportedYet) {
  TempDir dir;
  std::string kc = dir.Write(
      "kc", Kubeconfig("old", "https://old:443", "    auth-provider:\n      name: gcp\n"));
  EXPECT_FALSE(
      LoadClientConfig(ApiServerSettings{}, Sources({{"KUBECONFIG", kc}}, "/nonexistent")).ok());
}

TEST(ClientConfigTest, ErrorsNeverContainTheToken) {
  TempDir dir;
  // A user with a token but a context that names a missing cluster.
  std::string kc =
      dir.Write("kc",
                "current-context: c\nusers:\n- {name: u, user: {token: s3cr3t-t0ken}}\n"
                "contexts:\n- {name: c, context: {cluster: nope, user: u}}\n");
  {
    const StatusOr<ClientConfig> e =
        LoadClientConfig(ApiServerSettings{}, Sources({{"KUBECONFIG", kc}}, "/nonexistent"));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(e.status().message(), HasSubstr("cluster \"nope\""));
    EXPECT_THAT(e.status().message(), Not(HasSubstr("s3cr3t")));
  }
  // Bad base64 key data: the message names the field, not its value.
  std::string kc2 = dir.Write(
      "kc2", Kubeconfig("k", "https://k:1",
                        "    client-certificate-data: UEVN\n    client-key-data: 's3cr3t!!'\n"));
  {
    const StatusOr<ClientConfig> e =
        LoadClientConfig(ApiServerSettings{}, Sources({{"KUBECONFIG", kc2}}, "/nonexistent"));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(e.status().message(), HasSubstr("client-key-data"));
    EXPECT_THAT(e.status().message(), Not(HasSubstr("s3cr3t")));
  }
}

TEST(ClientConfigTest, NothingConfiguredSaysWhatToDo) {
  TempDir dir;
  {
    const StatusOr<ClientConfig> e = LoadClientConfig(
        ApiServerSettings{}, Sources({{"HOME", dir.path().string()}}, "/nonexistent"));
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(e.status().message(), HasSubstr("FORGE_K8S_API_SERVER"));
    EXPECT_THAT(e.status().message(), HasSubstr("kubeconfig"));
  }
}

TEST(ClientConfigTest, MissingCurrentContextIsAnError) {
  TempDir dir;
  std::string kc = dir.Write("kc", "clusters: []\n");
  EXPECT_FALSE(
      LoadClientConfig(ApiServerSettings{}, Sources({{"KUBECONFIG", kc}}, "/nonexistent")).ok());
}

TEST(ClientConfigTest, AServerWithoutHttpIsUnusable) {
  TempDir dir;
  std::string kc = dir.Write("kc", Kubeconfig("f", "ftp://f:21", "    token: t\n"));
  const StatusOr<ClientConfig> c =
      LoadClientConfig(ApiServerSettings{}, Sources({{"KUBECONFIG", kc}}, "/nonexistent"));
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("must start with http:// or https://"));
  ApiServerSettings explicit_server;
  explicit_server.server = "api.example:6443";
  EXPECT_THAT(LoadClientConfig(explicit_server, Sources({}, "/nonexistent")).status().message(),
              HasSubstr("FORGE_K8S_API_SERVER"));
  EXPECT_FALSE(CheckClientConfig(ClientConfig{}).ok());
}

TEST(TokenSourceTest, RereadsARotatedTokenFile) {
  TempDir dir;
  std::string file = dir.Write("token", "first");
  ClientConfig c;
  c.token_file = file;
  TokenSource eager(c, std::chrono::seconds(0));
  TokenSource lazy(c, std::chrono::seconds(3600));
  EXPECT_EQ(eager.Get().value().Reveal(), "first");
  EXPECT_EQ(lazy.Get().value().Reveal(), "first");
  dir.Write("token", "second-token");  // a different size, so the change is seen whatever mtime
  EXPECT_EQ(eager.Get().value().Reveal(), "second-token");
  // Within its recheck interval the lazy source keeps the old token until told to refresh
  // (what the client does after a 401).
  EXPECT_EQ(lazy.Get().value().Reveal(), "first");
  EXPECT_TRUE(lazy.Refresh().value());
  EXPECT_EQ(lazy.Get().value().Reveal(), "second-token");
  EXPECT_FALSE(lazy.Refresh().value());
}

TEST(TokenSourceTest, StaticTokenAndMissingFile) {
  ClientConfig c;
  c.token = Secret("static");
  TokenSource s(c);
  EXPECT_EQ(s.Get().value().Reveal(), "static");
  EXPECT_FALSE(s.Refresh().value());
  ClientConfig missing;
  missing.token_file = "/nonexistent/token";
  TokenSource m(missing);
  EXPECT_EQ(m.Get().status().code(), Code::kUnavailable);  // a rotation may be under way
}

}  // namespace
}  // namespace starforge::kube
