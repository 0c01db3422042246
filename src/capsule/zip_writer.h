// A streaming writer of the capsule's zip container (PKWARE APPNOTE 6.3): entries are written
// once, in order, with sizes and CRC known up front (no data descriptors, no seeking back), so
// the archive's SHA-256 is computed as it is written and every byte is decided here — the
// container does not depend on a library's version. Compression is the caller's (libdeflate).
// Private to src/capsule.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "internal.h"

struct libdeflate_compressor;

namespace starforge::capsule::internal {

// libdeflate's level 1: several times faster than zlib's level 6 on source code, for capsules
// about 15 % bigger (bench/README.md). Changing it changes every digest: FormatVersion() too.
inline constexpr int kDeflateLevel = 1;

inline constexpr uint16_t kMethodStore = 0;
inline constexpr uint16_t kMethodDeflate = 8;

// What the headers say about one entry.
struct ZipEntryInfo {
  std::string name;  // UTF-8, '/'-separated
  uint16_t method = kMethodStore;
  uint32_t crc32 = 0;
  uint64_t size = 0;        // uncompressed
  uint64_t comp_size = 0;   // bytes of data that follow the local header
  bool executable = false;  // external attributes 0100755 instead of 0100644
};

struct CompressorFree {
  void operator()(libdeflate_compressor* c) const;
};
using Compressor = std::unique_ptr<libdeflate_compressor, CompressorFree>;
// A compressor at kDeflateLevel (null when out of memory).
Compressor NewCompressor();

// Sets info->{size, crc32, method, comp_size} and *out for `data`: deflated when `try_deflate`
// and that makes it smaller, else stored as is. Depends only on the bytes (and libdeflate's
// version), never on the thread or machine.
void EncodeEntry(libdeflate_compressor* c, std::vector<uint8_t> data, bool try_deflate,
                 ZipEntryInfo* info, std::vector<uint8_t>* out);

class ZipWriter {
 public:
  // Writes to `fd` (not owned), which must be empty and at offset 0.
  explicit ZipWriter(int fd);

  // Writes the local header of `e`; the caller then passes exactly e.comp_size bytes to Data.
  // Returns the offset of the entry's data in the archive.
  uint64_t Begin(const ZipEntryInfo& e);
  void Data(const void* data, size_t size);
  // The central directory and end records; then Flush. False on a write error (see error()).
  bool Finish();

  uint64_t bytes() const { return offset_; }
  const std::string& error() const { return error_; }
  // The archive's SHA-256 (hex), after Finish.
  std::string HexDigest() { return sha_.HexDigest(); }

 private:
  struct Central {
    ZipEntryInfo info;
    uint64_t header_offset;
  };
  void Put(const void* data, size_t size);
  void Flush();

  int fd_;
  uint64_t offset_ = 0;
  std::vector<char> buf_;
  std::vector<Central> central_;
  Sha256 sha_;
  std::string error_;
};

}  // namespace starforge::capsule::internal
