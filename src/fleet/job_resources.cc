#include "starforge/fleet/job_resources.h"

#include <cmath>

#include "starforge/fleet/local_process.h"
#include "starforge/kuberay/constants.h"
#include "starforge/kuberay/render.h"

namespace starforge::fleet {

namespace {

nlohmann::json Group(const std::string& group, const jobspec::Pool& pool, int64_t pods,
                     const config::Config& config) {
  nlohmann::json requests = {{"gpus", 0}};
  const nlohmann::json r = kuberay::MachineResources(pool, config);
  if (r.is_object() && r.contains("requests")) {
    for (const auto& [key, value] : r["requests"].items()) {
      if (key == kuberay::kGpuResource)
        requests["gpus"] = pool.gpus_per_machine;
      else
        requests[key] = value;
    }
  }
  return {{"group", group}, {"pool", pool.name}, {"pods", pods}, {"requests", requests}};
}

}  // namespace

nlohmann::json KubeRayPodRequests(const jobspec::JobSpec& spec, const config::Config& config) {
  nlohmann::json out = nlohmann::json::array();
  if (spec.pools.empty()) return out;
  const jobspec::Pool& primary = spec.PrimaryPool();
  out.push_back(Group("head", primary, 1, config));
  if (primary.machines > 1)
    out.push_back(Group(primary.name, primary, primary.machines - 1, config));
  for (size_t i = 1; i < spec.pools.size(); ++i)
    out.push_back(Group(spec.pools[i].name, spec.pools[i], spec.pools[i].machines, config));
  return out;
}

std::optional<nlohmann::json> RecordedUsage(const std::filesystem::path& job_dir) {
  const std::optional<nlohmann::json> status = local::ReadJson(job_dir / "status.json");
  if (!status) return std::nullopt;
  const auto usage = status->find("usage");
  if (usage == status->end() || !usage->is_object()) return std::nullopt;
  nlohmann::json out = nlohmann::json::object();
  for (const char* key : {"cpuSeconds", "maxRssBytes"}) {
    const auto v = usage->find(key);
    if (v == usage->end() || !v->is_number()) return std::nullopt;
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < 0 || d > 1e18) return std::nullopt;
    if (std::string(key) == "maxRssBytes")
      out[key] = static_cast<int64_t>(d);
    else
      out[key] = std::round(d * 1000) / 1000;  // milliseconds are enough
  }
  return out;
}

}  // namespace starforge::fleet
