#include "starforge/playground/backend.h"

namespace starforge::playground {

fleet::Admission AdmitAsJob(fleet::Fleet& fleet, const jobspec::JobSpec& job) {
  fleet::Admission a = fleet.Admit(job);
  for (const auto& [job_field, field] :
       {std::pair{"gpusPerMachine", "gpus"}, std::pair{"gpuSeries", "series"},
        std::pair{"cpusPerMachine", "cpus"}, std::pair{"memoryPerMachine", "memory"}}) {
    if (a.field.find(job_field) != std::string::npos) a.field = field;
  }
  return a;
}

}  // namespace starforge::playground
