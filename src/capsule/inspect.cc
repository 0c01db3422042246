#include "starforge/capsule/inspect.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "internal.h"
#include "starforge/capsule/capsule.h"

namespace starforge::capsule {

namespace {

using internal::Printable;

using internal::ZipCloser;
using internal::ZipFileCloser;

// The manifest is small; anything bigger than this is not one of ours.
constexpr uint64_t kMaxManifestBytes = 64 << 20;
constexpr zip_uint64_t kMissing = ~zip_uint64_t{0};

// Reads entry `index` through libzip (which checks its CRC), at most `limit` bytes; hashes it.
// Returns false with *error set if it cannot be read; *size is the number of bytes read.
bool ReadEntry(zip_t* za, zip_uint64_t index, uint64_t limit, std::string* keep, std::string* hex,
               uint64_t* size, std::string* error) {
  std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(za, index, 0));
  if (!f) {
    *error = zip_error_strerror(zip_get_error(za));
    return false;
  }
  internal::Sha256 sha;
  std::vector<char> buf(1 << 20);
  *size = 0;
  while (true) {
    const zip_int64_t n = zip_fread(f.get(), buf.data(), buf.size());
    if (n < 0) {
      *error = zip_error_strerror(zip_file_get_error(f.get()));
      return false;
    }
    if (n == 0) break;
    const auto un = static_cast<uint64_t>(n);
    *size += un;
    if (*size > limit) return true;  // the caller reports the size mismatch
    sha.Update(buf.data(), un);
    if (keep) keep->append(buf.data(), un);
  }
  *hex = sha.HexDigest();
  return true;
}

// The archive mapped read-only, with where each entry's data lies according to the central
// directory: lets an entry be verified from memory with libdeflate (2-3x zlib's inflate, and a
// carry-less-multiply CRC-32) instead of through libzip. Only a locator: every name, size and
// CRC it finds must agree with what libzip read, else that entry goes through libzip as before.
class Located {
 public:
  explicit Located(const std::filesystem::path& path) {
    internal::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || st.st_size < 22) return;
    void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd.get(), 0);
    if (m == MAP_FAILED) return;
    data_ = static_cast<const uint8_t*>(m);
    size_ = static_cast<uint64_t>(st.st_size);
    ::madvise(m, size_, MADV_WILLNEED);
    Parse();
  }
  ~Located() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  Located(const Located&) = delete;
  Located& operator=(const Located&) = delete;

  struct Entry {
    std::string_view name;
    uint16_t method = 0;
    uint32_t crc = 0;
    uint64_t comp_size = 0, size = 0;
    const uint8_t* data = nullptr;  // comp_size bytes, inside the map
  };
  // Entry `index` (central directory order, libzip's too), or null.
  const Entry* At(zip_uint64_t index) const {
    return index < entries_.size() && entries_[index].data ? &entries_[index] : nullptr;
  }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  uint64_t U(uint64_t at, int n) const {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i)
      v = (v << 8) | data_[at + static_cast<uint64_t>(i)];
    return v;
  }
  bool Fits(uint64_t at, uint64_t n) const { return at <= size_ && n <= size_ - at; }

  void Parse() {
    // The end record, no comment (a capsule has none), then zip64's when the fields say so.
    const uint64_t end = size_ - 22;
    if (U(end, 4) != 0x06054b50) return;
    uint64_t count = U(end + 10, 2), cd_size = U(end + 12, 4), cd_offset = U(end + 16, 4);
    if (count == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
      if (end < 20 || U(end - 20, 4) != 0x07064b50) return;
      const uint64_t z = U(end - 20 + 8, 8);
      if (!Fits(z, 56) || U(z, 4) != 0x06064b50) return;
      count = U(z + 32, 8);
      cd_size = U(z + 40, 8);
      cd_offset = U(z + 48, 8);
    }
    if (!Fits(cd_offset, cd_size) || count > cd_size / 46) return;
    entries_.assign(count, Entry{});
    uint64_t at = cd_offset;
    for (uint64_t i = 0; i < count; ++i) {
      if (!Fits(at, 46) || U(at, 4) != 0x02014b50) return;
      Entry e;
      const uint16_t flags = static_cast<uint16_t>(U(at + 8, 2));
      e.method = static_cast<uint16_t>(U(at + 10, 2));
      e.crc = static_cast<uint32_t>(U(at + 16, 4));
      e.comp_size = U(at + 20, 4);
      e.size = U(at + 24, 4);
      const uint64_t n = U(at + 28, 2), m = U(at + 30, 2), k = U(at + 32, 2);
      uint64_t header = U(at + 42, 4);
      if (!Fits(at + 46, n + m + k)) return;
      e.name = {reinterpret_cast<const char*>(data_ + at + 46), n};
      // zip64: the fields that do not fit, in APPNOTE's order.
      for (uint64_t x = at + 46 + n; x + 4 <= at + 46 + n + m;) {
        const uint64_t id = U(x, 2), len = U(x + 2, 2);
        if (x + 4 + len > at + 46 + n + m) return;
        if (id == 0x0001) {
          uint64_t y = x + 4;
          auto take = [&](uint64_t& field) {
            if (field != 0xffffffff) return true;
            if (y + 8 > x + 4 + len) return false;
            field = U(y, 8);
            y += 8;
            return true;
          };
          if (!take(e.size) || !take(e.comp_size) || !take(header)) return;
        }
        x += 4 + len;
      }
      at += 46 + n + m + k;
      // The local header: same name, no data descriptor; data right after it.
      if ((flags & 0x0009) != 0 || !Fits(header, 30) || U(header, 4) != 0x04034b50) continue;
      const uint64_t ln = U(header + 26, 2), lm = U(header + 28, 2);
      if (ln != n || !Fits(header + 30, ln + lm) ||
          std::memcmp(data_ + header + 30, e.name.data(), n) != 0 ||
          !Fits(header + 30 + ln + lm, e.comp_size))
        continue;
      e.data = data_ + header + 30 + ln + lm;
      entries_[i] = e;
    }
  }

  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::vector<Entry> entries_;
};

// Entries at most this big are inflated whole into memory (libdeflate has no streaming API);
// bigger ones go through libzip.
constexpr uint64_t kInflateInMemory = 64 << 20;

// Verifies one located entry from memory as ReadEntry does through libzip: its CRC, its size
// (at most `limit`, else reported through *size) and its SHA-256. False when it cannot be
// inflated, with *error set.
bool ReadLocated(const Located::Entry& e, uint64_t limit, std::vector<uint8_t>& buf,
                 std::string* hex, uint64_t* size, std::string* error) {
  const uint8_t* bytes = e.data;
  if (e.method == ZIP_CM_DEFLATE) {
    // Room for one byte more than the manifest says: an entry that inflates past it shows it.
    buf.resize(std::min(e.size, limit + 1));
    struct Free {
      void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
    };
    static thread_local std::unique_ptr<libdeflate_decompressor, Free> d(
        libdeflate_alloc_decompressor());
    size_t got = 0;
    const libdeflate_result r = d ? libdeflate_deflate_decompress(d.get(), e.data, e.comp_size,
                                                                  buf.data(), buf.size(), &got)
                                  : LIBDEFLATE_BAD_DATA;
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
      // More than buf.size() bytes: over the limit (the caller reports "size over …") or
      // over the header's size.
      *size = buf.size();
      if (buf.size() > limit) return true;
      *error = "inflates past the size in its header";
      return false;
    }
    if (r != LIBDEFLATE_SUCCESS) {
      *error = "Compression error";  // libzip's words for the same failure
      return false;
    }
    bytes = buf.data();
    *size = got;
    if (got != e.size) {
      *error = "Wrong size";
      return false;
    }
  } else {
    *size = e.size;
    if (e.size != e.comp_size) {
      *error = "Wrong size";
      return false;
    }
  }
  if (*size > limit) return true;
  if (libdeflate_crc32(0, bytes, *size) != e.crc) {
    *error = "CRC error";
    return false;
  }
  internal::Sha256 sha;
  sha.Update(bytes, *size);
  *hex = sha.HexDigest();
  return true;
}

// Everything but the archive's own digest, which Inspect computes beside it.
InspectResult InspectEntries(const std::filesystem::path& capsule, const Located& located,
                             const InspectOptions& options) {
  InspectResult r;
  std::string error;
  int zerr = 0;
  std::unique_ptr<zip_t, ZipCloser> za(
      zip_open(capsule.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &zerr));
  if (!za) {
    zip_error_t e;
    zip_error_init_with_code(&e, zerr);
    // libzip refuses duplicate names (ZIP_ER_EXISTS) when it reads the central directory.
    r.problems.push_back(capsule.string() + ": not a readable zip archive: " +
                         (zerr == ZIP_ER_EXISTS ? std::string("two entries with the same name")
                                                : zip_error_strerror(&e)));
    zip_error_fini(&e);
    return r;
  }

  // Every entry by name; names are checked before anything trusts them.
  std::map<std::string, zip_uint64_t> entries;
  std::set<std::string> top_level;
  const zip_int64_t count = zip_get_num_entries(za.get(), 0);
  if (count < 0 || static_cast<uint64_t>(count) > options.max_entries) {
    r.problems.push_back("more than " + std::to_string(options.max_entries) + " entries");
    return r;
  }
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto ui = static_cast<zip_uint64_t>(i);
    const char* raw = zip_get_name(za.get(), ui, ZIP_FL_ENC_RAW);
    const std::string name = raw ? raw : "";
    if (!name.empty() && name.back() == '/') {
      r.problems.push_back(Printable(name) + ": unexpected directory entry");
      continue;
    }
    if (std::string why = CheckArchivePath(name); !why.empty()) {
      r.problems.push_back(Printable(name) + ": unsafe entry name: it " + why);
      continue;
    }
    if (!entries.emplace(name, ui).second) {
      r.problems.push_back(Printable(name) + ": appears twice in the archive");
      continue;
    }
    top_level.insert(name.substr(0, name.find('/')));
  }
  if (top_level.size() < 2) {
    r.problems.push_back(
        "fewer than two top-level entries: Ray would strip the top-level directory when it "
        "unpacks the capsule");
  }

  const auto manifest_it = entries.find(kManifestPath);
  if (manifest_it == entries.end()) {
    r.problems.push_back(std::string(kManifestPath) + ": missing");
    return r;
  }
  std::string text, hex;
  uint64_t size = 0;
  if (!ReadEntry(za.get(), manifest_it->second, kMaxManifestBytes, &text, &hex, &size, &error)) {
    r.problems.push_back(std::string(kManifestPath) + ": " + error);
    return r;
  }
  if (size > kMaxManifestBytes) {
    r.problems.push_back(std::string(kManifestPath) + ": larger than " +
                         FormatBytes(kMaxManifestBytes));
    return r;
  }
  r.manifest = ParseManifest(text, &error);
  if (!r.manifest) {
    r.problems.push_back(std::string(kManifestPath) + ": " + error);
    return r;
  }

  uint64_t total = 0;
  for (const auto& m : r.manifest->files)
    total += std::min<uint64_t>(m.size, UINT64_MAX / 2);
  if (total > options.max_total_bytes) {
    r.problems.push_back("the manifest's files add up to " + FormatBytes(total) + ", over the " +
                         FormatBytes(options.max_total_bytes) + " limit");
    return r;
  }

  // Each entry is inflated and hashed on one of `threads` threads, each with its own handle on
  // the archive (a zip_t is not shared between threads); problems are reported in manifest
  // order whatever the thread count.
  std::set<std::string> listed;
  std::vector<std::pair<const ManifestEntry*, zip_uint64_t>> work;
  for (const auto& m : r.manifest->files) {
    listed.insert(m.path);
    const auto it = entries.find(m.path);
    work.emplace_back(&m, it == entries.end() ? kMissing : it->second);
  }
  std::vector<std::string> verdicts(work.size());
  std::atomic<size_t> next{0};
  // An entry is read from the map when the central directory located it where libzip says it
  // is, with the same name, method, sizes and CRC; otherwise through libzip.
  auto located_entry = [&](zip_t* handle, zip_uint64_t index, const Located::Entry** out) {
    if (index == kMissing) return false;
    const Located::Entry* e = located.At(index);
    zip_stat_t st;
    const char* name = zip_get_name(handle, index, ZIP_FL_ENC_RAW);
    if (e == nullptr || name == nullptr || e->name != name ||
        zip_stat_index(handle, index, ZIP_FL_ENC_RAW, &st) != 0 ||
        (st.valid & (ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC | ZIP_STAT_COMP_METHOD)) !=
            (ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC | ZIP_STAT_COMP_METHOD) ||
        st.size != e->size || st.comp_size != e->comp_size || st.crc != e->crc ||
        st.comp_method != e->method || st.encryption_method != ZIP_EM_NONE)
      return false;
    if (e->method == ZIP_CM_STORE || (e->method == ZIP_CM_DEFLATE && e->size <= kInflateInMemory)) {
      *out = e;
      return true;
    }
    return false;
  };
  auto verify = [&](zip_t* handle) {
    std::string digest, why;
    uint64_t got = 0;
    std::vector<uint8_t> buf;
    const Located::Entry* fast = nullptr;
    for (size_t w = next.fetch_add(1); w < work.size(); w = next.fetch_add(1)) {
      const ManifestEntry& m = *work[w].first;
      const std::string shown = Printable(m.path);
      std::string& verdict = verdicts[w];
      if (work[w].second == kMissing) {
        verdict = shown + ": in the manifest but missing from the archive";
      } else if (!(located_entry(handle, work[w].second, &fast)
                       ? ReadLocated(*fast, m.size, buf, &digest, &got, &why)
                       : ReadEntry(handle, work[w].second, m.size, nullptr, &digest, &got, &why))) {
        verdict = shown + ": cannot be read: " + why;
      } else if (got != m.size) {
        verdict = shown + ": size " + (got > m.size ? "over " : "") + std::to_string(got) +
                  " bytes, the manifest says " + std::to_string(m.size);
      } else if (digest != m.sha256) {
        verdict = shown + ": SHA-256 " + digest + ", the manifest says " + m.sha256;
      } else {
        zip_uint8_t opsys = 0;
        zip_uint32_t attributes = 0;
        if (zip_file_get_external_attributes(handle, work[w].second, 0, &opsys, &attributes) == 0 &&
            opsys == ZIP_OPSYS_UNIX && (((attributes >> 16) & S_IXUSR) != 0) != m.executable)
          verdict = shown + ": executable bit in the archive differs from the manifest";
      }
    }
  };
  size_t threads = options.threads > 0 ? static_cast<size_t>(options.threads)
                                       : std::max(1u, std::thread::hardware_concurrency());
  threads = std::max<size_t>(1, std::min(threads, work.size()));
  std::vector<std::thread> pool;
  std::vector<std::unique_ptr<zip_t, ZipCloser>> handles;
  for (size_t t = 1; t < threads; ++t) {
    handles.emplace_back(zip_open(capsule.c_str(), ZIP_RDONLY, &zerr));
    if (!handles.back()) break;
    pool.emplace_back(verify, handles.back().get());
  }
  verify(za.get());
  for (auto& t : pool)
    t.join();
  for (const auto& v : verdicts) {
    if (v.empty())
      ++r.verified;
    else
      r.problems.push_back(v);
  }
  for (const auto& [name, index] : entries) {
    if (name != kManifestPath && !listed.count(name))
      r.problems.push_back(Printable(name) + ": in the archive but not in the manifest");
  }
  for (const char* required : {kJobSpecPath, kRunnerPath}) {
    if (!listed.count(required))
      r.problems.push_back(std::string(required) + ": not in the manifest");
  }
  return r;
}

}  // namespace

InspectResult Inspect(const std::filesystem::path& capsule, const InspectOptions& options) {
  const Located located(capsule);
  // The archive's SHA-256 on its own thread: one more pass over bytes already in memory.
  std::string sha256, hash_error;
  uint64_t size = 0;
  bool hashed = false;
  std::thread hasher([&] {
    if (located.data() == nullptr) {
      hashed = internal::HashPath(capsule.string(), &sha256, &size, &hash_error);
      return;
    }
    internal::Sha256 sha;
    sha.Update(located.data(), located.size());
    sha256 = sha.HexDigest();
    size = located.size();
    hashed = true;
  });
  InspectResult r = InspectEntries(capsule, located, options);
  hasher.join();
  if (!hashed) {
    InspectResult failed;
    failed.problems.push_back(hash_error);
    return failed;
  }
  r.sha256 = sha256;
  r.size = size;
  return r;
}

}  // namespace starforge::capsule
