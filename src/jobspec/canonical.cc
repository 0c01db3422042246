#include "starforge/jobspec/parse.h"

namespace starforge::jobspec {

namespace {

using nlohmann::json;

json PoolToJson(const Pool& pool) {
  json out = {
      {"name", pool.name}, {"machines", pool.machines}, {"gpusPerMachine", pool.gpus_per_machine}};
  if (!pool.gpu_series.empty()) out["gpuSeries"] = pool.gpu_series;
  if (pool.cpus_per_machine) out["cpusPerMachine"] = *pool.cpus_per_machine;
  if (pool.memory_per_machine) out["memoryPerMachine"] = *pool.memory_per_machine;
  return out;
}

}  // namespace

json ToCanonicalJson(const JobSpec& spec) {
  json pools = json::array();
  for (const auto& pool : spec.pools)
    pools.push_back(PoolToJson(pool));
  json env = json::object();
  for (const auto& [name, value] : spec.env)
    env[name] = value;
  json out = {
      {"name", spec.name},
      {"fleet", spec.fleet},
      {"recipe", spec.recipe},
      {"image", spec.image},
      {"entrypoint", spec.entrypoint},
      {"env", std::move(env)},
      {"pools", std::move(pools)},
      {"deadlines",
       {{"preRunningSeconds", spec.pre_running_seconds}, {"runningSeconds", spec.running_seconds}}},
      {"corpus", spec.corpus},
  };
  if (spec.queue) out["queue"] = *spec.queue;
  // Only when set, so that the canonical form of every spec without it stays as it was.
  if (spec.queue_seconds > 0) out["deadlines"]["queueSeconds"] = spec.queue_seconds;
  return out;
}

std::string ToCanonicalText(const JobSpec& spec) {
  return ToCanonicalJson(spec).dump() + "\n";
}

}  // namespace starforge::jobspec
