// kubesim: an in-memory Kubernetes API server for tests and development (see docs/kubesim.md).
//
//   kubesim --listen 127.0.0.1:0 --port-file F [--crd-version v1.7.0] [--crd-dir DIR]
//           [--token T] [--rbac rbac.yaml] [--tls [--cert-file F]] [--nodes nodes.yaml] [--history
//           N]
//           [--bookmark-interval-ms N] [--max-pod-grace-seconds N]
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "server.h"

#ifndef KUBESIM_DEFAULT_CRD_ROOT
#define KUBESIM_DEFAULT_CRD_ROOT "third_party/kuberay/crds"
#endif

namespace {

int Usage(const char* msg) {
  std::fprintf(stderr,
               "kubesim: %s\nusage: kubesim --listen HOST:PORT [--port-file F] [--crd-version V] "
               "[--crd-dir DIR] [--token T] [--rbac FILE] [--tls] [--cert-file F] [--key-file F] "
               "[--nodes FILE] [--history N] [--bookmark-interval-ms N] "
               "[--max-pod-grace-seconds N]\n",
               msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  kubesim::Options opts;
  std::string crd_version = "v1.7.0";
  std::string crd_dir;
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
    std::thread([&server, stop_signals] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      server.Stop();
    }).detach();
    return server.Run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kubesim: %s\n", e.what());
    return 1;
  }
}
