#include "starforge/jobspec/jobspec.h"

namespace starforge::jobspec {

int64_t JobSpec::TotalMachines() const {
  int64_t total = 0;
  for (const auto& pool : pools)
    total += pool.machines;
  return total;
}

int64_t JobSpec::TotalGpus() const {
  int64_t total = 0;
  for (const auto& pool : pools)
    total += pool.machines * pool.gpus_per_machine;
  return total;
}

}  // namespace starforge::jobspec
