// What this machine offers the local fleet.
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "local_internal.h"
#include "starforge/fleet/local_fleet.h"

namespace starforge::fleet {

namespace {

int64_t CountCpus() {
  // The CPUs this process may run on (a container or taskset may allow fewer than exist).
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? online : 1;
}

int64_t CountGpus() {
  const char* path = std::getenv("PATH");
  const std::string smi = local::FindProgram("nvidia-smi", path != nullptr ? path : "");
  if (smi.empty()) return 0;
  // `nvidia-smi -L` prints one "GPU <n>: <name> (UUID: …)" line per device.
  FILE* out = ::popen(("'" + smi + "' -L 2>/dev/null").c_str(), "r");
  if (out == nullptr) return 0;
  int64_t gpus = 0;
  char line[1024];
  bool at_line_start = true;
  while (::fgets(line, sizeof line, out) != nullptr) {
    const std::string text = line;
    if (at_line_start && text.rfind("GPU ", 0) == 0) ++gpus;
    at_line_start = !text.empty() && text.back() == '\n';
  }
  ::pclose(out);
  return gpus;
}

int64_t PhysicalMemory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

}  // namespace

LocalResources DetectLocalResources() {
  LocalResources r;
  r.cpus = CountCpus();
  r.gpus = CountGpus();
  r.memory_bytes = PhysicalMemory();
  return r;
}

}  // namespace starforge::fleet
