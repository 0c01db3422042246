// Capsule build benchmark: a ~1 GiB tree of ~20 000 files against the floor of reading and
// hashing every byte once with the real sha256sum. One run; prints a table. See bench/README.md.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "starforge/capsule/cache.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/collect.h"
#include "starforge/jobspec/parse.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using starforge::capsule::FormatBytes;

struct Flags {
  uint64_t size_mib = 1024;
  size_t files = 20000;
  int incompressible_percent = 40;  // share of the bytes that is random
  int threads = 0;
  std::string dir;  // default: a new directory under $TMPDIR (or /tmp)
  bool keep = false;
  bool single_thread = true;  // also time a one-thread build
  std::string generate;       // only write the tree here and exit (bench/capsule_speed.sh)
};

void Usage() {
  std::cerr << "usage: capsule_bench [--size-mib N] [--files N] [--incompressible-percent P]\n"
               "                     [--threads N] [--dir DIR] [--keep] [--no-single-thread]\n"
               "       capsule_bench --generate DIR [--size-mib N] [--files N] "
               "[--incompressible-percent P]\n";
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        Usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--size-mib") {
      f->size_mib = std::stoull(value());
    } else if (a == "--files") {
      f->files = std::stoull(value());
    } else if (a == "--incompressible-percent") {
      f->incompressible_percent = std::stoi(value());
    } else if (a == "--threads") {
      f->threads = std::stoi(value());
    } else if (a == "--dir") {
      f->dir = value();
    } else if (a == "--keep") {
      f->keep = true;
    } else if (a == "--generate") {
      f->generate = value();
    } else if (a == "--no-single-thread") {
      f->single_thread = false;
    } else {
      Usage();
      return false;
    }
  }
  return f->files > 0 && f->size_mib > 0;
}

// splitmix64: fast, and the same tree on every run and machine.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) / 9007199254740992.0; }
};

// Python-looking text: deflates about 4:1, like real source and configs.
void FillText(Rng& rng, std::string* out, size_t size) {
  static const char* kWords[] = {
      "def",  "class", "return", "import", "self",  "torch", "model",  "loss",   "optimizer",
      "step", "batch", "tensor", "for",    "in",    "range", "if",     "else",   "print",
      "lr",   "grad",  "config", "yaml",   "train", "eval",  "reward", "policy", "rollout",
      "=",    "(",     ")",      ":",      "0.001", "1e-4",  "None",   "True",   "False"};
  out->clear();
  out->reserve(size + 64);
  while (out->size() < size) {
    const int indent = static_cast<int>(rng.Next() % 3) * 4;
    out->append(static_cast<size_t>(indent), ' ');
    const int words = 2 + static_cast<int>(rng.Next() % 9);
    for (int w = 0; w < words; ++w) {
      out->append(kWords[rng.Next() % (sizeof kWords / sizeof *kWords)]);
      out->push_back(w + 1 < words ? ' ' : '\n');
    }
    if (rng.Next() % 7 == 0) out->append(std::to_string(rng.Next() % 100000));
  }
  out->resize(size);
}

void FillRandom(Rng& rng, std::string* out, size_t size) {
  out->resize((size + 7) / 8 * 8);
  for (size_t i = 0; i < out->size(); i += 8) {
    const uint64_t v = rng.Next();
    std::memcpy(out->data() + i, &v, 8);
  }
  out->resize(size);
}

struct TreeStats {
  uint64_t bytes = 0;
  uint64_t random_bytes = 0;
  size_t files = 0;
};

// Sizes are log-uniform between 200 B and 8 MiB, then scaled to the requested total; the largest
// files alternate between random and text until the requested share of random bytes is reached.
TreeStats Generate(const fs::path& root, const Flags& f) {
  Rng rng{42};
  std::vector<double> raw(f.files);
  double sum = 0;
  for (auto& r : raw) {
    r = std::exp(std::log(200.0) + rng.Uniform() * (std::log(8.0 * 1024 * 1024) - std::log(200.0)));
    sum += r;
  }
  const double target = static_cast<double>(f.size_mib) * 1024 * 1024;
  std::vector<size_t> sizes(f.files);
  for (size_t i = 0; i < f.files; ++i)
    sizes[i] = std::max<size_t>(1, static_cast<size_t>(raw[i] * target / sum));
  std::vector<size_t> by_size(f.files);
  for (size_t i = 0; i < f.files; ++i)
    by_size[i] = i;
  std::sort(by_size.begin(), by_size.end(),
            [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<bool> random(f.files, false);
  const double want_random = target * f.incompressible_percent / 100.0;
  double random_so_far = 0;
  for (size_t k = 0; k < by_size.size(); ++k) {
    const size_t i = by_size[k];
    if (random_so_far + sizes[i] <= want_random * 1.02 && (k % 2 == 0 || k > 50)) {
      random[i] = true;
      random_so_far += sizes[i];
    }
  }
  TreeStats st;
  std::string buf;
  for (size_t i = 0; i < f.files; ++i) {
    const fs::path dir = root / ("pkg" + std::to_string(i % 37)) / ("mod" + std::to_string(i % 11));
    fs::create_directories(dir);
    if (random[i])
      FillRandom(rng, &buf, sizes[i]);
    else
      FillText(rng, &buf, sizes[i]);
    std::string name = "f";
    name += std::to_string(i);
    name += random[i] ? ".bin" : ".py";
    std::ofstream(dir / name, std::ios::binary)
        .write(buf.data(), static_cast<std::streamsize>(buf.size()));
    st.bytes += sizes[i];
    st.random_bytes += random[i] ? sizes[i] : 0;
    ++st.files;
  }
  return st;
}

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// User + system CPU seconds of this process (all threads) or of its waited-for children: the
// machine may be shared, so CPU time is reported next to wall-clock time.
double CpuSeconds(int who) {
  rusage u{};
  ::getrusage(who, &u);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

struct Timing {
  double wall = 0;
  double cpu = 0;
};

// The floor: coreutils sha256sum over the same files, one process at a time as xargs batches.
Timing TimeSha256sum(const fs::path& root) {
  const std::string cmd = "cd '" + root.string() +
                          "' && find . -type f -print0 | LC_ALL=C xargs -0 sha256sum >/dev/null";
  const double cpu0 = CpuSeconds(RUSAGE_CHILDREN);
  const auto start = Clock::now();
  const int status = std::system(cmd.c_str());
  Timing t{Seconds(Clock::now() - start), CpuSeconds(RUSAGE_CHILDREN) - cpu0};
  if (status != 0) {
    std::cerr << "capsule_bench: sha256sum failed\n";
    std::exit(1);
  }
  return t;
}

struct BuildTiming {
  double total = 0;
  double cpu = 0;
  double hashing = 0;  // until the first "writing" progress report (±0.1 s)
  starforge::capsule::BuildResult result;
};

BuildTiming TimeBuild(const fs::path& root, const fs::path& out, int threads,
                      const starforge::jobspec::JobSpec& spec) {
  BuildTiming t;
  const double cpu0 = CpuSeconds(RUSAGE_SELF);
  const auto start = Clock::now();
  starforge::capsule::CollectResult files = starforge::capsule::Collect(root);
  if (!files.ok()) {
    for (const auto& e : files.errors)
      std::cerr << e << "\n";
    std::exit(1);
  }
  starforge::capsule::BuildOptions opts;
  opts.output = out;
  opts.max_bytes = INT64_MAX;  // measuring speed, not policy
  opts.threads = threads;
  opts.progress = [&](const starforge::capsule::BuildProgress& p) {
    if (p.phase == starforge::capsule::BuildProgress::Phase::kWriting && t.hashing == 0)
      t.hashing = Seconds(Clock::now() - start);
  };
  t.result = starforge::capsule::Build(files.files, spec, opts);
  t.total = Seconds(Clock::now() - start);
  t.cpu = CpuSeconds(RUSAGE_SELF) - cpu0;
  if (!t.result.ok()) {
    for (const auto& e : t.result.errors)
      std::cerr << e << "\n";
    std::exit(1);
  }
  return t;
}

void Row(const std::string& what, double seconds, double cpu, uint64_t bytes, double floor) {
  std::printf("%-34s %8.2f s %8.0f MiB/s %8.2fx", what.c_str(), seconds,
              static_cast<double>(bytes) / (1024.0 * 1024.0) / seconds, seconds / floor);
  if (cpu > 0)
    std::printf(" %8.2f s\n", cpu);
  else
    std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) return 2;
  if (!flags.generate.empty()) {
    const TreeStats st = Generate(flags.generate, flags);
    std::printf("%zu files, %llu bytes, %llu random\n", st.files,
                static_cast<unsigned long long>(st.bytes),
                static_cast<unsigned long long>(st.random_bytes));
    return 0;
  }
  fs::path base;
  if (flags.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp ? tmp : "/tmp") + "/capsule-bench-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    base = tmpl;
  } else {
    base = flags.dir;
    fs::create_directories(base);
  }
  const fs::path tree = base / "tree";
  const fs::path out = base / "out";
  fs::create_directories(out);

  starforge::jobspec::ParseResult parsed = starforge::jobspec::Parse(
      "name: bench\nimage: python:3.11\nentrypoint: python train.py\npools: [{name: main}]\n",
      starforge::jobspec::Defaults{});
  if (!parsed.ok()) return 1;

  std::printf("generating %zu files, %s, in %s ...\n", flags.files,
              FormatBytes(flags.size_mib << 20).c_str(), tree.c_str());
  std::fflush(stdout);
  auto start = Clock::now();
  const TreeStats st = Generate(tree, flags);
  const double gen = Seconds(Clock::now() - start);

  // Warm the page cache once so that every measurement below reads from memory, not disk.
  TimeSha256sum(tree);
  const Timing floor = TimeSha256sum(tree);
  const int threads = flags.threads > 0
                          ? flags.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // The first build also fills the digest cache, as a resubmitting client would.
  const starforge::capsule::DigestCache cache(base / "digest-cache");
  const starforge::capsule::Fingerprint before =
      cache.Compute(starforge::capsule::Collect(tree).files, *parsed.spec);
  BuildTiming build = TimeBuild(tree, out / "a.zip", flags.threads, *parsed.spec);
  const starforge::capsule::Fingerprint after =
      cache.Compute(starforge::capsule::Collect(tree).files, *parsed.spec);
  if (after.key == before.key) cache.Remember(after, build.result.sha256);
  BuildTiming resubmit = TimeBuild(tree, out / "b.zip", flags.threads, *parsed.spec);
  // Resubmitting with the cache: walk, stat every file, look the digest up (then a HEAD on the
  // object store would find the capsule: no build, no upload).
  const double cached_cpu0 = CpuSeconds(RUSAGE_SELF);
  start = Clock::now();
  const std::optional<std::string> cached =
      cache.Lookup(cache.Compute(starforge::capsule::Collect(tree).files, *parsed.spec));
  const Timing cached_resubmit{Seconds(Clock::now() - start),
                               CpuSeconds(RUSAGE_SELF) - cached_cpu0};
  BuildTiming single;
  if (flags.single_thread) single = TimeBuild(tree, out / "c.zip", 1, *parsed.spec);

  const bool same = build.result.sha256 == resubmit.result.sha256 &&
                    (!flags.single_thread || single.result.sha256 == build.result.sha256);
  std::printf(
      "\ntree: %zu files, %s (%.0f%% random bytes), generated in %.1f s; warm page cache; "
      "%u cores\n\n",
      st.files, FormatBytes(st.bytes).c_str(),
      100.0 * static_cast<double>(st.random_bytes) / static_cast<double>(st.bytes), gen,
      std::thread::hardware_concurrency());
  std::printf("%-34s %10s %14s %9s %10s\n", "", "wall", "throughput", "vs floor", "cpu");
  Row("sha256sum (the floor)", floor.wall, floor.cpu, st.bytes, floor.wall);
  Row("capsule build (" + std::to_string(threads) + " threads)", build.total, build.cpu, st.bytes,
      floor.wall);
  Row("  of which hashing pass", build.hashing, 0, st.bytes, floor.wall);
  Row("resubmit unchanged (build again)", resubmit.total, resubmit.cpu, st.bytes, floor.wall);
  if (cached && *cached == build.result.sha256)
    Row("resubmit unchanged (digest cache)", cached_resubmit.wall, cached_resubmit.cpu, st.bytes,
        floor.wall);
  else
    std::printf("resubmit unchanged (digest cache)  not cached: the files were too fresh\n");
  if (flags.single_thread)
    Row("capsule build (1 thread)", single.total, single.cpu, st.bytes, floor.wall);
  std::printf("\ncapsule: %s (%.1f%% of the tree), %zu entries, sha256 %s%s\n",
              FormatBytes(build.result.size).c_str(),
              100.0 * static_cast<double>(build.result.size) / static_cast<double>(st.bytes),
              build.result.manifest.files.size() + 1, build.result.sha256.c_str(),
              same ? "" : "  (MISMATCH between runs!)");
  if (!flags.keep) {
    std::error_code ec;
    fs::remove_all(base, ec);
  } else {
    std::printf("kept %s\n", base.c_str());
  }
  return same ? 0 : 1;
}
