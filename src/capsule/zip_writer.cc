#include "zip_writer.h"

#include <libdeflate.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace starforge::capsule::internal {

namespace {

constexpr size_t kBuffer = 1 << 20;
constexpr uint64_t kMaxQueued = 64 << 20;
constexpr uint64_t kRunBytes = 8 << 20;  // copied entries queued as one copy_file_range
// The archive's SHA-256 state is kept every MiB: resuming re-hashes less than that, and the
// reuse index holds about 80 bytes per MiB of capsule.
constexpr uint64_t kCheckpointBytes = 1 << 20;
constexpr uint32_t kMax32 = 0xffffffffu;
// 1980-01-01 00:00:00, the earliest DOS date: every entry carries it.
constexpr uint16_t kDosTime = 0;
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;
constexpr uint16_t kMadeByUnix = 3 << 8;

class Bytes {
 public:
  Bytes& U16(uint64_t v) { return Le(v, 2); }
  Bytes& U32(uint64_t v) { return Le(v, 4); }
  Bytes& U64(uint64_t v) { return Le(v, 8); }
  Bytes& Raw(std::string_view s) {
    b_.append(s);
    return *this;
  }
  const std::string& str() const { return b_; }

 private:
  Bytes& Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i)
      b_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
  std::string b_;
};

bool NonAscii(std::string_view name) {
  for (unsigned char c : name)
    if (c >= 0x80) return true;
  return false;
}

// General purpose flags: bit 11 (names are UTF-8) exactly when a name is not plain ASCII.
uint16_t Flags(const ZipEntryInfo& e) {
  return NonAscii(e.name) ? 0x800 : 0;
}

bool NeedsZip64(const ZipEntryInfo& e) {
  return e.size >= kMax32 || e.comp_size >= kMax32;
}

uint16_t VersionNeeded(const ZipEntryInfo& e, bool zip64) {
  if (zip64) return 45;
  return e.method == kMethodDeflate ? 20 : 10;
}

}  // namespace

void CompressorFree::operator()(libdeflate_compressor* c) const {
  libdeflate_free_compressor(c);
}

Compressor NewCompressor() {
  return Compressor(libdeflate_alloc_compressor(kDeflateLevel));
}

void EncodeEntry(libdeflate_compressor* c, std::vector<uint8_t> data, bool try_deflate,
                 ZipEntryInfo* info, std::vector<uint8_t>* out) {
  info->size = data.size();
  info->crc32 = libdeflate_crc32(0, data.data(), data.size());
  if (try_deflate && !data.empty()) {
    std::vector<uint8_t> packed(libdeflate_deflate_compress_bound(c, data.size()));
    const size_t n =
        libdeflate_deflate_compress(c, data.data(), data.size(), packed.data(), packed.size());
    if (n > 0 && n < data.size()) {
      packed.resize(n);
      packed.shrink_to_fit();
      info->method = kMethodDeflate;
      info->comp_size = n;
      *out = std::move(packed);
      return;
    }
  }
  info->method = kMethodStore;
  info->comp_size = data.size();
  *out = std::move(data);
}

ZipWriter::ZipWriter(int fd, WrittenFn written) : fd_(fd), written_(std::move(written)) {
  buf_.reserve(kBuffer);
  thread_ = std::thread([this] { WriteLoop(); });
}

ZipWriter::~ZipWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t ZipWriter::Begin(const ZipEntryInfo& e) {
  central_.push_back({e, offset_});
  const std::string h = LocalHeader(e);
  Put(h.data(), h.size());
  return offset_;
}

bool ZipWriter::CopyEntry(const ZipEntryInfo& e, const uint8_t* src, uint64_t src_size, int src_fd,
                          uint64_t data_offset, uint64_t* new_data_offset) {
  const std::string h = LocalHeader(e);
  if (data_offset < h.size() || data_offset > src_size || src_size - data_offset < e.comp_size ||
      std::memcmp(src + data_offset - h.size(), h.data(), h.size()) != 0)
    return false;
  const uint64_t begin = data_offset - h.size(), size = h.size() + e.comp_size;
  central_.push_back({e, offset_});
  Hash(src + begin, size);
  offset_ += size;
  *new_data_offset = offset_ - e.comp_size;
  if (run_.size > 0 && run_.src_fd == src_fd && run_.src_offset + run_.size == begin) {
    run_.size += size;
    // Handed over every few MiB, so the write thread copies while this one hashes on.
    if (run_.size >= kRunBytes) FlushRun();
    return true;
  }
  FlushRun();
  FlushBuffer();
  run_.data = src + begin;
  run_.size = size;
  run_.src_fd = src_fd;
  run_.src_offset = begin;
  return true;
}

void ZipWriter::FlushRun() {
  if (run_.size == 0) return;
  Chunk c = run_;
  run_ = Chunk();
  Enqueue(std::move(c));
}

std::string ZipWriter::LocalHeader(const ZipEntryInfo& e) {
  const bool zip64 = NeedsZip64(e);
  Bytes extra;
  if (zip64) extra.U16(0x0001).U16(16).U64(e.size).U64(e.comp_size);
  Bytes h;
  h.U32(0x04034b50)
      .U16(VersionNeeded(e, zip64))
      .U16(Flags(e))
      .U16(e.method)
      .U16(kDosTime)
      .U16(kDosDate)
      .U32(e.crc32)
      .U32(zip64 ? kMax32 : e.comp_size)
      .U32(zip64 ? kMax32 : e.size)
      .U16(e.name.size())
      .U16(extra.str().size())
      .Raw(e.name)
      .Raw(extra.str());
  return h.str();
}

void ZipWriter::Data(const void* data, size_t size) {
  Put(data, size);
}

void ZipWriter::Data(std::vector<uint8_t> data) {
  FlushRun();
  if (data.size() < kBuffer) {
    Put(data.data(), data.size());
    return;
  }
  Hash(data.data(), data.size());
  offset_ += data.size();
  FlushBuffer();
  Chunk c;
  c.size = data.size();
  c.owned = std::move(data);
  Enqueue(std::move(c));
}

void ZipWriter::DataFromFile(const void* data, size_t size, int src_fd, uint64_t src_offset) {
  FlushRun();
  if (size < kBuffer) {
    Put(data, size);
    return;
  }
  Hash(data, size);
  offset_ += size;
  FlushBuffer();
  Chunk c;
  c.data = static_cast<const uint8_t*>(data);
  c.size = size;
  c.src_fd = src_fd;
  c.src_offset = src_offset;
  Enqueue(std::move(c));
}

bool ZipWriter::Finish() {
  const uint64_t cd_offset = offset_;
  for (const Central& c : central_) {
    const ZipEntryInfo& e = c.info;
    // Only the fields that do not fit go into the zip64 extra field, in APPNOTE's order.
    Bytes extra;
    const bool big_size = e.size >= kMax32, big_comp = e.comp_size >= kMax32,
               big_offset = c.header_offset >= kMax32;
    if (big_size || big_comp || big_offset) {
      const int n = (big_size ? 8 : 0) + (big_comp ? 8 : 0) + (big_offset ? 8 : 0);
      extra.U16(0x0001).U16(n);
      if (big_size) extra.U64(e.size);
      if (big_comp) extra.U64(e.comp_size);
      if (big_offset) extra.U64(c.header_offset);
    }
    const bool zip64 = NeedsZip64(e) || big_offset;
    const uint32_t mode = (e.executable ? 0100755u : 0100644u);
    Bytes h;
    h.U32(0x02014b50)
        .U16(kMadeByUnix | VersionNeeded(e, zip64))
        .U16(VersionNeeded(e, zip64))
        .U16(Flags(e))
        .U16(e.method)
        .U16(kDosTime)
        .U16(kDosDate)
        .U32(e.crc32)
        .U32(big_comp ? kMax32 : e.comp_size)
        .U32(big_size ? kMax32 : e.size)
        .U16(e.name.size())
        .U16(extra.str().size())
        .U16(0)  // comment
        .U16(0)  // disk
        .U16(0)  // internal attributes
        .U32(static_cast<uint64_t>(mode) << 16)
        .U32(big_offset ? kMax32 : c.header_offset)
        .Raw(e.name)
        .Raw(extra.str());
    Put(h.str().data(), h.str().size());
  }
  const uint64_t cd_size = offset_ - cd_offset;
  const uint64_t count = central_.size();
  Bytes end;
  if (count >= 0xffff || cd_size >= kMax32 || cd_offset >= kMax32) {
    const uint64_t zip64_end = offset_;
    end.U32(0x06064b50)
        .U64(44)
        .U16(kMadeByUnix | 45)
        .U16(45)
        .U32(0)
        .U32(0)
        .U64(count)
        .U64(count)
        .U64(cd_size)
        .U64(cd_offset);
    end.U32(0x07064b50).U32(0).U64(zip64_end).U32(1);
  }
  end.U32(0x06054b50)
      .U16(0)
      .U16(0)
      .U16(count >= 0xffff ? 0xffff : count)
      .U16(count >= 0xffff ? 0xffff : count)
      .U32(cd_size >= kMax32 ? kMax32 : cd_size)
      .U32(cd_offset >= kMax32 ? kMax32 : cd_offset)
      .U16(0);
  Put(end.str().data(), end.str().size());
  if (same_prefix_) CatchUp();  // the whole archive is the previous one's
  FlushBuffer();
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  return error().empty();
}

std::string ZipWriter::error() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void ZipWriter::ResumeHashFrom(const uint8_t* data, uint64_t size,
                               const std::vector<HashCheckpoint>& checkpoints) {
  if (offset_ != 0 || data == nullptr) return;
  prev_ = data;
  prev_size_ = size;
  // Only checkpoints inside the previous capsule, in increasing order, can be resumed from.
  for (const HashCheckpoint& c : checkpoints) {
    if (c.offset == 0 || c.offset % 64 != 0 || c.offset > size ||
        (!prev_checkpoints_.empty() && c.offset <= prev_checkpoints_.back().offset))
      break;
    prev_checkpoints_.push_back(c);
  }
  same_prefix_ = true;
}

void ZipWriter::Hash(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (same_prefix_) {
    if (offset_ <= prev_size_ && prev_size_ - offset_ >= size &&
        (p == prev_ + offset_ || std::memcmp(p, prev_ + offset_, size) == 0))
      return;  // still the previous capsule's bytes
    CatchUp();
  }
  HashOn(p, size);
}

void ZipWriter::HashOn(const uint8_t* data, size_t size) {
  while (size > 0) {
    const uint64_t next = (sha_.bytes() / kCheckpointBytes + 1) * kCheckpointBytes;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size, next - sha_.bytes()));
    sha_.Update(data, n);
    hashed_ += n;
    data += n;
    size -= n;
    if (sha_.bytes() == next) checkpoints_.push_back(sha_.Checkpoint());
  }
}

void ZipWriter::CatchUp() {
  same_prefix_ = false;
  const uint64_t end = offset_;  // bytes [0, end) are the previous capsule's
  // The last checkpoint at or before `end`, and the one before it.
  const auto after =
      std::upper_bound(prev_checkpoints_.begin(), prev_checkpoints_.end(), end,
                       [](uint64_t offset, const HashCheckpoint& c) { return offset < c.offset; });
  const size_t k = static_cast<size_t>(after - prev_checkpoints_.begin());
  uint64_t from = 0;
  if (k >= 2) {
    // Cheap evidence that the checkpoints are this capsule's: the one before leads to the last.
    const HashCheckpoint& before = prev_checkpoints_[k - 2];
    const HashCheckpoint& last = prev_checkpoints_[k - 1];
    ResumableSha256 check(before);
    check.Update(prev_ + before.offset, last.offset - before.offset);
    hashed_ += last.offset - before.offset;
    if (check.Checkpoint() == last) {
      sha_ = ResumableSha256(last);
      checkpoints_.assign(prev_checkpoints_.begin(),
                          prev_checkpoints_.begin() + static_cast<ptrdiff_t>(k));
      from = last.offset;
    }
  }
  HashOn(prev_ + from, end - from);
  prev_checkpoints_.clear();
}

void ZipWriter::Put(const void* data, size_t size) {
  FlushRun();
  Hash(data, size);
  offset_ += size;
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const size_t n = std::min(size, kBuffer - buf_.size());
    buf_.insert(buf_.end(), p, p + n);
    p += n;
    size -= n;
    if (buf_.size() == kBuffer) FlushBuffer();
  }
}

void ZipWriter::FlushBuffer() {
  if (buf_.empty()) return;
  Chunk c;
  c.size = buf_.size();
  c.owned = std::move(buf_);
  buf_ = std::vector<uint8_t>();
  buf_.reserve(kBuffer);
  Enqueue(std::move(c));
}

void ZipWriter::Enqueue(Chunk chunk) {
  std::unique_lock<std::mutex> lock(mu_);
  // Hashing is usually slower than writing to the page cache; if not, wait rather than hold
  // the whole archive in memory.
  cv_.wait(lock, [&] { return queued_owned_ < kMaxQueued || !error_.empty(); });
  if (!error_.empty()) return;  // nothing more is written; Finish reports it
  queued_owned_ += chunk.owned.size();
  queue_.push_back(std::move(chunk));
  cv_.notify_all();
}

void ZipWriter::WriteLoop() {
  while (true) {
    Chunk c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      c = std::move(queue_.front());
      queue_.pop_front();
    }
    const uint8_t* p = c.owned.empty() ? c.data : c.owned.data();
    size_t size = c.size;
    const size_t chunk_size = size;
    std::string failed;
    if (c.src_fd >= 0) {
      // The kernel copies page cache to page cache; any failure (another filesystem, an old
      // kernel) falls back to write() of the mapped bytes from where it stopped.
      loff_t in = static_cast<loff_t>(c.src_offset);
      while (size > 0) {
        const ssize_t n = ::copy_file_range(c.src_fd, &in, fd_, nullptr, size, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        p += n;
        size -= static_cast<size_t>(n);
      }
    }
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failed = ErrnoText(n < 0 ? errno : EIO);
        break;
      }
      p += n;
      size -= static_cast<size_t>(n);
    }
    if (failed.empty()) {
      file_bytes_ += chunk_size;
      if (written_) written_(fd_, file_bytes_);
    }
    std::lock_guard<std::mutex> lock(mu_);
    queued_owned_ -= c.owned.size();
    if (!failed.empty() && error_.empty()) error_ = failed;
    if (!error_.empty()) {
      queue_.clear();
      queued_owned_ = 0;
    }
    cv_.notify_all();
  }
}

}  // namespace starforge::capsule::internal
