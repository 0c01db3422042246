// kubesim: an in-memory Kubernetes API server for tests and development (see docs/kubesim.md).
//
//   kubesim --listen 127.0.0.1:0 --port-file F [--crd-version v1.7.0] [--crd-dir DIR]
//           [--token T] [--rbac rbac.yaml] [--tls [--cert-file F]] [--nodes nodes.yaml] [--history
//           N]
//           [--bookmark-interval-ms N] [--max-pod-grace-seconds N]
//           [--controllers all|none|operator,jobs,...] [--operator-version v1.4|v1.7]
//           [--resync-ms N] [--ray-dashboard-port N] [flags declared by controllers]
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "apiserver/server.h"
#include "controllers/controller.h"

#ifndef KUBESIM_DEFAULT_CRD_ROOT
#define KUBESIM_DEFAULT_CRD_ROOT "third_party/kuberay/crds"
#endif

namespace {

int Usage(const char* msg) {
  std::fprintf(stderr,
               "kubesim: %s\nusage: kubesim --listen HOST:PORT [--port-file F] [--crd-version V] "
               "[--crd-dir DIR] [--token T] [--rbac FILE] [--tls] [--cert-file F] [--key-file F] "
               "[--nodes FILE] [--history N] [--bookmark-interval-ms N] "
               "[--max-pod-grace-seconds N] [--kueue] [--controllers all|none|NAME,...] "
               "[--operator-version v1.4|v1.7] [--resync-ms N] [--ray-dashboard-port N]\n",
               msg);
  for (const auto& c : kubesim::controllers::RegisteredControllers()) {
    std::fprintf(stderr, "  controller %s\n", c.name.c_str());
    for (const auto& f : c.flags)
      std::fprintf(stderr, "    --%s  %s\n", f.name.c_str(), f.help.c_str());
  }
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  kubesim::Options opts;
  std::string crd_version = "v1.7.0";
  std::string crd_dir;
  std::string controllers = "all";
  kubesim::controllers::ControllerFlags cflags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kubesim: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--listen") {
        const std::string v = next();
        const auto colon = v.rfind(':');
        if (colon == std::string::npos) return Usage("--listen wants HOST:PORT");
        opts.host = v.substr(0, colon);
        opts.port = std::stoi(v.substr(colon + 1));
      } else if (a == "--port-file") {
        opts.port_file = next();
      } else if (a == "--crd-version") {
        crd_version = next();
      } else if (a == "--crd-dir") {
        crd_dir = next();
      } else if (a == "--token") {
        opts.token = next();
      } else if (a == "--tls") {
        opts.tls = true;
      } else if (a == "--cert-file") {
        opts.cert_file = next();
      } else if (a == "--key-file") {
        opts.key_file = next();
      } else if (a == "--kueue") {
        opts.kueue_suspend = true;
      } else if (a == "--rbac") {
        opts.rbac_file = next();
      } else if (a == "--nodes") {
        opts.nodes_file = next();
      } else if (a == "--history") {
        opts.history = std::stoul(next());
      } else if (a == "--bookmark-interval-ms") {
        opts.bookmark_interval_ms = std::stoi(next());
      } else if (a == "--max-pod-grace-seconds") {
        opts.max_pod_grace_seconds = std::stoll(next());
      } else if (a == "--controllers") {
        controllers = next();
      } else if (a == "--operator-version") {
        cflags.operator_version = next();
        if (cflags.operator_version != "v1.4" && cflags.operator_version != "v1.7") {
          return Usage("--operator-version wants v1.4 or v1.7");
        }
      } else if (a == "--resync-ms") {
        cflags.resync_ms = std::stoi(next());
        if (cflags.resync_ms <= 0) return Usage("--resync-ms wants a positive number");
      } else if (a == "--ray-dashboard-port") {
        cflags.ray_dashboard_port = std::stoi(next());
      } else if (a.rfind("--", 0) == 0 && kubesim::controllers::IsControllerFlag(a.substr(2))) {
        const std::string value = next();
        const auto* flag = kubesim::controllers::FindControllerFlag(a.substr(2));
        const std::string err = flag->check ? flag->check(value) : "";
        if (!err.empty()) return Usage((a + " " + err).c_str());
        cflags.values[a.substr(2)] = value;
      } else if (a == "--help" || a == "-h") {
        Usage("help");
        return 0;
      } else {
        return Usage(("unknown flag " + a).c_str());
      }
    } catch (const std::exception&) {
      return Usage(("bad value for " + a).c_str());
    }
  }
  if (crd_dir.empty()) crd_dir = std::string(KUBESIM_DEFAULT_CRD_ROOT) + "/" + crd_version;
  opts.crd_dir = crd_dir;
  try {
    cflags.enabled = kubesim::controllers::ParseControllerSelection(controllers);
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  // The controllers are clients of this very server over loopback (controllers/controller.h):
  // started once the listener is bound, stopped before the server.
  kubesim::controllers::ControllerSet running;
  if (!cflags.enabled.empty()) {
    opts.controller_key = kubesim::controllers::ControllerKey();
    opts.reconcile_counts = kubesim::controllers::ReconcileCounts;
    opts.threads = 256;
  }
  opts.on_listening = [&running, cflags](int port, const kubesim::Options& resolved) {
    if (cflags.enabled.empty()) return;
    kubesim::controllers::ControllerContext ctx;
    std::string host = resolved.host;
    if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
    if (host == "::") host = "::1";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    ctx.server_url =
        std::string(resolved.tls ? "https" : "http") + "://" + host + ":" + std::to_string(port);
    ctx.ca_file = resolved.tls ? resolved.cert_file : std::string();
    ctx.nodes_file = resolved.nodes_file;
    ctx.flags = cflags;
    const std::string url = ctx.server_url;
    const std::string ca = ctx.ca_file;
    ctx.make_client = [url, ca](const std::string& name) {
      return kubesim::controllers::MakeControllerClient(url, ca, name);
    };
    running.StartAll(ctx);
  };
  // SIGTERM/SIGINT are taken by a thread with sigwait() (Stop() locks mutexes, which a signal
  // handler must not); every other thread inherits the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  try {
    kubesim::Server server(opts, kubesim::Registry::Build(crd_dir));
    // Joined before `server` goes out of scope: detached, it could still be inside Stop() (which
    // returns after Run() does) while main destroys the server under it.
    std::thread stopper([&server, &running, stop_signals] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      running.StopAll();
      server.Stop();
    });
    // Run() also returns (or throws) without a signal: then the stopper is woken with one and
    // stops what is already stopped (both are idempotent). A signal that came first is taken.
    struct JoinStopper {
      std::thread& t;
      ~JoinStopper() {
        pthread_kill(t.native_handle(), SIGTERM);
        t.join();
      }
    } join_stopper{stopper};
    const int rc = server.Run();
    running.StopAll();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kubesim: %s\n", e.what());
    return 1;
  }
}
