// JobSpec v1: the user's contract. See README.md ("JobSpec v1") for the field reference.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace starforge::jobspec {

inline constexpr size_t kMaxJobNameLength = 40;
inline constexpr size_t kMaxPoolNameLength = 15;

// A group of identical machines. The first pool of a job is its primary pool.
struct Pool {
  std::string name;                             // DNS label ≤ 15 chars, unique within the job
  std::string gpu_series;                       // node label value; "" = any node (CPU-only pools)
  int64_t machines = 1;                         // ≥ 1
  int64_t gpus_per_machine = 0;                 // ≥ 0
  std::optional<std::string> cpus_per_machine;  // Kubernetes quantity, > 0
  std::optional<std::string> memory_per_machine;  // Kubernetes quantity, > 0
  friend bool operator==(const Pool&, const Pool&) = default;
};

// A validated JobSpec with every default filled in (see Canonicalize / ToCanonicalJson).
struct JobSpec {
  std::string name;
  std::string fleet;                    // "local" | "kuberay"
  std::string recipe;                   // "none" | "nemo-rl"
  std::string image;                    // resolved: the recipe's image when the spec gave none
  std::vector<std::string> entrypoint;  // argv; a string entrypoint is split into shell words
  std::map<std::string, std::string> env;
  std::optional<std::string> code;  // client-side only: never part of the canonical form
  std::vector<Pool> pools;          // ≥ 1
  int64_t pre_running_seconds = 0;  // > 0 once defaults are filled
  int64_t running_seconds = 0;      // 0 = no running deadline
  int64_t queue_seconds = 0;        // 0 = no limit on one wait in the fleet's queue (Kueue)
  bool corpus = false;
  std::optional<std::string> queue;  // Kueue LocalQueue name
  friend bool operator==(const JobSpec&, const JobSpec&) = default;

  const Pool& PrimaryPool() const { return pools.front(); }
  int64_t TotalMachines() const;
  int64_t TotalGpus() const;
};

}  // namespace starforge::jobspec
