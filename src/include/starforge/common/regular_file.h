// Opening files that untrusted jobs can write, without following or blocking on what they plant.
#pragma once

#include <filesystem>

namespace starforge {

// `fd` when it is open on a regular file; otherwise closes it and returns -1. A job may plant a
// FIFO (a read would block the server), a device or a directory where a log is expected.
int KeepIfRegular(int fd);

// A read-only descriptor of `path` when it is a regular file and not a symlink, never blocking
// (O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); -1 otherwise.
int OpenRegularNoFollow(const std::filesystem::path& path);

}  // namespace starforge
