#include "starforge/capsule/capsule.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "internal.h"
#include "starforge/capsule/ignore.h"
#include "starforge/jobspec/parse.h"
#include "starforge/runner/embedded.h"

namespace starforge::capsule {

using internal::ErrnoText;
using internal::Fd;
using internal::Printable;
using internal::ReadFull;

std::string ObjectKey(std::string_view sha256_hex) {
  return "capsules/" + FileName(sha256_hex);
}

std::string FileName(std::string_view sha256_hex) {
  return "sha256-" + std::string(sha256_hex) + ".zip";
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < kUnits.size()) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  return buf;
}

// Integer arithmetic only, so that no floating-point difference between machines can flip the
// decision. Σcount² of a uniform histogram is about n + n²/256; text is far above that
// (README-like text ≈ 12×), fp32 weights ≈ 4×, gzip/JPEG/random data within a few percent.
bool LooksIncompressible(std::string_view head) {
  const uint64_t n = head.size();
  if (n < 512) return false;  // too little to judge; deflate (libzip stores it if that is smaller)
  std::array<uint64_t, 256> counts{};
  for (unsigned char c : head)
    ++counts[c];
  uint64_t sum_sq = 0;
  for (uint64_t c : counts)
    sum_sq += c * c;
  return sum_sq * 256 * 10 <= (256 * n + n * n) * 11;
}

namespace {

constexpr size_t kHeadBytes = 64 << 10;
constexpr size_t kReadBuffer = 1 << 20;
constexpr int kDeflateLevel = 6;
// 1980-01-01 00:00:00, the earliest DOS date: what every entry carries.
constexpr zip_uint16_t kDosTime = 0;
constexpr zip_uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;
// Fixed per-entry bytes of a zip: local header (30) + central directory record (46), each
// followed by the name.
constexpr uint64_t kEntryOverhead = 30 + 46;
constexpr uint64_t kEndOfCentralDirectory = 22;

// What the hashing pass learnt about one file; the writing pass checks the file still matches.
struct Hashed {
  std::string sha256;
  uint64_t size = 0;
  bool executable = false;
  bool store = false;
  dev_t dev = 0;
  ino_t ino = 0;
  timespec mtime{};
  timespec ctime{};
  std::string error;
};

bool SameFile(const struct stat& st, const Hashed& h) {
  return st.st_dev == h.dev && st.st_ino == h.ino && static_cast<uint64_t>(st.st_size) == h.size &&
         st.st_mtim.tv_sec == h.mtime.tv_sec && st.st_mtim.tv_nsec == h.mtime.tv_nsec &&
         st.st_ctim.tv_sec == h.ctime.tv_sec && st.st_ctim.tv_nsec == h.ctime.tv_nsec;
}

// Hashes one file. `stop` lets a worker give up early once the capsule is known to be too big.
Hashed HashFile(const InputFile& in, std::vector<char>& buf, std::atomic<uint64_t>& bytes_done,
                const std::atomic<bool>& stop) {
  Hashed h;
  const std::string shown = Printable(in.path);
  Fd fd(::open(in.source.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    h.error = shown + ": cannot read: " + ErrnoText(errno);
    return h;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    h.error = shown + ": " + ErrnoText(errno);
    return h;
  }
  if (!S_ISREG(st.st_mode)) {
    h.error = shown + ": not a regular file";
    return h;
  }
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  h.dev = st.st_dev;
  h.ino = st.st_ino;
  h.mtime = st.st_mtim;
  h.ctime = st.st_ctim;
  h.executable = (st.st_mode & S_IXUSR) != 0;
  internal::Sha256 sha;
  std::string head;
  uint64_t total = 0;
  while (true) {
    if (stop.load(std::memory_order_relaxed)) return h;
    const ssize_t n = ReadFull(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      h.error = shown + ": read error: " + ErrnoText(errno);
      return h;
    }
    if (n == 0) break;
    const auto un = static_cast<size_t>(n);
    if (head.size() < kHeadBytes) head.append(buf.data(), std::min(un, kHeadBytes - head.size()));
    sha.Update(buf.data(), un);
    total += un;
    bytes_done.fetch_add(un, std::memory_order_relaxed);
  }
  h.size = total;
  struct stat after {};
  if (::fstat(fd.get(), &after) != 0 || total != static_cast<uint64_t>(st.st_size) ||
      !SameFile(after, h)) {
    h.error = shown + ": changed while the capsule was being built; build again";
    return h;
  }
  h.sha256 = sha.HexDigest();
  h.store = LooksIncompressible(head);
  return h;
}

// `clause` starts the message: "the capsule is 600.0 MiB," or "the capsule would be".
std::string TooBigMessage(const std::string& clause, uint64_t max_bytes,
                          const std::vector<InputFile>& files) {
  std::vector<const InputFile*> largest;
  for (const auto& f : files)
    largest.push_back(&f);
  const size_t top = std::min<size_t>(10, largest.size());
  std::partial_sort(largest.begin(), largest.begin() + static_cast<ptrdiff_t>(top), largest.end(),
                    [](const InputFile* a, const InputFile* b) {
                      return a->size != b->size ? a->size > b->size : a->path < b->path;
                    });
  std::string msg = clause + " over the " + FormatBytes(max_bytes) +
                    " limit (FORGE_CAPSULE_MAX_BYTES; Ray holds the whole archive in memory on "
                    "every node). Largest files:";
  for (size_t i = 0; i < top; ++i) {
    char size[32];
    std::snprintf(size, sizeof size, "%10s", FormatBytes(largest[i]->size).c_str());
    msg += "\n  " + std::string(size) + "  " + Printable(largest[i]->path);
  }
  msg += "\nLeave out what the job does not need with a " + std::string(kIgnoreFileName) +
         " file (gitignore syntax) in the code directory, or raise FORGE_CAPSULE_MAX_BYTES.";
  return msg;
}

// Shared by every libzip callback of the writing pass (several threads during compression).
struct WriteContext {
  uint64_t max_bytes = 0;
  std::atomic<uint64_t> bytes_read{0};  // for progress
  std::atomic<uint64_t> bytes_since_check{0};
  std::atomic<bool> too_big{false};

  // Where the growing output lives, and the bytes known to come on top of it.
  std::string watch_dir;
  uint64_t pending_bytes = 0;

  void SetError(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = why;
  }
  std::string Error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // Called before each file: once the output plus what must still come is over the limit,
  // stop rather than compress the rest of a tree that cannot fit. libzip writes into temporary
  // files it names itself, so measure the directory.
  bool OverLimit() {
    if (too_big.load()) return true;
    if (bytes_since_check.load() < (1u << 20)) return false;
    bytes_since_check.store(0);
    uint64_t size = pending_bytes;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(watch_dir, ec)) {
      struct stat st {};
      if (::lstat(e.path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
        size += static_cast<uint64_t>(st.st_size);
    }
    if (size > max_bytes) too_big.store(true);
    return too_big.load();
  }

 private:
  std::mutex mu_;
  std::string error_;
};

// A user's file as a libzip source: re-opened when libzip gets to it, refused if it is no
// longer the file that was hashed, so the archive never disagrees with the manifest.
struct FileSource {
  const InputFile* in;
  const Hashed* hashed;
  WriteContext* ctx;
  Fd fd;
  uint64_t read = 0;
  zip_error_t error;

  zip_int64_t Fail(int ze, const std::string& why) {
    ctx->SetError(why);
    zip_error_set(&error, ze, 0);
    return -1;
  }
  zip_int64_t Changed() {
    return Fail(ZIP_ER_CHANGED,
                Printable(in->path) + ": changed while the capsule was being built; build again");
  }

  zip_int64_t Op(void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
    switch (cmd) {
      case ZIP_SOURCE_OPEN: {
        if (ctx->OverLimit()) return Fail(ZIP_ER_CANCELLED, "over the size limit");
        fd.Reset(::open(in->source.c_str(), O_RDONLY | O_CLOEXEC));
        struct stat st {};
        if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !SameFile(st, *hashed)) return Changed();
        ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
        read = 0;
        return 0;
      }
      case ZIP_SOURCE_READ: {
        const ssize_t n = ReadFull(fd.get(), static_cast<char*>(data), len);
        if (n < 0)
          return Fail(ZIP_ER_READ, Printable(in->path) + ": read error: " + ErrnoText(errno));
        read += static_cast<uint64_t>(n);
        ctx->bytes_read.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
        ctx->bytes_since_check.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
        struct stat st {};
        if (read > hashed->size ||
            (n == 0 &&
             (read != hashed->size || ::fstat(fd.get(), &st) != 0 || !SameFile(st, *hashed))))
          return Changed();
        return n;
      }
      case ZIP_SOURCE_CLOSE:
        fd.Reset();
        return 0;
      case ZIP_SOURCE_STAT: {
        auto* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, len, &error);
        if (st == nullptr) return -1;
        zip_stat_init(st);
        st->size = hashed->size;
        st->valid = ZIP_STAT_SIZE;
        return sizeof(zip_stat_t);
      }
      case ZIP_SOURCE_ERROR:
        return zip_error_to_data(&error, data, len);
      case ZIP_SOURCE_FREE:
        delete this;
        return 0;
      case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE,
                                              ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE,
                                              -1);
      default:
        zip_error_set(&error, ZIP_ER_OPNOTSUPP, 0);
        return -1;
    }
  }

  static zip_int64_t Callback(void* self, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
    return static_cast<FileSource*>(self)->Op(data, len, cmd);
  }
};

zip_source_t* NewFileSource(zip_t* za, const InputFile* in, const Hashed* hashed,
                            WriteContext* ctx) {
  auto* fs = new FileSource{in, hashed, ctx, Fd(), 0, {}};
  zip_error_init(&fs->error);
  zip_source_t* src = zip_source_function(za, &FileSource::Callback, fs);
  if (src == nullptr) delete fs;
  return src;
}

std::string ZipError(zip_t* za) {
  return zip_error_strerror(zip_get_error(za));
}

std::string OpenError(const std::string& path, int zerr) {
  zip_error_t e;
  zip_error_init_with_code(&e, zerr);
  std::string msg = "cannot create " + path + ": " + zip_error_strerror(&e);
  zip_error_fini(&e);
  return msg;
}

struct ZipDiscard {
  void operator()(zip_t* za) const { zip_discard(za); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipDiscard>;

// Deflates `which` files into the scratch archive `path` (entries named by position), so that
// several threads can compress at once; the capsule then copies the compressed bytes as they
// are. The result per file depends only on its contents, not on which spool it landed in.
std::string CompressSpool(const std::string& path, const std::vector<size_t>& which,
                          const std::vector<InputFile>& files, const std::vector<Hashed>& hashed,
                          WriteContext* ctx) {
  int zerr = 0;
  ZipPtr za(zip_open(path.c_str(), ZIP_CREATE | ZIP_EXCL, &zerr));
  if (!za) return OpenError(path, zerr);
  for (size_t k = 0; k < which.size(); ++k) {
    const size_t i = which[k];
    zip_source_t* src = NewFileSource(za.get(), &files[i], &hashed[i], ctx);
    const zip_int64_t idx = src ? zip_file_add(za.get(), std::to_string(k).c_str(), src, 0) : -1;
    if (idx < 0) {
      if (src) zip_source_free(src);
      return ZipError(za.get());
    }
    // DEFLATE, not ZIP_CM_DEFAULT: for a new entry libzip drops the level given with the
    // default method and deflates at level 9.
    if (zip_set_file_compression(za.get(), static_cast<zip_uint64_t>(idx), ZIP_CM_DEFLATE,
                                 kDeflateLevel) != 0)
      return ZipError(za.get());
  }
  if (zip_close(za.get()) != 0) {
    const std::string mine = ctx->Error();
    return mine.empty() ? "compressing: " + ZipError(za.get()) : mine;
  }
  za.release();  // zip_close freed it
  return "";
}

std::vector<std::string> CheckInputs(const std::vector<InputFile>& files) {
  std::vector<std::string> errors;
  if (files.empty()) {
    errors.push_back(
        "nothing to package: no files of yours are left after .forgeignore and the default "
        "ignore rules (a capsule needs at least one, next to .starforge/, or Ray would strip "
        "that lone directory when it unpacks the capsule)");
    return errors;
  }
  std::set<std::string_view> paths;
  for (const auto& f : files) {
    const std::string shown = Printable(f.path);
    if (std::string why = CheckArchivePath(f.path); !why.empty()) {
      errors.push_back(shown + ": the path " + why);
      continue;
    }
    if (f.path == kStarforgeDir || f.path.starts_with(std::string(kStarforgeDir) + "/")) {
      errors.push_back(shown + ": .starforge/ is reserved for StarForge's own files");
      continue;
    }
    if (!paths.insert(f.path).second) errors.push_back(shown + ": listed twice");
  }
  // "a" and "a/b" cannot both be files once unpacked.
  for (std::string_view p : paths) {
    for (size_t slash = p.find('/'); slash != std::string_view::npos;
         slash = p.find('/', slash + 1)) {
      if (paths.count(p.substr(0, slash)))
        errors.push_back(Printable(p.substr(0, slash)) + ": is a file, but " + Printable(p) +
                         " needs it to be a directory");
    }
  }
  return errors;
}

// Runs `work(t)` on `threads` threads and, on the calling thread, `tick()` about ten times a
// second until they are all done.
void RunParallel(size_t threads, const std::function<void(size_t)>& work,
                 const std::function<void()>& tick) {
  std::mutex mu;
  std::condition_variable cv;
  size_t running = threads;
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      work(t);
      std::lock_guard<std::mutex> lock(mu);
      --running;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return running == 0; })) {
      lock.unlock();
      tick();
      lock.lock();
    }
  }
  for (auto& t : pool)
    t.join();
}

// The private directory next to the destination that holds every temporary file of a build;
// removed with whatever is left in it.
class PrivateDir {
 public:
  explicit PrivateDir(const std::filesystem::path& parent) {
    std::string tmpl = (parent / ".forge-capsule-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~PrivateDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

BuildResult Build(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                  const BuildOptions& options) {
  BuildResult result;
  result.errors = CheckInputs(files);
  if (!result.ok()) return result;
  const uint64_t max_bytes = static_cast<uint64_t>(std::max<int64_t>(options.max_bytes, 0));
  size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads)
                                       : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, files.size());
  uint64_t bytes_total = 0;
  uint64_t overhead = kEndOfCentralDirectory;
  for (const auto& f : files) {
    bytes_total += f.size;
    overhead += kEntryOverhead + 2 * f.path.size();
  }
  auto report = [&](BuildProgress::Phase phase, uint64_t done) {
    if (options.progress) options.progress({phase, std::min(done, bytes_total), bytes_total});
  };

  // Pass 1: hash every file for the manifest, in parallel.
  std::vector<Hashed> hashed(files.size());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> hashed_bytes{0};
  std::atomic<uint64_t> stored_bytes{0};
  std::atomic<bool> too_big{false};
  RunParallel(
      threads,
      [&](size_t) {
        std::vector<char> buf(kReadBuffer);
        while (!too_big.load()) {
          const size_t i = next.fetch_add(1);
          if (i >= files.size()) break;
          hashed[i] = HashFile(files[i], buf, hashed_bytes, too_big);
          // Files that will be stored count in full: crossing the limit with them alone ends
          // the build before reading the rest of a huge tree.
          if (hashed[i].error.empty() && hashed[i].store &&
              stored_bytes.fetch_add(hashed[i].size) + hashed[i].size + overhead > max_bytes)
            too_big.store(true);
        }
      },
      [&] { report(BuildProgress::Phase::kHashing, hashed_bytes.load()); });
  if (too_big.load()) {
    result.errors.push_back(
        TooBigMessage("even counting only the files that do not compress, the capsule would be",
                      max_bytes, files));
    return result;
  }
  for (const auto& h : hashed) {
    if (!h.error.empty()) result.errors.push_back(h.error);
  }
  if (!result.ok()) return result;

  // The manifest covers the user's files and StarForge's, but not itself.
  const std::string jobspec_text = jobspec::ToCanonicalText(spec);
  const std::string_view runner = options.runner ? *options.runner : runner::Zipapp();
  for (size_t i = 0; i < files.size(); ++i) {
    result.manifest.files.push_back(
        {files[i].path, hashed[i].size, hashed[i].sha256, hashed[i].executable});
  }
  result.manifest.files.push_back(
      {kJobSpecPath, jobspec_text.size(), internal::Sha256Hex(jobspec_text), false});
  result.manifest.files.push_back({kRunnerPath, runner.size(), internal::Sha256Hex(runner), false});
  auto by_path = [](const auto& a, const auto& b) { return a.path < b.path; };
  std::sort(result.manifest.files.begin(), result.manifest.files.end(), by_path);
  const std::string manifest_text = ToText(result.manifest);
  result.user_files = files.size();

  std::filesystem::path dir =
      options.output.empty() ? options.output_dir : options.output.parent_path();
  if (dir.empty()) dir = ".";
  PrivateDir scratch(dir);
  if (scratch.path().empty()) {
    result.errors.push_back("cannot create a temporary directory in " + dir.string() + ": " +
                            ErrnoText(errno));
    return result;
  }
  const std::string spool_dir = scratch.path() + "/spools";
  ::mkdir(spool_dir.c_str(), 0700);

  // Pass 2: deflate in parallel into one spool archive per thread, the largest files first to
  // whichever thread has the least to do.
  std::vector<size_t> order;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!hashed[i].store) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return hashed[a].size != hashed[b].size ? hashed[a].size > hashed[b].size : a < b;
  });
  const size_t spools = std::max<size_t>(1, std::min(threads, order.size()));
  std::vector<std::vector<size_t>> parts(spools);
  std::vector<uint64_t> load(spools, 0);
  std::vector<std::pair<size_t, zip_uint64_t>> spool_of(files.size());  // (spool, entry)
  for (size_t i : order) {
    const size_t s = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    spool_of[i] = {s, parts[s].size()};
    parts[s].push_back(i);
    load[s] += hashed[i].size + 1;
  }
  WriteContext ctx;
  ctx.max_bytes = max_bytes;
  ctx.watch_dir = spool_dir;
  ctx.pending_bytes = stored_bytes.load() + overhead;
  std::vector<std::string> spool_errors(spools);
  auto spool_path = [&](size_t s) { return spool_dir + "/" + std::to_string(s) + ".zip"; };
  if (!order.empty()) {
    RunParallel(
        spools,
        [&](size_t s) {
          spool_errors[s] = CompressSpool(spool_path(s), parts[s], files, hashed, &ctx);
        },
        [&] { report(BuildProgress::Phase::kWriting, ctx.bytes_read.load()); });
  }
  auto fail = [&](const std::string& error) {
    result.errors.push_back(
        ctx.too_big.load() ? TooBigMessage("the capsule would be", max_bytes, files) : error);
    return result;
  };
  for (const auto& e : spool_errors) {
    if (!e.empty()) return fail(e);
  }
  std::vector<ZipPtr> spool_zips;
  for (size_t s = 0; s < spools && !order.empty(); ++s) {
    int zerr = 0;
    spool_zips.emplace_back(zip_open(spool_path(s).c_str(), ZIP_RDONLY, &zerr));
    if (!spool_zips.back()) return fail(OpenError(spool_path(s), zerr));
  }

  // Pass 3: the capsule itself, every entry in path order with fixed metadata.
  struct Entry {
    std::string_view path;
    size_t file = SIZE_MAX;  // index of a user's file, or
    std::string_view bytes;  // StarForge's bytes
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < files.size(); ++i)
    entries.push_back({files[i].path, i, {}});
  entries.push_back({kJobSpecPath, SIZE_MAX, jobspec_text});
  entries.push_back({kRunnerPath, SIZE_MAX, runner});
  entries.push_back({kManifestPath, SIZE_MAX, manifest_text});
  std::sort(entries.begin(), entries.end(), by_path);

  const std::string target = scratch.path() + "/capsule.zip";
  int zerr = 0;
  ZipPtr za(zip_open(target.c_str(), ZIP_CREATE | ZIP_EXCL, &zerr));
  if (!za) return fail(OpenError(target, zerr));
  ctx.watch_dir = scratch.path();
  ctx.pending_bytes = 0;
  for (const Entry& e : entries) {
    zip_source_t* src = nullptr;
    zip_int32_t method = ZIP_CM_DEFAULT;  // keep the spool's compressed bytes
    bool executable = false;
    if (e.file == SIZE_MAX) {
      src = zip_source_buffer(za.get(), e.bytes.data(), e.bytes.size(), 0);
      method = e.bytes.empty() || LooksIncompressible(e.bytes.substr(0, kHeadBytes))
                   ? ZIP_CM_STORE
                   : ZIP_CM_DEFLATE;
    } else if (hashed[e.file].store) {
      src = NewFileSource(za.get(), &files[e.file], &hashed[e.file], &ctx);
      method = ZIP_CM_STORE;
      executable = hashed[e.file].executable;
    } else {
      const auto [s, k] = spool_of[e.file];
      zip_stat_t st;
      if (zip_stat_index(spool_zips[s].get(), k, 0, &st) != 0)
        return fail(Printable(e.path) + ": " + ZipError(spool_zips[s].get()));
      if (st.comp_size >= st.size) {
        // Deflate did not help (tiny or unlucky files): store the original bytes.
        src = NewFileSource(za.get(), &files[e.file], &hashed[e.file], &ctx);
        method = ZIP_CM_STORE;
      } else {
        src = zip_source_zip(za.get(), spool_zips[s].get(), k, 0, 0, -1);  // compressed as is
      }
      executable = hashed[e.file].executable;
    }
    const zip_int64_t idx =
        src ? zip_file_add(za.get(), std::string(e.path).c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0 && src) zip_source_free(src);
    const auto uidx = static_cast<zip_uint64_t>(idx);
    const zip_uint32_t mode = S_IFREG | (executable ? 0755 : 0644);
    if (idx < 0 ||
        (method != ZIP_CM_DEFAULT &&
         zip_set_file_compression(za.get(), uidx, method,
                                  method == ZIP_CM_STORE ? 0 : kDeflateLevel) != 0) ||
        zip_file_set_dostime(za.get(), uidx, kDosTime, kDosDate, 0) != 0 ||
        zip_file_set_external_attributes(za.get(), uidx, 0, ZIP_OPSYS_UNIX, mode << 16) != 0)
      return fail(Printable(e.path) + ": " + ZipError(za.get()));
  }
  struct ProgressState {
    std::function<void()> tick;
    std::chrono::steady_clock::time_point last;
  } progress{[&] { report(BuildProgress::Phase::kWriting, ctx.bytes_read.load()); }, {}};
  if (options.progress) {
    zip_register_progress_callback_with_state(
        za.get(), 0.001,
        [](zip_t*, double, void* ud) {
          auto* p = static_cast<ProgressState*>(ud);
          const auto now = std::chrono::steady_clock::now();
          if (now - p->last < std::chrono::milliseconds(100)) return;
          p->last = now;
          p->tick();
        },
        nullptr, &progress);
  }
  if (zip_close(za.get()) != 0) {
    const std::string mine = ctx.Error();
    return fail(mine.empty() ? "writing the capsule: " + ZipError(za.get()) : mine);
  }
  za.release();  // zip_close freed it
  spool_zips.clear();

  std::string error;
  if (!internal::HashPath(target, &result.sha256, &result.size, &error)) return fail(error);
  if (result.size > max_bytes) {
    result.errors.push_back(
        TooBigMessage("the capsule is " + FormatBytes(result.size) + ",", max_bytes, files));
    return result;
  }
  result.path = options.output.empty() ? dir / FileName(result.sha256) : options.output;
  if (::rename(target.c_str(), result.path.c_str()) != 0)
    return fail("cannot write " + result.path.string() + ": " + ErrnoText(errno));
  return result;
}

}  // namespace starforge::capsule
