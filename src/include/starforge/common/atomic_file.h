// Whole-file writes that readers (and a crash) see complete or not at all.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "starforge/common/status.h"

namespace starforge {

// Writes all `size` bytes at `data` to `fd`, retrying short writes and EINTR; false (errno set)
// on error.
bool WriteAll(int fd, const char* data, size_t size);

// Replaces `path` with what `fill` writes to the descriptor it is given, atomically: a hidden
// temporary file beside `path` (".<name>.tmp-XXXXXX"), given `mode`, fsynced, renamed over
// `path`, then the directory fsynced. Fails with what failed (fill's own Status when fill
// fails); nothing is left behind on failure.
Status WriteFileAtomic(const std::filesystem::path& path, const std::function<Status(int fd)>& fill,
                       mode_t mode = 0644);

// WriteFileAtomic with `content` as the whole file.
Status WriteFileAtomic(const std::filesystem::path& path, std::string_view content,
                       mode_t mode = 0644);

}  // namespace starforge
