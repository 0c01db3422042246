// The in-capsule runner's contract (runner/README.md), shared by both fleets: where it and the
// JobSpec lie in a capsule, how it is started and the environment it is given. Users' `env` may
// not set these variables.
#pragma once

namespace starforge::capsule {

inline constexpr const char* kJobSpecPath = ".starforge/jobspec.json";  // authoritative JobSpec
inline constexpr const char* kRunnerPath = ".starforge/runner.pyz";
// Ray's unzip drops mode bits, so the runner is always started through the interpreter:
// `python3 .starforge/runner.pyz run` runs the argv of the capsule's jobspec.json.
inline constexpr const char* kRunnerInterpreter = "python3";
inline constexpr const char* kRunnerCommand = "run";

inline constexpr const char* kEnvJobId = "FORGE_JOB_ID";
inline constexpr const char* kEnvStorageRoot = "FORGE_STORAGE_ROOT";
inline constexpr const char* kEnvCapsuleSha256 = "FORGE_CAPSULE_SHA256";
inline constexpr const char* kEnvCorpusDir = "FORGE_CORPUS_DIR";
inline constexpr const char* kEnvNemoRlDir = "FORGE_NEMO_RL_DIR";
// The directories of the earlier jobs named in `resumeFrom`, ':'-separated, in the JobSpec's order.
inline constexpr const char* kEnvResumeDirs = "FORGE_RESUME_DIRS";

}  // namespace starforge::capsule
