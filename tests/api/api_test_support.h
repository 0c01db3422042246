// Helpers for the API tests: temp dirs, zips made by Python, and the real `forge serve` binary
// (STARFORGE_FORGE_BIN) on a kernel-chosen loopback port with a temp FORGE_STORAGE_ROOT.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace starforge::api::testing {

namespace fs = std::filesystem;

inline std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "starforge-api-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  fs::path path_;
};

inline std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Output {
  int code = -1;
  std::string out;
};

// Runs `cmd` through /bin/sh; its exit code and standard output.
inline Output Shell(const std::string& cmd) {
  Output o;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    o.out.append(buf.data(), n);
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

// A zip's bytes, made by Python's zipfile from [{"name", "data", "attr"?, "method"?,
// "repeat"?}] (tests/capsule/testdata/zipcheck.py), as hostile as needed.
inline std::string MakeZip(const TempDir& t, const nlohmann::json& entries) {
  const fs::path spec = t / "zip-entries.json";
  const fs::path zip = t / "made.zip";
  WriteFile(spec, entries.dump());
  fs::remove(zip);
  const std::string script =
      std::string(STARFORGE_SOURCE_DIR) + "/tests/capsule/testdata/zipcheck.py";
  Output o = Shell("python3 " + Quote(script) + " make " + Quote(zip.string()) + " " +
                   Quote(spec.string()) + " 2>&1");
  if (o.code != 0) throw std::runtime_error("zipcheck.py make failed: " + o.out);
  return Slurp(zip);
}

// `forge ARGS…` with exactly `env` (plus PATH); its exit code, stdout and stderr.
struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
};
inline CliRun Forge(const TempDir& t, const std::string& args,
                    const std::map<std::string, std::string>& env) {
  std::string cmd = "env -i PATH=/usr/bin:/bin";
  for (const auto& [k, v] : env)
    cmd += " " + k + "=" + Quote(v);
  const std::string out = (t / "cli.out").string();
  const std::string err = (t / "cli.err").string();
  cmd += " " + std::string(STARFORGE_FORGE_BIN) + " " + args + " >" + out + " 2>" + err +
         " </dev/null";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
}

// A running `forge serve`.
class ServeProcess {
 public:
  // Starts `forge serve --listen 127.0.0.1:0 --port-file F ARGS` with FORGE_STORAGE_ROOT=root
  // and `env`; waits until it listens. nullptr and *error when it does not.
  static std::unique_ptr<ServeProcess> Start(const fs::path& root,
                                             const std::map<std::string, std::string>& env,
                                             const std::vector<std::string>& args,
                                             std::string* error) {
    auto s = std::unique_ptr<ServeProcess>(new ServeProcess());
    s->dir_ = fs::path(root).parent_path() /
              ("serve-" + std::to_string(::getpid()) + "-" + std::to_string(Counter()++));
    fs::create_directories(s->dir_);
    const std::string port_file = (s->dir_ / "port").string();
    std::vector<std::string> argv = {STARFORGE_FORGE_BIN, "serve",       "--listen",
                                     "127.0.0.1:0",       "--port-file", port_file};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> envv = {"PATH=/usr/bin:/bin", "HOME=" + root.string(),
                                     "FORGE_STORAGE_ROOT=" + root.string()};
    for (const char* pass : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
      if (const char* v = std::getenv(pass)) envv.push_back(std::string(pass) + "=" + v);
    for (const auto& [k, v] : env)
      envv.push_back(k + "=" + v);
    const std::string out = (s->dir_ / "stdout").string();
    const std::string err = (s->dir_ / "stderr").string();
    const pid_t parent = ::getpid();
    s->pid_ = ::fork();
    if (s->pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
      if (::getppid() != parent) ::_exit(1);
      if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr))
        ::_exit(1);
      std::vector<char*> a, e;
      for (auto& x : argv)
        a.push_back(x.data());
      a.push_back(nullptr);
      for (auto& x : envv)
        e.push_back(x.data());
      e.push_back(nullptr);
      ::execve(a[0], a.data(), e.data());
      ::_exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (fs::exists(port_file)) {
        s->port_ = std::atoi(Slurp(port_file).c_str());
        if (s->port_ > 0) return s;
      }
      int status = 0;
      if (::waitpid(s->pid_, &status, WNOHANG) == s->pid_) {
        s->pid_ = -1;
        s->exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        *error = "forge serve exited (" + std::to_string(s->exit_code_) +
                 ") before listening; stderr:\n" + s->Stderr();
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    *error = "forge serve did not listen within 30 s; stderr:\n" + s->Stderr();
    return nullptr;
  }

  ~ServeProcess() {
    if (pid_ > 0) Stop(SIGKILL);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Sends `sig` and waits (up to `timeout`, then SIGKILL); the exit code, 128+N for signal N,
  // or -1 when it had to be killed.
  int Stop(int sig = SIGTERM, std::chrono::seconds timeout = std::chrono::seconds(20)) {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) != pid_) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return exit_code_ = -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string Stdout() const { return Slurp(dir_ / "stdout"); }
  std::string Stderr() const { return Slurp(dir_ / "stderr"); }
  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(30, 0);
    c->set_connection_timeout(5, 0);
    return c;
  }

 private:
  ServeProcess() = default;
  static int& Counter() {
    static int n = 0;
    return n;
  }
  fs::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
};

// One parsed Server-Sent Event.
struct SseEvent {
  std::string id;
  std::string event;
  std::string data;  // data lines joined with '\n'
};

// Parses complete events ("\n\n"-terminated) from `buf`, leaving the rest; comments are
// counted in *comments.
inline std::vector<SseEvent> ParseSse(std::string* buf, int* comments) {
  std::vector<SseEvent> out;
  size_t end;
  while ((end = buf->find("\n\n")) != std::string::npos) {
    std::string block = buf->substr(0, end);
    buf->erase(0, end + 2);
    SseEvent ev;
    bool any = false, data = false;
    std::istringstream in(block);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with(":")) {
        ++*comments;
        continue;
      }
      any = true;
      const size_t colon = line.find(": ");
      const std::string field = line.substr(0, colon);
      const std::string value = colon == std::string::npos ? "" : line.substr(colon + 2);
      if (field == "id") ev.id = value;
      if (field == "event") ev.event = value;
      if (field == "data") {
        ev.data += (data ? "\n" : "") + value;
        data = true;
      }
    }
    if (any) out.push_back(ev);
  }
  return out;
}

}  // namespace starforge::api::testing
