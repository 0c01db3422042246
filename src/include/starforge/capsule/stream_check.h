// Checking a capsule while it is uploaded (docs/capsule.md, "Submitting"): the server verifies
// each entry as its bytes arrive, so that little of the check is left once the last byte is in,
// instead of reading the whole archive again after the upload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "starforge/capsule/inspect.h"

namespace starforge::capsule {

class StreamCheck {
 public:
  // Follows the file open for reading as `fd` (duplicated: the caller may close its own) while
  // the caller writes it from offset 0 on, checking on a thread of its own. `options` as for
  // Inspect (max_entries and max_total_bytes; not threads or opened).
  StreamCheck(int fd, const InspectOptions& options);
  // Stops the check (an upload that failed) and waits for its thread.
  ~StreamCheck();
  StreamCheck(const StreamCheck&) = delete;
  StreamCheck& operator=(const StreamCheck&) = delete;

  // The caller has appended `size` more bytes to the file. The check (and the archive's SHA-256,
  // on a thread of its own) reads them back from the file.
  void Written(uint64_t size);

  // The file is complete: waits for the check and returns what Inspect gives for the file —
  // the same verdict, and the same problems but for the archive's structure, which this reads
  // itself (an entry whose central directory record disagrees with its local header, an
  // archive cut short) — or nothing when the archive is laid out in a way only Inspect reads
  // (data descriptors, methods other than stored and deflate, encryption, deflated entries over
  // 64 MiB, a comment, bytes before or after the archive, files that add up to more than the
  // limit) or the file could not be read back: the caller then inspects the file.
  std::optional<InspectResult> Finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace starforge::capsule
