#include "starforge/capsule/capsule.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
#include "starforge/capsule/reuse.h"
#include "starforge/jobspec/parse.h"
#include "starforge/runner/embedded.h"
#include "zip_writer.h"

namespace starforge::capsule {

using internal::ErrnoText;
using internal::Fd;
using internal::Printable;
using internal::ReadFull;

std::string ObjectKey(std::string_view sha256_hex) {
  return "capsules/" + FileName(sha256_hex);
}

bool ArchiveOrder(std::string_view a, std::string_view b) {
  const std::string_view own = ".starforge/";
  const bool a_own = a.starts_with(own), b_own = b.starts_with(own);
  return a_own != b_own ? b_own : a < b;
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
  if (n < 512) return false;  // too little to judge; deflate (stored if that is not smaller)
  // Four histograms, summed at the end (the same counts): with one, a run of equal bytes makes
  // each increment wait for the one before it, and text is full of such runs. This runs on the
  // head of every file (about 5 % of the client's CPU in a 1 GiB submit before).
  std::array<std::array<uint64_t, 256>, 4> part{};
  const auto* p = reinterpret_cast<const unsigned char*>(head.data());
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    ++part[0][p[i]];
    ++part[1][p[i + 1]];
    ++part[2][p[i + 2]];
    ++part[3][p[i + 3]];
  }
  for (; i < n; ++i)
    ++part[0][p[i]];
  uint64_t sum_sq = 0;
  for (size_t c = 0; c < 256; ++c) {
    const uint64_t count = part[0][c] + part[1][c] + part[2][c] + part[3][c];
    sum_sq += count * count;
  }
  return sum_sq * 256 * 10 <= (256 * n + n * n) * 11;
}

namespace {

constexpr size_t kHeadBytes = 64 << 10;
constexpr size_t kReadBuffer = 1 << 20;
static_assert(kReadBuffer >= kHeadBytes, "HashFile judges the head from its first read");
// Files up to this size get no readahead hint: the kernel's default window reads them whole
// anyway, and the hint was a system call per file and pass (40 000 for a 20 000-file tree).
constexpr uint64_t kSmallFile = 128 << 10;
// Stored files at least this big are read again by the writer instead of held in memory.
constexpr uint64_t kStreamStoredBytes = 4 << 20;
// Bytes of prepared (compressed or read) entries waiting for the writer, across all workers.
constexpr uint64_t kInFlightBytes = 256 << 20;
// Fixed per-entry bytes of a zip: local header (30) + central directory record (46), each
// followed by the name.
constexpr uint64_t kEntryOverhead = 30 + 46;
constexpr uint64_t kEndOfCentralDirectory = 22;

// What the hashing pass learnt about one file; the writing pass checks the file still matches.
struct Hashed {
  std::string sha256;
  uint32_t crc32 = 0;  // of the contents: a stored entry's header needs nothing else
  uint64_t size = 0;
  bool executable = false;
  bool store = false;
  bool from_index = false;  // the digest came from ReuseIndex, the file was not read
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

int64_t Nanos(const timespec& ts) {
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

// Takes `in`'s digest from `reuse` when the stat identity Collect recorded is the one the index
// vouches for; false (nothing set) otherwise.
bool FromIndex(const InputFile& in, const ReuseIndex& reuse, Hashed* h) {
  if (!in.has_stat) return false;
  const EntryRecord* r = reuse.ByStat(in.path, in.dev, in.ino, in.size, in.mtime_ns, in.ctime_ns);
  if (r == nullptr) return false;
  h->dev = static_cast<dev_t>(in.dev);
  h->ino = static_cast<ino_t>(in.ino);
  h->mtime = {static_cast<time_t>(in.mtime_ns / 1'000'000'000),
              static_cast<long>(in.mtime_ns % 1'000'000'000)};
  h->ctime = {static_cast<time_t>(in.ctime_ns / 1'000'000'000),
              static_cast<long>(in.ctime_ns % 1'000'000'000)};
  h->executable = in.executable;
  h->sha256 = r->sha256;
  h->crc32 = r->crc32;
  h->size = r->size;
  h->store = r->method == internal::kMethodStore;
  h->from_index = true;
  return true;
}

// Hashes one file, or takes its digest from `reuse` when its stat identity is unchanged. `stop`
// lets a worker give up early once the capsule is known to be too big.
Hashed HashFile(const InputFile& in, const ReuseIndex* reuse, std::vector<char>& buf,
                std::atomic<uint64_t>& bytes_done, const std::atomic<bool>& stop) {
  Hashed h;
  const std::string shown = Printable(in.path);
  if (reuse != nullptr && !in.has_stat) {
    // A list of files without their stat identities (Build's callers other than Collect):
    // one stat here lets the index vouch for the file. (Collect's are looked up by Build.)
    struct stat st {};
    if (::stat(in.source.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      InputFile known = in;
      known.has_stat = true;
      known.executable = (st.st_mode & S_IXUSR) != 0;
      known.dev = static_cast<uint64_t>(st.st_dev);
      known.ino = static_cast<uint64_t>(st.st_ino);
      known.size = static_cast<uint64_t>(st.st_size);
      known.mtime_ns = Nanos(st.st_mtim);
      known.ctime_ns = Nanos(st.st_ctim);
      if (FromIndex(known, *reuse, &h)) {
        bytes_done.fetch_add(h.size, std::memory_order_relaxed);
        return h;
      }
    }
  }
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
  if (static_cast<uint64_t>(st.st_size) > kSmallFile)
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  h.dev = st.st_dev;
  h.ino = st.st_ino;
  h.mtime = st.st_mtim;
  h.ctime = st.st_ctim;
  h.executable = (st.st_mode & S_IXUSR) != 0;
  internal::Sha256 sha;
  bool store = false;
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
    // The first read holds the whole head (ReadFull fills `buf`, which is longer, unless the
    // file ends first): judged where it lies, not copied out.
    if (total == 0)
      store = LooksIncompressible(std::string_view(buf.data(), std::min(un, kHeadBytes)));
    sha.Update(buf.data(), un);
    // CRC-32 (libdeflate's, carry-less multiply) costs little beside SHA-256 and spares the
    // writing pass a read of every big stored file.
    h.crc32 = libdeflate_crc32(h.crc32, buf.data(), un);
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
  h.store = store;
  return h;
}

// `clause` starts the message: "the capsule is 600.0 MiB," or "the capsule would be".
std::string TooBigMessage(const std::string& clause, uint64_t max_bytes,
                          const std::vector<InputFile>& files) {
  std::vector<const InputFile*> largest;
  largest.reserve(files.size());
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

std::vector<std::string> CheckInputs(const std::vector<InputFile>& files) {
  std::vector<std::string> errors;
  if (files.empty()) {
    errors.emplace_back(
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

// One entry of the capsule as the writer will emit it, prepared by a worker.
struct Prepared {
  enum class Kind { kBytes, kStream, kReuse, kCopied };  // kCopied: by the writer, header too
  Kind kind = Kind::kBytes;
  internal::ZipEntryInfo info;
  std::vector<uint8_t> bytes;  // kBytes: the entry's data (compressed or not)
  uint64_t reuse_offset = 0;   // kReuse: where the data is in the previous capsule
  std::string error;
};

std::string ChangedMessage(std::string_view path) {
  return Printable(path) + ": changed while the capsule was being built; build again";
}

void Encode(libdeflate_compressor* c, std::vector<uint8_t> data, bool try_deflate, Prepared* p) {
  internal::EncodeEntry(c, std::move(data), try_deflate, &p->info, &p->bytes);
}

// Reads a user's file again for the writing pass, refusing it if it is no longer the file that
// was hashed. Small and compressible files are read whole and encoded here; big stored ones
// are left to the writer, which streams them (their CRC comes from the hashing pass).
void PrepareFile(const InputFile& in, const Hashed& h, libdeflate_compressor* c, Prepared* p) {
  p->info.name = in.path;
  p->info.executable = h.executable;
  Fd fd(::open(in.source.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !SameFile(st, h)) {
    p->error = ChangedMessage(in.path);
    return;
  }
  if (h.store && h.size >= kStreamStoredBytes) {
    // Not read here: the writer reads it once, checking it against the hashing pass's CRC.
    p->kind = Prepared::Kind::kStream;
    p->info.method = internal::kMethodStore;
    p->info.crc32 = h.crc32;
    p->info.size = p->info.comp_size = h.size;
    return;
  }
  if (h.size > kSmallFile) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<uint8_t> data(h.size + 1);  // one more: a file that grew shows it
  const long n = ReadFull(fd.get(), reinterpret_cast<char*>(data.data()), data.size());
  if (n < 0) {
    p->error = Printable(in.path) + ": read error: " + ErrnoText(errno);
    return;
  }
  if (static_cast<uint64_t>(n) != h.size || ::fstat(fd.get(), &st) != 0 || !SameFile(st, h)) {
    p->error = ChangedMessage(in.path);
    return;
  }
  data.resize(h.size);
  Encode(c, std::move(data), !h.store, p);
}

// The entry of a file whose contents the previous capsule holds (`r`): its bytes are copied
// from there, not read or deflated.
Prepared ReusedEntry(const InputFile& in, const Hashed& h, const EntryRecord& r) {
  Prepared p;
  p.kind = Prepared::Kind::kReuse;
  p.info.name = in.path;
  p.info.executable = h.executable;
  p.info.method = r.method;
  p.info.crc32 = r.crc32;
  p.info.size = r.size;
  p.info.comp_size = r.comp_size;
  p.reuse_offset = r.data_offset;
  return p;
}

// A read-only map of the previous capsule, whose entries a build copies.
class Mapped {
 public:
  explicit Mapped(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st {};
    if (fd_.get() < 0 || ::fstat(fd_.get(), &st) != 0 || st.st_size <= 0) return;
    // Populated up front: the writer hashes most of it, and one fault per page costs more.
    void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED | MAP_POPULATE,
                     fd_.get(), 0);
    if (m == MAP_FAILED) return;
    data_ = static_cast<const uint8_t*>(m);
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~Mapped() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_.get(); }

 private:
  Fd fd_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace

BuildResult Build(const std::vector<InputFile>& files, const jobspec::JobSpec& spec,
                  const BuildOptions& options) {
  BuildResult result;
  result.errors = CheckInputs(files);
  if (!result.ok()) return result;
  timespec started{};
  ::clock_gettime(CLOCK_REALTIME, &started);
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
  const ReuseIndex* reuse =
      options.reuse != nullptr && !options.reuse->empty() ? options.reuse : nullptr;
  // The previous capsule is mapped (and its pages mapped in) on a thread of its own while the
  // files are hashed: it is needed only by the writing pass. Joined before `previous` goes.
  std::optional<Mapped> previous;
  std::jthread mapper;
  if (reuse != nullptr) mapper = std::jthread([&] { previous.emplace(reuse->capsule()); });

  // Pass 1: hash every file for the manifest, in parallel. Files whose stat identity the index
  // vouches for take their digest from it here, on this thread: a lookup each, no hand-over.
  report(BuildProgress::Phase::kHashing, 0);
  std::vector<Hashed> hashed(files.size());
  std::vector<size_t> to_hash;
  std::atomic<uint64_t> hashed_bytes{0};
  for (size_t i = 0; i < files.size(); ++i) {
    if (reuse == nullptr || !FromIndex(files[i], *reuse, &hashed[i])) {
      to_hash.push_back(i);
      continue;
    }
    hashed_bytes.fetch_add(hashed[i].size, std::memory_order_relaxed);
  }
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> stored_bytes{0};
  std::atomic<bool> too_big{false};
  for (size_t i = 0; i < files.size(); ++i) {
    // Files that will be stored count in full: crossing the limit with them alone ends the
    // build before reading the rest of a huge tree.
    if (hashed[i].from_index && hashed[i].store &&
        stored_bytes.fetch_add(hashed[i].size) + hashed[i].size + overhead > max_bytes)
      too_big.store(true);
  }
  RunParallel(
      std::min(threads, to_hash.size()),
      [&](size_t) {
        std::vector<char> buf(kReadBuffer);
        while (!too_big.load()) {
          const size_t k = next.fetch_add(1);
          if (k >= to_hash.size()) break;
          const size_t i = to_hash[k];
          hashed[i] = HashFile(files[i], reuse, buf, hashed_bytes, too_big);
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
    if (!h.from_index) ++result.files_read;
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
  const std::string target = scratch.path() + "/capsule.zip";
  // Readable too: BuildOptions::written's caller reads it back as it is written.
  Fd out(::open(target.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (out.get() < 0) {
    result.errors.push_back("cannot create " + target + ": " + ErrnoText(errno));
    return result;
  }

  // Pass 2: every entry in ArchiveOrder: the user's files, then StarForge's. Workers read and
  // deflate the user's files ahead of the writer (this thread), at most kInFlightBytes ahead; the
  // writer emits each entry, hashing the archive as it goes. Any thread count gives the same bytes:
  // an entry depends only on its file.
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
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return ArchiveOrder(a.path, b.path); });
  if (mapper.joinable()) mapper.join();
  if (previous && previous->data() == nullptr) reuse = nullptr;  // gone since the index was read
  // The new archive is about the previous one's size: its blocks are reserved in one call
  // rather than page by page as the copy of the unchanged entries fills the page cache (ext4's
  // delayed allocation; about a fifth of the copy's CPU). Blocks past the end are given back
  // below. A filesystem without fallocate simply allocates as it writes.
  const bool preallocated =
      reuse != nullptr &&
      ::fallocate(out.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(previous->size())) == 0;
  // Entries whose contents the previous capsule holds are prepared by the writer itself (a
  // lookup): only the others go to the workers, so an unchanged entry costs no hand-over
  // between threads — which, on a busy machine, means waiting for a worker to be scheduled.
  std::vector<const EntryRecord*> reused(entries.size(), nullptr);
  std::vector<size_t> work_order;  // positions in `entries` of the user's files to read
  for (size_t k = 0; k < entries.size(); ++k) {
    if (entries[k].file == SIZE_MAX) continue;
    const Hashed& h = hashed[entries[k].file];
    if (reuse != nullptr) {
      if (const EntryRecord* r = reuse->ByDigest(h.sha256); r != nullptr && r->size == h.size) {
        reused[k] = r;
        continue;
      }
    }
    work_order.push_back(k);
  }

  std::vector<Prepared> prepared(entries.size());
  std::vector<char> done(entries.size(), 0);
  std::mutex mu;
  std::condition_variable cv;
  size_t claim = 0;        // next index into work_order a worker takes
  size_t written = 0;      // entries of work_order the writer has finished
  uint64_t in_flight = 0;  // bytes claimed and not yet written
  bool stop = false;
  auto weight = [&](size_t j) {
    const Hashed& h = hashed[entries[work_order[j]].file];
    return h.store && h.size >= kStreamStoredBytes ? 0 : h.size + 1;
  };
  report(BuildProgress::Phase::kWriting, 0);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < std::min(threads, work_order.size()); ++t) {
    pool.emplace_back([&] {
      internal::Compressor c = internal::NewCompressor();
      while (true) {
        size_t j;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] {
            return stop || claim >= work_order.size() || claim == written ||
                   in_flight + weight(claim) <= kInFlightBytes;
          });
          if (stop || claim >= work_order.size()) return;
          j = claim++;
          in_flight += weight(j);
        }
        const size_t k = work_order[j];
        Prepared p;
        if (!c) {
          p.error = "out of memory for the compressor";
        } else {
          PrepareFile(files[entries[k].file], hashed[entries[k].file], c.get(), &p);
        }
        std::lock_guard<std::mutex> lock(mu);
        prepared[k] = std::move(p);
        done[k] = 1;
        cv.notify_all();
      }
    });
  }
  auto stop_workers = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : pool)
      t.join();
    pool.clear();
  };

  internal::ZipWriter zip(out.get(), options.written);
  if (reuse != nullptr)
    zip.ResumeHashFrom(previous->data(), previous->size(), reuse->checkpoints());
  internal::Compressor own = internal::NewCompressor();
  std::string error;
  bool over = false;
  uint64_t input_done = 0;
  auto last_tick = std::chrono::steady_clock::now();
  for (size_t k = 0; k < entries.size() && error.empty(); ++k) {
    const Entry& e = entries[k];
    Prepared p;
    if (e.file == SIZE_MAX) {
      p.info.name = std::string(e.path);
      const bool deflate = !LooksIncompressible(e.bytes.substr(0, kHeadBytes));
      Encode(own.get(), std::vector<uint8_t>(e.bytes.begin(), e.bytes.end()), deflate, &p);
    } else if (reused[k] != nullptr) {
      p = ReusedEntry(files[e.file], hashed[e.file], *reused[k]);
    } else {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done[k] != 0; });
      p = std::move(prepared[k]);
    }
    if (!p.error.empty()) {
      error = p.error;
      break;
    }
    uint64_t offset = 0;
    // An unchanged entry whose local header the previous capsule holds as this build would
    // write it is copied header and all; consecutive ones become a single kernel copy.
    const bool copied = p.kind == Prepared::Kind::kReuse &&
                        zip.CopyEntry(p.info, previous->data(), previous->size(), previous->fd(),
                                      p.reuse_offset, &offset);
    if (copied) ++result.entries_reused;
    if (!copied) offset = zip.Begin(p.info);
    switch (copied ? Prepared::Kind::kCopied : p.kind) {
      case Prepared::Kind::kCopied:
        break;
      case Prepared::Kind::kBytes:
        zip.Data(std::move(p.bytes));
        break;
      case Prepared::Kind::kReuse:
        if (p.reuse_offset > previous->size() ||
            previous->size() - p.reuse_offset < p.info.comp_size) {
          error = Printable(e.path) + ": the previous capsule " + reuse->capsule().string() +
                  " is shorter than its index says; build again";
          break;
        }
        zip.DataFromFile(previous->data() + p.reuse_offset, p.info.comp_size, previous->fd(),
                         p.reuse_offset);
        ++result.entries_reused;
        break;
      case Prepared::Kind::kStream: {
        // Read once, here, in chunks handed to the writer as they are (no copy). The header's
        // CRC is the hashing pass's: these bytes must have it, or the file changed.
        const InputFile& in = files[e.file];
        const Hashed& h = hashed[e.file];
        Fd fd(::open(in.source.c_str(), O_RDONLY | O_CLOEXEC));
        struct stat st {};
        uint32_t crc = 0;
        uint64_t total = 0;
        bool ok = fd.get() >= 0 && ::fstat(fd.get(), &st) == 0 && SameFile(st, h);
        if (ok) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
        while (ok) {
          std::vector<uint8_t> chunk(std::min<uint64_t>(kReadBuffer, h.size - total + 1));
          const long n = ReadFull(fd.get(), reinterpret_cast<char*>(chunk.data()), chunk.size());
          if (n <= 0) {
            ok = n == 0;
            break;
          }
          total += static_cast<uint64_t>(n);
          if (total > h.size) {
            ok = false;
            break;
          }
          chunk.resize(static_cast<size_t>(n));
          crc = libdeflate_crc32(crc, chunk.data(), chunk.size());
          zip.Data(std::move(chunk));
        }
        if (!ok || total != h.size || crc != p.info.crc32 || ::fstat(fd.get(), &st) != 0 ||
            !SameFile(st, h))
          error = ChangedMessage(in.path);
        break;
      }
    }
    if (!error.empty()) break;
    if (!zip.error().empty()) {
      error = "writing " + target + ": " + zip.error();
      break;
    }
    if (e.file != SIZE_MAX) {
      const Hashed& h = hashed[e.file];
      EntryRecord r;
      r.path = files[e.file].path;
      r.sha256 = h.sha256;
      r.size = h.size;
      r.method = p.info.method;
      r.crc32 = p.info.crc32;
      r.comp_size = p.info.comp_size;
      r.data_offset = offset;
      // File times come from a coarse clock: one written in the last 2 s could change again
      // without its times showing it (git's "racy clean"), so its digest is not trusted later.
      r.has_stat = std::max(Nanos(h.mtime), Nanos(h.ctime)) < Nanos(started) - 2'000'000'000LL;
      r.dev = h.dev;
      r.ino = h.ino;
      r.mtime_ns = Nanos(h.mtime);
      r.ctime_ns = Nanos(h.ctime);
      result.entries.push_back(std::move(r));
      input_done += h.size;
      if (reused[k] == nullptr) {
        std::lock_guard<std::mutex> lock(mu);
        ++written;
        in_flight -= weight(written - 1);
        cv.notify_all();
      }
    }
    if (zip.bytes() > max_bytes) {
      over = true;
      break;
    }
    if (const auto now = std::chrono::steady_clock::now();
        now - last_tick >= std::chrono::milliseconds(100)) {
      last_tick = now;
      report(BuildProgress::Phase::kWriting, input_done);
    }
  }
  stop_workers();
  if (over) {
    result.errors.push_back(TooBigMessage("the capsule would be", max_bytes, files));
    return result;
  }
  if (error.empty() && !zip.Finish()) error = "writing " + target + ": " + zip.error();
  // A truncation to the same size frees the blocks fallocate reserved past it.
  if (error.empty() && preallocated && ::ftruncate(out.get(), static_cast<off_t>(zip.bytes())) != 0)
    error = "writing " + target + ": " + ErrnoText(errno);
  if (!error.empty()) {
    result.errors.push_back(error);
    return result;
  }
  result.size = zip.bytes();
  result.sha256 = zip.HexDigest();
  result.checkpoints = zip.checkpoints();
  result.bytes_hashed = zip.bytes_hashed();
  if (result.size > max_bytes) {
    result.errors.push_back(
        TooBigMessage("the capsule is " + FormatBytes(result.size) + ",", max_bytes, files));
    return result;
  }
  out.Reset();
  result.path = options.output.empty() ? dir / FileName(result.sha256) : options.output;
  if (::rename(target.c_str(), result.path.c_str()) != 0) {
    result.errors.push_back("cannot write " + result.path.string() + ": " + ErrnoText(errno));
    return result;
  }
  return result;
}

}  // namespace starforge::capsule
