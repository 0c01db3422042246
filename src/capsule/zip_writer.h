// A streaming writer of the capsule's zip container (PKWARE APPNOTE 6.3): entries are written
// once, in order, with sizes and CRC known up front (no data descriptors, no seeking back), so
// the archive's SHA-256 is computed as it is written and every byte is decided here — the
// container does not depend on a library's version. Compression is the caller's (libdeflate).
// Private to src/capsule.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "internal.h"
#include "sha256_resume.h"

struct libdeflate_compressor;

namespace starforge::capsule::internal {

// libdeflate's level 1: 6–10× faster than zlib's level 6 on source-like text, for text entries
// about 25 % bigger (bench/README.md). Changing it changes every digest: FormatVersion() too.
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

// Hashes on the calling thread and writes on its own thread, so that copying an unchanged entry
// costs max(SHA-256, write) rather than their sum.
class ZipWriter {
 public:
  // Writes to `fd` (not owned), which must be empty and at offset 0. `written`, when set, is
  // called on the write thread after each write with `fd` and the bytes the file then holds
  // (BuildOptions::written).
  using WrittenFn = std::function<void(int fd, uint64_t bytes)>;
  explicit ZipWriter(int fd, WrittenFn written = {});
  ~ZipWriter();
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  // Writes the local header of `e`; the caller then passes exactly e.comp_size bytes of data.
  // Returns the offset of the entry's data in the archive.
  uint64_t Begin(const ZipEntryInfo& e);
  void Data(const void* data, size_t size);  // copied
  void Data(std::vector<uint8_t> data);      // taken
  // Not copied: must stay valid and unchanged until Finish. `data` is `size` bytes of the file
  // `src_fd` at `src_offset` (mapped): they are hashed from memory and copied file to file by
  // the kernel (copy_file_range), without passing through this process.
  void DataFromFile(const void* data, size_t size, int src_fd, uint64_t src_offset);
  // Copies an entry of an earlier archive written by this writer as it is, local header and
  // data — when the header there (ending at `data_offset` of the `src_size` bytes mapped at
  // `src`) is exactly the one Begin(e) would write, so the bytes are those of a fresh write.
  // Entries contiguous in `src` become one kernel copy (copy_file_range from `src_fd`). Same
  // contract as DataFromFile for `src`. False (nothing written) when the header differs.
  bool CopyEntry(const ZipEntryInfo& e, const uint8_t* src, uint64_t src_size, int src_fd,
                 uint64_t data_offset, uint64_t* new_data_offset);
  // The previous capsule of the same tree (`size` bytes at `data`, mapped: the same contract as
  // DataFromFile) and the SHA-256 checkpoints it was written with. As long as this archive's
  // bytes are the previous one's, at the same offsets, they are not hashed: at the first byte
  // that differs (or at Finish), hashing resumes from the last checkpoint before it — once the
  // checkpoint before that one, run over the previous capsule's bytes, has led to it; otherwise
  // from byte 0. Call before anything is written.
  void ResumeHashFrom(const uint8_t* data, uint64_t size,
                      const std::vector<HashCheckpoint>& checkpoints);
  // The central directory and end records; then waits for every write. False on a write error
  // (see error()).
  bool Finish();

  uint64_t bytes() const { return offset_; }
  std::string error();
  // The archive's SHA-256 (hex), after Finish.
  std::string HexDigest() { return sha_.HexDigest(); }
  // The archive's SHA-256 state every kCheckpointBytes of it, after Finish (ReuseIndex::Save).
  const std::vector<HashCheckpoint>& checkpoints() const { return checkpoints_; }
  // Bytes this writer ran through SHA-256 (fewer than bytes() when it resumed).
  uint64_t bytes_hashed() const { return hashed_; }

 private:
  struct Central {
    ZipEntryInfo info;
    uint64_t header_offset;
  };
  struct Chunk {
    std::vector<uint8_t> owned;
    const uint8_t* data = nullptr;
    size_t size = 0;
    int src_fd = -1;  // with data: copy_file_range from here, falling back to write(data)
    uint64_t src_offset = 0;
  };
  static std::string LocalHeader(const ZipEntryInfo& e);
  // Accounts for `size` bytes written at offset_ (before it moves on).
  void Hash(const void* data, size_t size);
  void HashOn(const uint8_t* data, size_t size);  // hashes, taking checkpoints
  void CatchUp();  // hashes the previous capsule's bytes up to offset_: they are this archive's
  void Put(const void* data, size_t size);
  void FlushRun();
  void FlushBuffer();
  void Enqueue(Chunk chunk);
  void WriteLoop();

  int fd_;
  WrittenFn written_;
  uint64_t file_bytes_ = 0;  // the write thread's: bytes in the file
  uint64_t offset_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<Central> central_;
  ResumableSha256 sha_;
  std::vector<HashCheckpoint> checkpoints_;
  uint64_t hashed_ = 0;
  // ResumeHashFrom's: while same_prefix_, every byte so far is the previous capsule's.
  bool same_prefix_ = false;
  const uint8_t* prev_ = nullptr;
  uint64_t prev_size_ = 0;
  std::vector<HashCheckpoint> prev_checkpoints_;
  Chunk run_;  // copied entries not yet queued (size 0: none), contiguous in their source

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> queue_;
  uint64_t queued_owned_ = 0;  // bytes of owned chunks waiting: bounded
  bool closing_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace starforge::capsule::internal
