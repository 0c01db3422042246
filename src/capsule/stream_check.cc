#include "starforge/capsule/stream_check.h"

#include <fcntl.h>
#include <libdeflate.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "entry_rules.h"
#include "internal.h"
#include "starforge/capsule/capsule.h"

namespace starforge::capsule {

namespace {

using internal::Printable;

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint64_t kMax32 = 0xffffffff;
constexpr uint16_t kStored = 0;
constexpr uint16_t kDeflated = 8;
// Flags this check reads entries with: deflate's option bits (1, 2) and UTF-8 names (11). Any
// other (encryption, data descriptors, …) is for Inspect.
constexpr uint16_t kKnownFlags = 0x0806;
// As Inspect: libdeflate inflates whole entries in memory, up to this size.
constexpr uint64_t kInflateInMemory = 64 << 20;
// Stored data is read in pieces of at most kPiece, once at least kMinPiece (or the rest) is in.
constexpr size_t kPiece = 4 << 20;
constexpr uint64_t kMinPiece = 1 << 20;
constexpr size_t kWindow = 1 << 20;  // headers and small entries are read this much at a time
// The most of a file that is mapped to be read in place (address space only: nothing is read
// ahead). A longer file is read with pread past this.
constexpr uint64_t kMaxMapped = 1ULL << 40;

uint64_t Le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

// A buffer that grows without zeroing what it will be overwritten with anyway.
class Buffer {
 public:
  uint8_t* Get(size_t n) {
    if (n > capacity_) {
      p_.reset(new uint8_t[n]);
      capacity_ = n;
    }
    return p_.get();
  }

 private:
  std::unique_ptr<uint8_t[]> p_;
  size_t capacity_ = 0;
};

// One entry as its local header and data arrived, and what its central directory record says.
struct Seen {
  std::string name;
  uint16_t flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t comp_size = 0, size = 0, header = 0;
  // Verification: read_error empty when the data was read, then `got` bytes with `sha256`.
  std::string read_error;
  uint64_t got = 0;
  std::string sha256;
  bool listed = false;  // the central directory has a record for it
  uint8_t opsys = 0;    // from that record: the high byte of "version made by"
  uint32_t attributes = 0;
};

// How the stream ended for the parser.
enum class Outcome { kVouched, kInspect, kRefused, kStopped };

}  // namespace

struct StreamCheck::State {
  int fd = -1;
  InspectOptions options;
  // The file mapped (shared, read-only) for its first map_size bytes, or null: both threads read
  // the bytes written so far in place, from the page cache, instead of copying them out with
  // pread (two copies of every byte of the upload). Only bytes below `written` are touched: the
  // file always holds them (the caller only appends), so no access lies past its end.
  const uint8_t* map = nullptr;
  uint64_t map_size = 0;

  std::mutex mu;
  std::condition_variable cv;
  uint64_t written = 0;
  bool complete = false;  // `written` is the file's final size
  bool stop = false;
  bool done = false;    // the checker has set the fields below
  bool hashed = false;  // the hasher has set archive_hex (empty: the file could not be read)
  std::string archive_hex;
  std::thread thread, hasher;

  // The checker thread's.
  uint64_t pos = 0;
  std::vector<Seen> seen;
  std::unordered_map<uint64_t, size_t> by_header;  // local header offset → seen index
  std::string manifest_text;
  uint64_t declared = 0;     // the entries' sizes so far
  std::string refusal;       // with Outcome::kRefused
  bool read_failed = false;  // the file could not be read: Inspect reports why
  Outcome outcome = Outcome::kStopped;
  Buffer in, out;
  std::unique_ptr<uint8_t[]> window{new uint8_t[kWindow]};
  uint64_t win_start = 0;
  size_t win_len = 0;
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> inflater{
      nullptr, &libdeflate_free_decompressor};

  // Waits until the file holds `end` bytes. False when it is complete with fewer, or stopped.
  bool Await(uint64_t end) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stop || written >= end || complete; });
    return !stop && written >= end;
  }
  uint64_t Available() {
    std::lock_guard<std::mutex> lock(mu);
    return written;
  }
  bool Stopped() {
    std::lock_guard<std::mutex> lock(mu);
    return stop;
  }
  // Reads `n` bytes at pos into buf; false when the file ends first, the
  // check is stopped or a read fails (read_failed). Small reads (headers, small entries) are served
  // from a window read ahead; large ones go straight to `buf`.
  bool Take(void* buf, size_t n) {
    if (const uint8_t* v = TakeInPlace(n)) {
      std::memcpy(buf, v, n);
      return true;
    }
    if (map != nullptr && pos + n <= map_size) return false;  // stopped, or the file ended
    auto* p = static_cast<uint8_t*>(buf);
    while (n > 0) {
      if (pos >= win_start && pos < win_start + win_len) {
        const size_t k = std::min<uint64_t>(n, win_start + win_len - pos);
        std::memcpy(p, window.get() + (pos - win_start), k);
        p += k;
        n -= k;
        pos += k;
        continue;
      }
      if (!Await(pos + n)) return false;
      if (n >= kWindow / 4) {
        if (!ReadAt(pos, p, n)) return read_failed = true, false;
        pos += n;
        break;
      }
      const size_t k = static_cast<size_t>(std::min<uint64_t>(kWindow, Available() - pos));
      if (!ReadAt(pos, window.get(), k)) return read_failed = true, false;
      win_start = pos;
      win_len = k;
    }
    return true;
  }
  // The next `n` bytes at pos where they lie in the mapped file (pos moves past them), or null:
  // not mapped that far (then nothing happened; read them with Take), or Take would fail.
  const uint8_t* TakeInPlace(size_t n) {
    if (map == nullptr || pos + n > map_size) return nullptr;
    if (!Await(pos + n)) return nullptr;
    const uint8_t* v = map + pos;
    pos += n;
    return v;
  }
  // `n` bytes at pos: in place when mapped, else read into `scratch`. Null as Take's false.
  const uint8_t* TakeView(size_t n, Buffer& scratch) {
    if (const uint8_t* v = TakeInPlace(n)) return v;
    if (map != nullptr && pos + n <= map_size) return nullptr;
    uint8_t* p = scratch.Get(n);
    return Take(p, n) ? p : nullptr;
  }
  bool ReadAt(uint64_t at, uint8_t* p, size_t n) const {
    if (map != nullptr && at + n <= map_size) {
      std::memcpy(p, map + at, n);
      return true;
    }
    while (n > 0) {
      const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(at));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got;
      at += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  // Why Take failed: stopped, a read error (left to Inspect), or the file ended (refused, as
  // `where` says).
  Outcome Failed(const std::string& where) {
    if (Stopped()) return Outcome::kStopped;
    if (read_failed) return Outcome::kInspect;
    refusal = CutShort(where);
    return Outcome::kRefused;
  }
  std::string CutShort(const std::string& where) {
    return "the capsule ends at byte " + std::to_string(Available()) + ", " + where +
           ": the upload was cut short or the archive is truncated";
  }

  Outcome Run();
  std::string HashArchive();
  Outcome LocalEntry();
  Outcome Data(Seen& e);
  Outcome Central(uint64_t cd_offset);
  InspectResult Judge(uint64_t size);
};

// The archive, record by record, in the order a capsule is written: local entries, the central
// directory, (zip64 end record and locator,) end record, nothing after it.
Outcome StreamCheck::State::Run() {
  inflater.reset(libdeflate_alloc_decompressor());
  if (!inflater) return Outcome::kInspect;
  while (true) {
    uint8_t sig[4];
    if (!Take(sig, 4)) {
      return Failed(seen.empty() ? "before its first entry"
                                 : "after entry " + Printable(seen.back().name) +
                                       ", before its central directory");
    }
    const uint64_t at = pos - 4;
    const uint32_t s = static_cast<uint32_t>(Le(sig, 4));
    if (s == kLocalSig) {
      if (const Outcome o = LocalEntry(); o != Outcome::kVouched) return o;
      continue;
    }
    if (s == kCentralSig && !seen.empty()) return Central(at);
    return Outcome::kInspect;  // bytes before the archive, or an archive with no entries
  }
}

Outcome StreamCheck::State::LocalEntry() {
  uint8_t h[26];
  if (!Take(h, sizeof h)) return Failed("inside a local header at byte " + std::to_string(pos - 4));
  Seen e;
  e.header = pos - 30;
  e.flags = static_cast<uint16_t>(Le(h + 2, 2));
  e.method = static_cast<uint16_t>(Le(h + 4, 2));
  e.crc = static_cast<uint32_t>(Le(h + 10, 4));
  e.comp_size = Le(h + 14, 4);
  e.size = Le(h + 18, 4);
  const size_t n = static_cast<size_t>(Le(h + 22, 2)), m = static_cast<size_t>(Le(h + 24, 2));
  std::vector<uint8_t> name_extra(n + m);
  if (!Take(name_extra.data(), name_extra.size()))
    return Failed("inside the local header at byte " + std::to_string(e.header));
  e.name.assign(reinterpret_cast<const char*>(name_extra.data()), n);
  if ((e.flags & ~kKnownFlags) != 0 || (e.method != kStored && e.method != kDeflated))
    return Outcome::kInspect;
  // zip64: the sizes that do not fit, original size first (APPNOTE 4.5.3).
  if (e.size == kMax32 || e.comp_size == kMax32) {
    bool found = false;
    for (size_t x = n; x + 4 <= n + m;) {
      const uint64_t id = Le(&name_extra[x], 2), len = Le(&name_extra[x + 2], 2);
      if (x + 4 + len > n + m) return Outcome::kInspect;
      if (id == 0x0001) {
        size_t y = x + 4;
        for (uint64_t* field : {&e.size, &e.comp_size}) {
          if (*field != kMax32) continue;
          if (y + 8 > x + 4 + len) return Outcome::kInspect;
          *field = Le(&name_extra[y], 8);
          y += 8;
        }
        found = true;
      }
      x += 4 + len;
    }
    if (!found) return Outcome::kInspect;
  }
  if (seen.size() >= options.max_entries) {
    refusal = "more than " + std::to_string(options.max_entries) + " entries";
    return Outcome::kRefused;
  }
  // Sizes that add up to more than the limit: Inspect refuses from the manifest before
  // inflating anything, whatever the headers claim.
  declared += std::min<uint64_t>(e.size, UINT64_MAX / 2);
  if (declared > options.max_total_bytes) return Outcome::kInspect;
  if (e.method == kDeflated && (e.size > kInflateInMemory || e.comp_size > kInflateInMemory))
    return Outcome::kInspect;
  by_header.emplace(e.header, seen.size());
  const Outcome o = Data(e);
  seen.push_back(std::move(e));
  return o;
}

// Reads entry `e`'s data, checks its CRC and size against its header and hashes it.
Outcome StreamCheck::State::Data(Seen& e) {
  const bool keep = e.name == kManifestPath && e.size <= kMaxManifestBytes;
  auto cut = [&] {
    return Failed("inside the data of " + Printable(e.name) + " (the entry at byte " +
                  std::to_string(e.header) + ")");
  };
  Sha256 sha;
  if (e.method == kStored) {
    uint32_t crc = 0;
    for (uint64_t left = e.comp_size; left > 0;) {
      if (!Await(pos + std::min(left, kMinPiece))) return cut();
      const size_t k = static_cast<size_t>(std::min<uint64_t>({left, Available() - pos, kPiece}));
      const uint8_t* piece = TakeView(k, in);
      if (piece == nullptr) return cut();
      crc = libdeflate_crc32(crc, piece, k);
      sha.Update(piece, k);
      if (keep) manifest_text.append(reinterpret_cast<const char*>(piece), k);
      left -= k;
    }
    e.got = e.comp_size;
    if (e.size != e.comp_size)
      e.read_error = "Wrong size";  // libzip's words
    else if (crc != e.crc)
      e.read_error = "CRC error";
    else
      e.sha256 = sha.HexDigest();
    return Outcome::kVouched;
  }
  const auto comp_size = static_cast<size_t>(e.comp_size), size = static_cast<size_t>(e.size);
  const uint8_t* packed = TakeView(comp_size, in);
  if (packed == nullptr) return cut();
  // Room for exactly the size the header gives: an entry that inflates past it shows it.
  uint8_t* plain = out.Get(size);
  size_t got = 0;
  const libdeflate_result r =
      libdeflate_deflate_decompress(inflater.get(), packed, comp_size, plain, size, &got);
  if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
    e.read_error = "inflates past the size in its header";
  } else if (r != LIBDEFLATE_SUCCESS) {
    e.read_error = "Compression error";
  } else if (got != e.size) {
    e.got = got;
    e.read_error = "Wrong size";
  } else if (libdeflate_crc32(0, plain, got) != e.crc) {
    e.read_error = "CRC error";
  } else {
    e.got = got;
    sha.Update(plain, got);
    e.sha256 = sha.HexDigest();
    if (keep) manifest_text.assign(reinterpret_cast<const char*>(plain), got);
  }
  return Outcome::kVouched;
}

// The central directory from `cd_offset` (its first signature already taken), then the end
// records. Each record must describe exactly one entry seen, as its local header did: readers
// (Python's zipfile, libzip) go by the central directory, and the data checked is the local
// entries'.
Outcome StreamCheck::State::Central(uint64_t cd_offset) {
  size_t records = 0;
  auto cut = [&] { return Failed("inside its central directory"); };
  uint32_t sig = kCentralSig;
  while (sig == kCentralSig) {
    uint8_t h[42];
    if (!Take(h, sizeof h)) return cut();
    const uint64_t n = Le(h + 24, 2), m = Le(h + 26, 2), k = Le(h + 28, 2);
    std::vector<uint8_t> rest(n + m + k);
    if (!Take(rest.data(), rest.size())) return cut();
    const std::string name(reinterpret_cast<const char*>(rest.data()), n);
    uint64_t comp_size = Le(h + 16, 4), size = Le(h + 20, 4), header = Le(h + 38, 4);
    uint64_t disk = Le(h + 30, 2);
    for (size_t x = n; x + 4 <= n + m;) {
      const uint64_t id = Le(&rest[x], 2), len = Le(&rest[x + 2], 2);
      if (x + 4 + len > n + m) return Outcome::kInspect;
      if (id == 0x0001) {
        size_t y = x + 4;
        for (uint64_t* field : {&size, &comp_size, &header}) {
          if (*field != kMax32) continue;
          if (y + 8 > x + 4 + len) return Outcome::kInspect;
          *field = Le(&rest[y], 8);
          y += 8;
        }
      }
      x += 4 + len;
    }
    if (disk != 0) return Outcome::kInspect;
    const auto it = by_header.find(header);
    if (it == by_header.end()) {
      refusal = "the central directory lists " + Printable(name) + " at byte " +
                std::to_string(header) +
                ", where no entry starts: the archive disagrees with itself";
      return Outcome::kRefused;
    }
    Seen& e = seen[it->second];
    auto differs = [&](const char* field, uint64_t central, uint64_t local) {
      refusal = Printable(e.name) + ": the central directory says " + field + " " +
                std::to_string(central) + ", its local header " + std::to_string(local) +
                ": the archive disagrees with itself";
      return Outcome::kRefused;
    };
    if (e.listed) {
      refusal = "the central directory lists the entry at byte " + std::to_string(header) +
                " twice: the archive disagrees with itself";
      return Outcome::kRefused;
    }
    if (name != e.name) {
      refusal = "the central directory names the entry at byte " + std::to_string(header) + " " +
                Printable(name) + ", its local header " + Printable(e.name) +
                ": the archive disagrees with itself";
      return Outcome::kRefused;
    }
    if (const uint64_t flags = Le(h + 4, 2); flags != e.flags)
      return differs("flags", flags, e.flags);
    if (const uint64_t method = Le(h + 6, 2); method != e.method)
      return differs("compression method", method, e.method);
    if (const uint64_t crc = Le(h + 12, 4); crc != e.crc) return differs("CRC-32", crc, e.crc);
    if (comp_size != e.comp_size) return differs("compressed size", comp_size, e.comp_size);
    if (size != e.size) return differs("size", size, e.size);
    e.listed = true;
    e.opsys = h[1];
    e.attributes = static_cast<uint32_t>(Le(h + 34, 4));
    ++records;
    uint8_t next[4];
    if (!Take(next, 4)) return cut();
    sig = static_cast<uint32_t>(Le(next, 4));
  }
  for (const Seen& e : seen) {
    if (!e.listed) {
      refusal = Printable(e.name) + " (at byte " + std::to_string(e.header) +
                ") is not in the central directory: the archive disagrees with itself";
      return Outcome::kRefused;
    }
  }
  const uint64_t cd_size = pos - 4 - cd_offset;
  // zip64's end record (44 bytes after its size field: nothing extensible) and its locator,
  // which Python's zipfile expects right before the end record.
  bool zip64 = false;
  uint64_t z_count = 0, z_cd_size = 0, z_cd_offset = 0;
  if (sig == kZip64EndSig) {
    const uint64_t z_at = pos - 4;
    uint8_t z[52], loc[20];
    if (!Take(z, sizeof z) || !Take(loc, sizeof loc)) return cut();
    if (Le(z, 8) != 44 || Le(z + 12, 4) != 0 || Le(z + 16, 4) != 0 ||
        Le(loc, 4) != kZip64LocatorSig || Le(loc + 4, 4) != 0 || Le(loc + 8, 8) != z_at ||
        Le(loc + 16, 4) != 1)
      return Outcome::kInspect;
    z_count = Le(z + 28, 8);
    z_cd_size = Le(z + 36, 8);
    z_cd_offset = Le(z + 44, 8);
    if (Le(z + 20, 8) != z_count) return Outcome::kInspect;
    zip64 = true;
    uint8_t next[4];
    if (!Take(next, 4)) return cut();
    sig = static_cast<uint32_t>(Le(next, 4));
  } else if (cd_size >= 20) {
    // Without zip64, the 20 bytes before the end record are the central directory's: were they
    // to look like a zip64 locator, Python's zipfile would follow it.
    uint8_t before[4];
    if (::pread(fd, before, 4, static_cast<off_t>(pos - 4 - 20)) != 4 ||
        Le(before, 4) == kZip64LocatorSig)
      return Outcome::kInspect;
  }
  if (sig != kEndSig) return Outcome::kInspect;
  uint8_t end[18];
  if (!Take(end, sizeof end)) return cut();
  if (Le(end, 2) != 0 || Le(end + 2, 2) != 0 || Le(end + 16, 2) != 0) return Outcome::kInspect;
  uint64_t count = Le(end + 4, 2), count_here = Le(end + 6, 2), e_cd_size = Le(end + 8, 4),
           e_cd_offset = Le(end + 12, 4);
  if (count_here != count) return Outcome::kInspect;
  if (zip64) {
    if (count == 0xffff) count = z_count;
    if (e_cd_size == kMax32) e_cd_size = z_cd_size;
    if (e_cd_offset == kMax32) e_cd_offset = z_cd_offset;
    if (z_count != count || z_cd_size != e_cd_size || z_cd_offset != e_cd_offset)
      return Outcome::kInspect;
  }
  if (count != records || e_cd_size != cd_size || e_cd_offset != cd_offset) {
    refusal = "the end record describes a central directory of " + std::to_string(count) +
              " entries, " + std::to_string(e_cd_size) + " bytes at byte " +
              std::to_string(e_cd_offset) + "; the archive has " + std::to_string(records) +
              " entries, " + std::to_string(cd_size) + " bytes at byte " +
              std::to_string(cd_offset) + ": the archive disagrees with itself";
    return Outcome::kRefused;
  }
  // Nothing after the end record (a reader looks for it from the end of the file).
  if (Await(pos + 1)) return Outcome::kInspect;
  return Stopped() ? Outcome::kStopped : Outcome::kVouched;
}

// The SHA-256 of the whole file, read as it is written; "" when stopped or a read fails.
std::string StreamCheck::State::HashArchive() {
  Sha256 sha;
  // Sized by what has arrived, up to kPiece, and not zeroed: a capsule of a few KiB (most of
  // them) costs a few KiB here, not 4 MiB of zeroed pages per upload, which glibc then kept
  // resident in the arena of every thread that had hashed one (forge serve's RSS with 1,000 jobs:
  // bench/kuberay_fleet_scale.sh).
  Buffer buf;
  uint64_t at = 0;
  while (Await(at + 1)) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, Available() - at));
    if (map != nullptr && at + n <= map_size) {
      sha.Update(map + at, n);  // in place: no copy
    } else {
      uint8_t* p = buf.Get(n);
      if (!ReadAt(at, p, n)) return "";
      sha.Update(p, n);
    }
    at += n;
  }
  return Stopped() ? "" : sha.HexDigest();
}

// Inspect's verdict, from what was seen: the same checks in the same order (inspect.cc).
InspectResult StreamCheck::State::Judge(uint64_t size) {
  InspectResult r;
  r.size = size;
  r.sha256 = archive_hex;
  std::vector<std::string> names;
  names.reserve(seen.size());
  for (const Seen& e : seen)
    names.push_back(e.name);
  // An entry's position in `names` is its index in `seen`.
  const std::map<std::string, size_t> entries = internal::ScreenEntryNames(names, &r);
  const auto manifest_it = entries.find(kManifestPath);
  if (manifest_it == entries.end()) {
    r.problems.push_back(std::string(kManifestPath) + ": missing");
    return r;
  }
  const Seen& me = seen[manifest_it->second];
  if (!me.read_error.empty()) {
    r.problems.push_back(std::string(kManifestPath) + ": " + me.read_error);
    return r;
  }
  if (!internal::CheckManifestText(manifest_text, me.got, options, &r)) return r;
  std::set<std::string> listed;
  for (const auto& m : r.manifest->files) {
    listed.insert(m.path);
    const std::string shown = Printable(m.path);
    const auto it = entries.find(m.path);
    if (it == entries.end()) {
      r.problems.push_back(shown + ": in the manifest but missing from the archive");
      continue;
    }
    const Seen& e = seen[it->second];
    if (!e.read_error.empty()) {
      r.problems.push_back(shown + ": cannot be read: " + e.read_error);
    } else if (e.got != m.size) {
      r.problems.push_back(shown + ": size " + (e.got > m.size ? "over " : "") +
                           std::to_string(e.got) + " bytes, the manifest says " +
                           std::to_string(m.size));
    } else if (e.sha256 != m.sha256) {
      r.problems.push_back(shown + ": SHA-256 " + e.sha256 + ", the manifest says " + m.sha256);
    } else if (e.opsys == 3 && (((e.attributes >> 16) & S_IXUSR) != 0) != m.executable) {
      r.problems.push_back(shown + ": executable bit in the archive differs from the manifest");
    } else {
      ++r.verified;
    }
  }
  internal::CheckEveryEntryListed(entries, listed, &r);
  return r;
}

StreamCheck::StreamCheck(int fd, const InspectOptions& options) : s_(std::make_unique<State>()) {
  s_->fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  s_->options = options;
  if (s_->fd >= 0) {
    // Nothing is read past what the caller has written, which never exceeds the limit (it
    // stops writing there); a file without a limit is mapped up to kMaxMapped.
    const uint64_t size = std::min(options.max_total_bytes, kMaxMapped);
    void* m = size == 0
                  ? MAP_FAILED
                  : ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, s_->fd, 0);
    if (m != MAP_FAILED) {
      s_->map = static_cast<const uint8_t*>(m);
      s_->map_size = size;
    }
  }
  State* s = s_.get();
  s_->thread = std::thread([s] {
    const Outcome o = s->fd < 0 ? Outcome::kInspect : s->Run();
    std::lock_guard<std::mutex> lock(s->mu);
    s->outcome = o;
    s->done = true;
    s->cv.notify_all();
  });
  // The archive's SHA-256 on a thread of its own, reading the file right behind the writer: not
  // on the writer's thread, whose every delay holds up the upload (and the client's build
  // behind it), nor on the checker's, which it would make longer once the upload is in.
  s_->hasher = std::thread([s] {
    std::string hex;
    if (s->fd >= 0) hex = s->HashArchive();
    std::lock_guard<std::mutex> lock(s->mu);
    s->archive_hex = std::move(hex);
    s->hashed = true;
    s->cv.notify_all();
  });
}

StreamCheck::~StreamCheck() {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stop = true;
  }
  s_->cv.notify_all();
  s_->thread.join();
  s_->hasher.join();
  if (s_->map != nullptr)
    ::munmap(const_cast<uint8_t*>(s_->map), static_cast<size_t>(s_->map_size));
  if (s_->fd >= 0) ::close(s_->fd);
}

void StreamCheck::Written(uint64_t size) {
  if (size == 0) return;
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->written += size;
  }
  s_->cv.notify_all();
}

std::optional<InspectResult> StreamCheck::Finish() {
  uint64_t bytes = 0;
  {
    std::unique_lock<std::mutex> lock(s_->mu);
    bytes = s_->written;
    s_->complete = true;
    s_->cv.notify_all();
    s_->cv.wait(lock, [&] { return s_->done && s_->hashed; });
  }
  switch (s_->outcome) {
    case Outcome::kVouched:
      if (s_->archive_hex.empty()) break;  // not read back: Inspect says why
      return s_->Judge(bytes);
    case Outcome::kRefused: {
      InspectResult r;
      r.size = bytes;
      r.problems.push_back(s_->refusal);
      return r;
    }
    case Outcome::kInspect:
    case Outcome::kStopped:
      break;
  }
  return std::nullopt;
}

}  // namespace starforge::capsule
