#include "starforge/capsule/inspect.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "entry_rules.h"
#include "internal.h"
#include "starforge/capsule/capsule.h"
#include "starforge/common/status_or.h"

namespace starforge::capsule {

namespace {

using internal::Printable;

using internal::ZipCloser;
using internal::ZipFileCloser;

constexpr zip_uint64_t kMissing = ~zip_uint64_t{0};

// What reading one entry found: its size (bytes read, more than the limit when it is over it)
// and, when within the limit, its SHA-256 in hex.
struct EntryRead {
  uint64_t size = 0;
  std::string sha256;
};

// Why an entry cannot be read (libzip's or libdeflate's words).
Status Unreadable(std::string why) {
  return Status::Invalid(std::move(why));
}

// Reads entry `index` through libzip (which checks its CRC), at most `limit` bytes; hashes it,
// keeping the bytes in `keep` when given. Fails when it cannot be read.
StatusOr<EntryRead> ReadEntry(zip_t* za, zip_uint64_t index, uint64_t limit, std::string* keep) {
  std::unique_ptr<zip_file_t, ZipFileCloser> f(zip_fopen_index(za, index, 0));
  if (!f) return Unreadable(zip_error_strerror(zip_get_error(za)));
  internal::Sha256 sha;
  std::vector<char> buf(1 << 20);
  EntryRead read;
  while (true) {
    const zip_int64_t n = zip_fread(f.get(), buf.data(), buf.size());
    if (n < 0) return Unreadable(zip_error_strerror(zip_file_get_error(f.get())));
    if (n == 0) break;
    const auto un = static_cast<uint64_t>(n);
    read.size += un;
    if (read.size > limit) return read;  // the caller reports the size mismatch
    sha.Update(buf.data(), un);
    if (keep) keep->append(buf.data(), un);
  }
  read.sha256 = sha.HexDigest();
  return read;
}

// The archive's central directory, read with pread (not mapped: a file truncated while it is
// inspected must give an error, not SIGBUS), with where each entry's local header lies: lets an
// entry be verified with libdeflate (2-3x zlib's inflate, and a carry-less-multiply CRC-32)
// instead of through libzip. Only a locator: every name, size and CRC it finds must agree with
// what libzip read, else that entry goes through libzip as before.
class Located {
 public:
  explicit Located(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st {};
    if (fd_.get() < 0 || ::fstat(fd_.get(), &st) != 0) {
      error_ = internal::ErrnoText(errno);
      return;
    }
    if (!S_ISREG(st.st_mode)) {
      error_ = "not a regular file";
      return;
    }
    size_ = static_cast<uint64_t>(st.st_size);
    ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_WILLNEED);
    if (size_ >= 22) Parse();
  }
  Located(const Located&) = delete;
  Located& operator=(const Located&) = delete;

  struct Entry {
    std::string name;
    uint16_t method = 0;
    uint32_t crc = 0;
    uint64_t comp_size = 0, size = 0;
    uint64_t header = 0;  // offset of the local header
    bool located = false;
  };
  // Entry `index` (central directory order, libzip's too), or null.
  const Entry* At(zip_uint64_t index) const {
    return index < entries_.size() && entries_[index].located ? &entries_[index] : nullptr;
  }
  // Why the file could not be opened ("" when it was).
  const std::string& error() const { return error_; }
  int fd() const { return fd_.get(); }
  uint64_t size() const { return size_; }  // when it was opened
  // Exactly `n` bytes at `offset`; false if the file ends before (it shrank) or cannot be read.
  bool Read(uint64_t offset, void* buf, size_t n) const {
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
      const ssize_t got = ::pread(fd_.get(), p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return true;
  }

 private:
  static uint64_t U(const uint8_t* p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i)
      v = (v << 8) | p[i];
    return v;
  }
  bool Fits(uint64_t at, uint64_t n) const { return at <= size_ && n <= size_ - at; }

  void Parse() {
    // The end record, no comment (a capsule has none), then zip64's when the fields say so.
    uint8_t end[22], locator[20], z64[56];
    if (!Read(size_ - 22, end, sizeof end) || U(end, 4) != 0x06054b50) return;
    uint64_t count = U(end + 10, 2), cd_size = U(end + 12, 4), cd_offset = U(end + 16, 4);
    if (count == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
      if (size_ < 42 || !Read(size_ - 42, locator, sizeof locator) || U(locator, 4) != 0x07064b50)
        return;
      const uint64_t z = U(locator + 8, 8);
      if (!Fits(z, 56) || !Read(z, z64, sizeof z64) || U(z64, 4) != 0x06064b50) return;
      count = U(z64 + 32, 8);
      cd_size = U(z64 + 40, 8);
      cd_offset = U(z64 + 48, 8);
    }
    if (!Fits(cd_offset, cd_size) || count > cd_size / 46) return;
    std::vector<uint8_t> cd(cd_size);
    if (!Read(cd_offset, cd.data(), cd.size())) return;
    entries_.assign(count, Entry{});
    uint64_t at = 0;
    for (uint64_t i = 0; i < count; ++i) {
      if (at > cd_size || cd_size - at < 46 || U(cd.data() + at, 4) != 0x02014b50) return;
      const uint8_t* h = cd.data() + at;
      Entry e;
      const uint16_t flags = static_cast<uint16_t>(U(h + 8, 2));
      e.method = static_cast<uint16_t>(U(h + 10, 2));
      e.crc = static_cast<uint32_t>(U(h + 16, 4));
      e.comp_size = U(h + 20, 4);
      e.size = U(h + 24, 4);
      const uint64_t n = U(h + 28, 2), m = U(h + 30, 2), k = U(h + 32, 2);
      e.header = U(h + 42, 4);
      if (cd_size - at - 46 < n + m + k) return;
      e.name.assign(reinterpret_cast<const char*>(h + 46), n);
      // zip64: the fields that do not fit, in APPNOTE's order.
      for (uint64_t x = 46 + n; x + 4 <= 46 + n + m;) {
        const uint64_t id = U(h + x, 2), len = U(h + x + 2, 2);
        if (x + 4 + len > 46 + n + m) return;
        if (id == 0x0001) {
          uint64_t y = x + 4;
          auto take = [&](uint64_t& field) {
            if (field != 0xffffffff) return true;
            if (y + 8 > x + 4 + len) return false;
            field = U(h + y, 8);
            y += 8;
            return true;
          };
          if (!take(e.size) || !take(e.comp_size) || !take(e.header)) return;
        }
        x += 4 + len;
      }
      at += 46 + n + m + k;
      // No data descriptor, and room for a local header with the same name; the header itself
      // is read (and checked) with the entry's data.
      if ((flags & 0x0009) != 0 || !Fits(e.header, 30 + n)) continue;
      e.located = true;
      entries_[i] = std::move(e);
    }
  }

  internal::Fd fd_;
  std::string error_;
  uint64_t size_ = 0;
  std::vector<Entry> entries_;
};

// Entries at most this big are inflated whole into memory (libdeflate has no streaming API);
// bigger ones go through libzip. Stored entries are read in chunks of kStoredChunk.
constexpr uint64_t kInflateInMemory = 64 << 20;
constexpr size_t kStoredChunk = 4 << 20;

constexpr const char* kShrank =
    "the archive ends before this entry does (was it changed while it was being inspected?)";

// Where entry `e`'s data starts: after a local header with its name and no data descriptor
// (read from the file). False when there is none: the entry then goes through libzip.
bool LocalData(const Located& l, const Located::Entry& e, uint64_t* data) {
  uint8_t h[30];
  std::string name(e.name.size(), '\0');
  if (!l.Read(e.header, h, sizeof h) || !l.Read(e.header + 30, name.data(), name.size()))
    return false;
  const auto u16 = [&](int at) { return static_cast<uint64_t>(h[at] | (h[at + 1] << 8)); };
  if (h[0] != 'P' || h[1] != 'K' || h[2] != 3 || h[3] != 4 || (u16(6) & 0x0008) != 0 ||
      u16(26) != e.name.size() || name != e.name)
    return false;
  *data = e.header + 30 + u16(26) + u16(28);
  return *data <= l.size() && e.comp_size <= l.size() - *data;
}

// Verifies one located entry as ReadEntry does through libzip: its CRC, its size (at most
// `limit`, else reported as more) and its SHA-256. Fails when it cannot be read or inflated.
StatusOr<EntryRead> ReadLocated(const Located& l, const Located::Entry& e, uint64_t data,
                                uint64_t limit, std::vector<uint8_t>& in,
                                std::vector<uint8_t>& out) {
  internal::Sha256 sha;
  EntryRead read;
  if (e.method == ZIP_CM_STORE) {
    read.size = e.size;
    if (e.size != e.comp_size) return Unreadable("Wrong size");
    if (read.size > limit) return read;
    in.resize(static_cast<size_t>(std::min<uint64_t>(kStoredChunk, e.size)));
    uint32_t crc = 0;
    for (uint64_t done = 0; done < e.size;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(in.size(), e.size - done));
      if (!l.Read(data + done, in.data(), n)) return Unreadable(kShrank);
      crc = libdeflate_crc32(crc, in.data(), n);
      sha.Update(in.data(), n);
      done += n;
    }
    if (crc != e.crc) return Unreadable("CRC error");
    read.sha256 = sha.HexDigest();
    return read;
  }
  in.resize(static_cast<size_t>(e.comp_size));
  if (!l.Read(data, in.data(), in.size())) return Unreadable(kShrank);
  // Room for one byte more than the manifest says: an entry that inflates past it shows it.
  out.resize(static_cast<size_t>(std::min(e.size, limit + 1)));
  struct Free {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  static thread_local std::unique_ptr<libdeflate_decompressor, Free> d(
      libdeflate_alloc_decompressor());
  size_t got = 0;
  const libdeflate_result r =
      d ? libdeflate_deflate_decompress(d.get(), in.data(), in.size(), out.data(), out.size(), &got)
        : LIBDEFLATE_BAD_DATA;
  if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
    // More than out.size() bytes: over the limit (the caller reports "size over …") or over
    // the header's size.
    read.size = out.size();
    if (out.size() > limit) return read;
    return Unreadable("inflates past the size in its header");
  }
  if (r != LIBDEFLATE_SUCCESS) return Unreadable("Compression error");  // libzip's words
  read.size = got;
  if (got != e.size) return Unreadable("Wrong size");
  if (read.size > limit) return read;
  if (libdeflate_crc32(0, out.data(), read.size) != e.crc) return Unreadable("CRC error");
  sha.Update(out.data(), read.size);
  read.sha256 = sha.HexDigest();
  return read;
}

// Everything but the archive's own digest, which Inspect computes beside it.
InspectResult InspectEntries(const std::filesystem::path& capsule, const Located& located,
                             const InspectOptions& options) {
  InspectResult r;
  int zerr = 0;
  std::unique_ptr<zip_t, ZipCloser> za(
      zip_open(capsule.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &zerr));
  if (!za) {
    zip_error_t e;
    zip_error_init_with_code(&e, zerr);
    // libzip refuses duplicate names (ZIP_ER_EXISTS) when it reads the central directory,
    // without saying which: the name is looked up to say it.
    std::optional<std::string> duplicate;
    if (zerr == ZIP_ER_EXISTS) duplicate = internal::DuplicateZipEntry(capsule);
    if (duplicate) {
      r.problems.push_back(capsule.string() + ": " + Printable(*duplicate) +
                           ": two entries with the same name");
    } else {
      r.problems.push_back(capsule.string() + ": not a readable zip archive: " +
                           (zerr == ZIP_ER_EXISTS ? std::string("two entries with the same name")
                                                  : zip_error_strerror(&e)));
    }
    zip_error_fini(&e);
    return r;
  }

  // Every entry by name; names are checked before anything trusts them.
  const zip_int64_t count = zip_get_num_entries(za.get(), 0);
  if (count < 0 || static_cast<uint64_t>(count) > options.max_entries) {
    r.problems.push_back("more than " + std::to_string(options.max_entries) + " entries");
    return r;
  }
  std::vector<std::string> names;
  names.reserve(static_cast<size_t>(count));
  for (zip_int64_t i = 0; i < count; ++i) {
    const char* raw = zip_get_name(za.get(), static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
    names.emplace_back(raw ? raw : "");
  }
  // An entry's position in `names` is its libzip index.
  const std::map<std::string, size_t> entries = internal::ScreenEntryNames(names, &r);

  const auto manifest_it = entries.find(kManifestPath);
  if (manifest_it == entries.end()) {
    r.problems.push_back(std::string(kManifestPath) + ": missing");
    return r;
  }
  std::string text;
  const StatusOr<EntryRead> manifest_read =
      ReadEntry(za.get(), manifest_it->second, kMaxManifestBytes, &text);
  if (!manifest_read.ok()) {
    r.problems.push_back(std::string(kManifestPath) + ": " + manifest_read.status().message());
    return r;
  }
  if (!internal::CheckManifestText(text, manifest_read->size, options, &r)) return r;

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
  auto located_entry = [&](zip_t* handle, zip_uint64_t index, const Located::Entry** out,
                           uint64_t* data) {
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
    if ((e->method == ZIP_CM_STORE || (e->method == ZIP_CM_DEFLATE && e->size <= kInflateInMemory &&
                                       e->comp_size <= kInflateInMemory)) &&
        LocalData(located, *e, data)) {
      *out = e;
      return true;
    }
    return false;
  };
  auto verify = [&](zip_t* handle) {
    uint64_t data = 0;
    std::vector<uint8_t> in, out;
    const Located::Entry* fast = nullptr;
    for (size_t w = next.fetch_add(1); w < work.size(); w = next.fetch_add(1)) {
      const ManifestEntry& m = *work[w].first;
      const std::string shown = Printable(m.path);
      std::string& verdict = verdicts[w];
      if (work[w].second == kMissing) {
        verdict = shown + ": in the manifest but missing from the archive";
        continue;
      }
      const StatusOr<EntryRead> read = located_entry(handle, work[w].second, &fast, &data)
                                           ? ReadLocated(located, *fast, data, m.size, in, out)
                                           : ReadEntry(handle, work[w].second, m.size, nullptr);
      if (!read.ok()) {
        verdict = shown + ": cannot be read: " + read.status().message();
      } else if (read->size != m.size) {
        verdict = shown + ": size " + (read->size > m.size ? "over " : "") +
                  std::to_string(read->size) + " bytes, the manifest says " +
                  std::to_string(m.size);
      } else if (read->sha256 != m.sha256) {
        verdict = shown + ": SHA-256 " + read->sha256 + ", the manifest says " + m.sha256;
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
  internal::CheckEveryEntryListed(entries, listed, &r);
  return r;
}

}  // namespace

InspectResult Inspect(const std::filesystem::path& capsule, const InspectOptions& options) {
  const Located located(capsule);
  if (!located.error().empty()) {
    InspectResult failed;
    failed.problems.push_back(capsule.string() + ": " + located.error());
    return failed;
  }
  if (options.opened) options.opened();
  // The archive's SHA-256 on its own thread, from the same open file: one more pass over bytes
  // the page cache already holds.
  std::string sha256, hash_error;
  uint64_t size = 0;
  std::thread hasher([&] {
    std::vector<char> buf(1 << 20);
    internal::Sha256 sha;
    while (true) {
      const ssize_t n = ::pread(located.fd(), buf.data(), buf.size(), static_cast<off_t>(size));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        hash_error = capsule.string() + ": read error: " + internal::ErrnoText(errno);
        return;
      }
      if (n == 0) break;
      sha.Update(buf.data(), static_cast<size_t>(n));
      size += static_cast<uint64_t>(n);
    }
    if (size != located.size()) {
      hash_error = capsule.string() + ": changed while it was being inspected (" +
                   std::to_string(located.size()) + " bytes when opened, " + std::to_string(size) +
                   " read); inspect it again";
      return;
    }
    sha256 = sha.HexDigest();
  });
  InspectResult r = InspectEntries(capsule, located, options);
  hasher.join();
  if (!hash_error.empty()) {
    InspectResult failed;
    failed.problems.push_back(hash_error);
    return failed;
  }
  r.sha256 = sha256;
  r.size = size;
  return r;
}

}  // namespace starforge::capsule
