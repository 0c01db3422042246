// `forge capsule build`, `forge capsule inspect`.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>

#include "command.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/collect.h"
#include "starforge/capsule/inspect.h"
#include "starforge/capsule/reuse.h"
#include "starforge/cli/forge.h"
#include "starforge/common/format.h"
#include "starforge/jobspec/parse.h"

namespace starforge::cli {

namespace {

// Where `forge capsule build` writes without -o, relative to the code directory.
constexpr const char* kDefaultOutputDir = ".forge/capsules";
// What the last build of the tree can lend the next one (capsule/reuse.h); in .forge/, which the
// default rules ignore.
constexpr const char* kReuseIndexFile = ".forge/capsule.index";

std::string Column(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%10s", capsule::FormatBytes(bytes).c_str());
  return buf;
}

int Build(Context& c, const std::string& dir, const std::string& job_file,
          const std::string& output, bool list) {
  config::Config cfg;
  if (!LoadConfig(c, &cfg)) return kExitUsage;
  if (!list && job_file.empty()) {
    c.err << "forge: capsule build: --job is required (the JobSpec goes into the capsule)\n";
    return kExitUsage;
  }
  std::optional<jobspec::JobSpec> spec;
  if (!job_file.empty()) {
    spec = LoadJob(c, job_file, cfg);
    if (!spec) return kExitInvalid;
  }

  // The previous build's index is read while the tree is walked (neither needs the other).
  const std::filesystem::path index_file = std::filesystem::path(dir) / kReuseIndexFile;
  std::future<capsule::ReuseIndex> loading;
  if (!list) loading = std::async(std::launch::async, capsule::ReuseIndex::Load, index_file);
  capsule::CollectResult files = capsule::Collect(dir);
  for (const auto& w : files.warnings)
    c.err << "forge: warning: " << w << "\n";
  if (!files.ok()) {
    for (const auto& e : files.errors)
      c.err << "forge: " << dir << ": " << e << "\n";
    return kExitInvalid;
  }

  if (list) {
    for (const auto& f : files.files)
      c.out << Column(f.size) << (f.executable ? "  x  " : "     ") << f.path << "\n";
    if (spec) {
      c.out << Column(jobspec::ToCanonicalText(*spec).size()) << "     " << capsule::kJobSpecPath
            << "\n";
    }
    c.out << "     " << capsule::kRunnerPath << ", " << capsule::kManifestPath << " (StarForge's)\n"
          << Plural(std::ssize(files.files), "file", "files") << " of yours, "
          << capsule::FormatBytes(files.TotalBytes()) << " before compression\n";
    return kExitOk;
  }

  capsule::BuildOptions opts;
  if (output.empty()) {
    // Inside the code directory's .forge/, which the default rules ignore: a capsule written
    // into the tree would otherwise go into the next capsule.
    opts.output_dir = std::filesystem::path(dir) / kDefaultOutputDir;
    std::error_code ec;
    std::filesystem::create_directories(opts.output_dir, ec);
    if (ec) {
      c.err << "forge: cannot create " << opts.output_dir.string() << ": " << ec.message() << "\n";
      return kExitInvalid;
    }
  } else {
    opts.output = output;
    std::error_code ec;
    const auto tree = std::filesystem::weakly_canonical(dir, ec);
    const auto out = std::filesystem::weakly_canonical(output, ec);
    const auto rel = out.lexically_relative(tree);
    if (!ec && !rel.empty() && *rel.begin() != ".." && *rel.begin() != ".forge") {
      c.err << "forge: warning: " << output << " is inside " << dir
            << "; add it to .forgeignore, or the next capsule will contain this one\n";
    }
  }
  // Only once the build has taken a moment.
  ProgressLine progress(c, std::chrono::milliseconds(500), std::chrono::milliseconds(0));
  opts.max_bytes = cfg.capsule_max_bytes;
  opts.progress = [&progress](const capsule::BuildProgress& p) {
    const char* what = p.phase == capsule::BuildProgress::Phase::kHashing ? "hashing" : "writing";
    const int percent = p.bytes_total ? static_cast<int>(100 * p.bytes_done / p.bytes_total) : 100;
    progress.Show(std::string(what) + " " + capsule::FormatBytes(p.bytes_done) + " of " +
                  capsule::FormatBytes(p.bytes_total) + " (" + std::to_string(percent) + "%)");
  };
  const capsule::ReuseIndex reuse = loading.get();
  opts.reuse = &reuse;
  capsule::BuildResult r = capsule::Build(files.files, *spec, opts);
  progress.Clear();
  if (!r.ok()) {
    for (const auto& e : r.errors)
      c.err << "forge: " << e << "\n";
    return kExitInvalid;
  }
  capsule::ReuseIndex::Save(index_file, r.path, r.entries, r.checkpoints);
  c.out << "capsule  " << r.path.string() << "\n"
        << "sha256   " << r.sha256 << "\n"
        << "size     " << r.size << " bytes (" << capsule::FormatBytes(r.size) << ")\n"
        << "files    " << r.manifest.files.size() + 1 << " (" << r.user_files
        << " yours + 3 StarForge's)\n"
        << "key      " << capsule::ObjectKey(r.sha256) << "\n";
  return kExitOk;
}

int Inspect(Context& c, const std::string& file) {
  capsule::InspectResult r = capsule::Inspect(file);
  if (!r.sha256.empty()) {
    c.out << "capsule  " << file << "\n"
          << "sha256   " << r.sha256 << "\n"
          << "size     " << r.size << " bytes (" << capsule::FormatBytes(r.size) << ")\n";
  }
  if (r.manifest) {
    c.out << "files    " << r.manifest->files.size() + 1 << " (manifest version "
          << r.manifest->version << ")\n";
    for (const auto& f : r.manifest->files) {
      c.out << Column(f.size) << (f.executable ? "  x  " : "     ") << f.sha256 << "  " << f.path
            << "\n";
    }
  }
  for (const auto& p : r.problems)
    c.err << "forge: " << file << ": " << p << "\n";
  if (!r.ok()) {
    c.err << "forge: " << file << ": " << Plural(std::ssize(r.problems), "problem", "problems")
          << "; do not run this capsule\n";
    return kExitInvalid;
  }
  c.out << "ok: " << Plural(static_cast<int64_t>(r.verified), "file", "files")
        << " verified against the manifest\n";
  return kExitOk;
}

}  // namespace

void RegisterCapsuleCommands(Registry& registry) {
  struct Options {
    std::string dir;
    std::string job_file;
    std::string output;
    bool list = false;
    std::string file;
  };
  auto opts = std::make_shared<Options>();

  CLI::App* capsule =
      registry.app().add_subcommand("capsule", "Build and check Job Capsules (code + JobSpec)");
  capsule->require_subcommand(1);

  CLI::App* build = registry.Add(
      capsule, "build",
      "Package a code directory and a JobSpec into a capsule; print its digest, size and file "
      "count",
      [opts](Context& c) { return Build(c, opts->dir, opts->job_file, opts->output, opts->list); });
  build->add_option("DIR", opts->dir, "Code directory (.forgeignore at its root applies)")
      ->required();
  build->add_option("--job", opts->job_file, "JobSpec file (YAML or JSON; - for stdin)");
  build->add_option("-o,--output", opts->output,
                    "Capsule file (default: DIR/.forge/capsules/sha256-<hex>.zip)");
  build->add_flag("--list", opts->list, "Show what would go in, with sizes, without building");

  CLI::App* inspect = registry.Add(
      capsule, "inspect", "List a capsule's manifest and verify every entry; exit 1 on a mismatch",
      [opts](Context& c) { return Inspect(c, opts->file); });
  inspect->add_option("FILE", opts->file, "Capsule file")->required();
}

}  // namespace starforge::cli
