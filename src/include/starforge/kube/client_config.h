// Where the Kubernetes API server is and how to authenticate to it, found the way kubectl finds
// it (client-go tools/clientcmd and rest.InClusterConfig; docs/kube-client.md), in this order:
//  1. an explicit server (ApiServerSettings: FORGE_K8S_API_SERVER, FORGE_K8S_TOKEN, …);
//  2. in-cluster: KUBERNETES_SERVICE_HOST/PORT + the service-account token, CA and namespace;
//  3. kubeconfig: $KUBECONFIG (a ':'-separated list, merged as kubectl does) or ~/.kube/config,
//     the settings' context or current-context.
// Loading is pure apart from reading files: the settings, the environment and the
// service-account directory are parameters, so tests drive every branch.
#pragma once

#include <chrono>
#include <ctime>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "starforge/common/secret.h"
#include "starforge/common/status.h"
#include "starforge/common/status_or.h"

namespace starforge::kube {

// A configuration that cannot be used (none found, a kubeconfig malformed or unsupported) is a
// kInvalidArgument Status whose message names the file/context/setting at fault and never
// contains a credential.

struct ClientConfig {
  std::string server;      // "https://host:port" or "http://host:port", no trailing slash
  std::string namespace_;  // the context's / service account's namespace ("" = not given)

  // Credentials. A token file wins over a static token and is re-read when it changes.
  Secret token;
  std::string token_file;
  std::string client_cert_file;  // PEM
  std::string client_cert_data;  // PEM (decoded from kubeconfig's base64 *-data)
  std::string client_key_file;   // PEM
  Secret client_key_data;        // PEM

  // Server verification.
  std::string ca_file;  // PEM bundle
  std::string ca_data;  // PEM (decoded)
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;

  // Where this came from, for messages: "FORGE_K8S_API_SERVER", "in-cluster service account",
  // or "kubeconfig /path (context ctx)".
  std::string source;
};

// What the operator set for the connection (FORGE_K8S_* in config::Config, which converts to
// this): the only settings the client reads.
struct ApiServerSettings {
  std::string server;                     // FORGE_K8S_API_SERVER ("" = in-cluster, then kubeconfig)
  Secret token;                           // FORGE_K8S_TOKEN
  std::string ca_file;                    // FORGE_K8S_CA_FILE
  bool insecure_skip_tls_verify = false;  // FORGE_K8S_INSECURE_SKIP_TLS_VERIFY
  std::string context;                    // FORGE_K8S_CONTEXT (kubeconfig context)
};

// Inputs other than the settings.
struct ConfigSources {
  // The process environment, or a test's: KUBECONFIG, HOME, KUBERNETES_SERVICE_HOST,
  // KUBERNETES_SERVICE_PORT are consulted.
  std::map<std::string, std::string> env;
  // Where the in-cluster service account is mounted.
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

// The non-FORGE variables ConfigSources needs, from the process environment.
ConfigSources ProcessConfigSources();

// Resolves the configuration in the order above; what it returns passes CheckClientConfig.
StatusOr<ClientConfig> LoadClientConfig(const ApiServerSettings& settings,
                                        const ConfigSources& sources);

// Builds a configuration from one kubeconfig document set: `files` are read in order and merged
// (first definition of a cluster/user/context name wins; the first non-empty current-context
// wins); missing files are skipped, as kubectl does. `context` overrides current-context.
// Relative file paths inside a kubeconfig resolve against that file's directory. An `exec` or
// `auth-provider` user is rejected as "not supported yet". What it returns passes
// CheckClientConfig.
StatusOr<ClientConfig> LoadKubeconfig(const std::vector<std::string>& files,
                                      const std::string& context);

// Whether a Client can be made from `config`: a server address with http:// or https://.
Status CheckClientConfig(const ClientConfig& config);

// Hands out the bearer token, re-reading a token file when its mtime or size changes (bound
// service-account tokens rotate), looking at most once per `recheck` interval. Thread-safe.
class TokenSource {
 public:
  explicit TokenSource(const ClientConfig& config,
                       std::chrono::seconds recheck = std::chrono::seconds(10));

  // The current token ("" = none); kUnavailable when the token file cannot be read.
  StatusOr<Secret> Get();
  // Re-reads the file now (after a 401): whether the token changed.
  StatusOr<bool> Refresh();
  bool empty() const { return file_.empty() && static_token_.empty(); }

 private:
  Secret static_token_;
  std::string file_;
  std::chrono::seconds recheck_;
  std::mutex mu_;
  Secret current_;
  std::chrono::steady_clock::time_point last_check_{};
  bool loaded_ = false;
  std::time_t mtime_ = 0;
  long mtime_ns_ = 0;
  long long size_ = -1;
  StatusOr<bool> ReloadLocked(bool force);
};

}  // namespace starforge::kube
