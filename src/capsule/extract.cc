#include "starforge/capsule/extract.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "internal.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/manifest.h"
#include "starforge/common/atomic_file.h"
#include "starforge/common/status.h"

namespace starforge::capsule {

namespace {

using internal::ErrnoText;
using internal::Fd;
using internal::Printable;

using internal::ZipCloser;
using internal::ZipFileCloser;

struct Planned {
  zip_uint64_t index = 0;
  std::string path;  // without a trailing '/'
  bool is_dir = false;
  bool executable = false;
  uint64_t size = 0;  // declared
};

// Checks every entry of `za`; fills `plan` (sorted by path, so parents come first).
std::vector<std::string> Plan(zip_t* za, const ExtractLimits& limits, std::vector<Planned>* plan) {
  std::vector<std::string> errors;
  const zip_int64_t count = zip_get_num_entries(za, 0);
  if (count < 0 || static_cast<uint64_t>(count) > limits.max_entries) {
    errors.push_back("the archive has " + std::to_string(count) + " entries, more than the " +
                     std::to_string(limits.max_entries) + " allowed");
    return errors;
  }
  std::map<std::string, Planned> by_path;
  uint64_t declared = 0;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto ui = static_cast<zip_uint64_t>(i);
    zip_stat_t st;
    if (zip_stat_index(za, ui, ZIP_FL_ENC_RAW, &st) != 0) {
      errors.push_back("entry " + std::to_string(i) + ": " + zip_error_strerror(zip_get_error(za)));
      continue;
    }
    Planned p;
    p.index = ui;
    p.path = st.name ? st.name : "";
    const std::string shown = Printable(p.path);
    if (!p.path.empty() && p.path.back() == '/') {
      p.is_dir = true;
      p.path.pop_back();
    }
    if (std::string why = CheckArchivePath(p.path); !why.empty()) {
      errors.push_back(shown + ": unsafe entry name: it " + why);
      continue;
    }
    zip_uint8_t opsys = 0;
    zip_uint32_t attributes = 0;
    if (zip_file_get_external_attributes(za, ui, 0, &opsys, &attributes) == 0 &&
        opsys == ZIP_OPSYS_UNIX) {
      const mode_t mode = attributes >> 16;
      const mode_t type = mode & S_IFMT;
      if (type == S_IFLNK) {
        errors.push_back(shown + ": symlinks are not accepted");
        continue;
      }
      if (type != 0 && type != S_IFREG && type != S_IFDIR) {
        errors.push_back(shown + ": special files are not accepted");
        continue;
      }
      if (type == S_IFDIR) p.is_dir = true;
      p.executable = (mode & S_IXUSR) != 0;
    }
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
      errors.push_back(shown + ": encrypted entries are not accepted");
      continue;
    }
    if (!p.is_dir &&
        !zip_compression_method_supported(static_cast<zip_int32_t>(st.comp_method), 0)) {
      errors.push_back(shown + ": unsupported compression method " +
                       std::to_string(st.comp_method));
      continue;
    }
    p.size = p.is_dir ? 0 : st.size;
    declared += p.size;
    const auto [it, inserted] = by_path.emplace(p.path, p);
    if (!inserted && !(it->second.is_dir && p.is_dir)) {
      errors.push_back(shown + ": appears twice in the archive");
    }
  }
  if (declared > limits.max_total_bytes) {
    errors.push_back("the archive unpacks to " + FormatBytes(declared) + ", more than the " +
                     FormatBytes(limits.max_total_bytes) + " allowed");
  }
  for (const auto& [path, p] : by_path) {
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      const auto parent = by_path.find(path.substr(0, slash));
      if (parent != by_path.end() && !parent->second.is_dir)
        errors.push_back(Printable(parent->first) + ": is a file, but " + Printable(path) +
                         " needs it to be a directory");
    }
    plan->push_back(p);
  }
  return errors;
}

// Creates the directories of `path` below `dest`; every one is new, so none can be a symlink
// planted to redirect the writes. On failure errno stays mkdir's.
Status MakeParents(const std::string& dest, const std::string& path, std::set<std::string>* made) {
  for (size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (made->count(dir)) continue;
    if (::mkdir((dest + "/" + dir).c_str(), 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      Status why = Status::Internal(Printable(dir) + ": " + ErrnoText(err));
      errno = err;
      return why;
    }
    made->insert(dir);
  }
  return Status::Ok();
}

}  // namespace

namespace {

// ExtractZip, or with `dest` empty the same checks without writing anything: every entry is
// inflated (and its CRC checked by libzip) into a buffer that is thrown away.
ExtractResult Unpack(const std::filesystem::path& archive, const std::filesystem::path& dest,
                     const ExtractLimits& limits) {
  ExtractResult r;
  int zerr = 0;
  std::unique_ptr<zip_t, ZipCloser> za(
      zip_open(archive.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &zerr));
  if (!za) {
    zip_error_t e;
    zip_error_init_with_code(&e, zerr);
    // libzip refuses duplicate names (ZIP_ER_EXISTS) when it reads the central directory,
    // without saying which: the name is looked up to say it, as every other refusal does.
    // No archive path in the message: it reaches users, and the path is the server's business.
    std::optional<std::string> duplicate;
    if (zerr == ZIP_ER_EXISTS) duplicate = internal::DuplicateZipEntry(archive);
    if (duplicate) {
      r.errors.push_back(Printable(*duplicate) + ": two entries with the same name");
    } else {
      r.errors.push_back(std::string("not a readable zip archive: ") +
                         (zerr == ZIP_ER_EXISTS ? std::string("two entries with the same name")
                                                : zip_error_strerror(&e)));
    }
    zip_error_fini(&e);
    return r;
  }
  std::vector<Planned> plan;
  r.errors = Plan(za.get(), limits, &plan);
  if (!r.ok()) return r;

  const bool write = !dest.empty();
  const std::string root = dest.string();
  if (write) {
    uint64_t declared = 0;
    for (const Planned& p : plan)
      declared += p.size;
    struct statvfs fs_stat {};
    if (::statvfs(dest.parent_path().c_str(), &fs_stat) == 0 &&
        declared > static_cast<uint64_t>(fs_stat.f_bavail) * fs_stat.f_frsize) {
      r.local_errno = ENOSPC;
      r.errors.push_back(root + ": the archive declares " + FormatBytes(declared) + ", only " +
                         FormatBytes(static_cast<uint64_t>(fs_stat.f_bavail) * fs_stat.f_frsize) +
                         " free");
      return r;
    }
    if (limits.hold_space) {
      if (std::string refused = limits.hold_space(declared); !refused.empty()) {
        r.local_errno = ENOSPC;
        r.errors.push_back(std::move(refused));
        return r;
      }
    }
    if (::mkdir(root.c_str(), 0755) != 0) {
      r.local_errno = errno;
      r.errors.push_back(root + ": " + ErrnoText(errno));
      return r;
    }
  }
  auto fail = [&](std::string why) {
    r.errors.push_back(std::move(why));
    std::error_code ec;
    if (write) std::filesystem::remove_all(dest, ec);
    r.files = 0;
    r.bytes = 0;
    return r;
  };
  // Writing the destination failed: our disk, not the archive.
  auto local_fail = [&](std::string why) {
    r.local_errno = errno != 0 ? errno : EIO;
    return fail(std::move(why));
  };
  std::set<std::string> made;
  // No larger than the largest entry needs (+1 to see one that inflates past its header): a
  // zeroed 1 MiB for every small archive was a visible share of a submit's CPU.
  size_t buf_size = 1;
  for (const Planned& p : plan)
    buf_size = std::max(buf_size, static_cast<size_t>(std::min<uint64_t>(p.size + 1, 1 << 20)));
  std::vector<char> buf(buf_size);
  for (const Planned& p : plan) {
    const std::string shown = Printable(p.path);
    if (p.path == kStarforgeDir || p.path.rfind(std::string(kStarforgeDir) + "/", 0) == 0)
      r.reserved = true;
    if (write) {
      if (Status made_dirs = MakeParents(root, p.is_dir ? p.path + "/" : p.path, &made);
          !made_dirs.ok())
        return local_fail(made_dirs.message());
    }
    if (p.is_dir) continue;
    Fd out(write ? ::open((root + "/" + p.path).c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          p.executable ? 0755 : 0644)
                 : -1);
    if (write && out.get() < 0) return local_fail(shown + ": " + ErrnoText(errno));
    std::unique_ptr<zip_file_t, ZipFileCloser> in(zip_fopen_index(za.get(), p.index, 0));
    if (!in) return fail(shown + ": " + zip_error_strerror(zip_get_error(za.get())));
    uint64_t written = 0;
    while (true) {
      const zip_int64_t n = zip_fread(in.get(), buf.data(), buf.size());
      if (n < 0) return fail(shown + ": " + zip_error_strerror(zip_file_get_error(in.get())));
      if (n == 0) break;
      const auto un = static_cast<uint64_t>(n);
      written += un;
      r.bytes += un;
      if (written > p.size)
        return fail(shown + ": inflates to more than the " + std::to_string(p.size) +
                    " bytes its header declares");
      if (r.bytes > limits.max_total_bytes)
        return fail("the archive unpacks to more than " + FormatBytes(limits.max_total_bytes));
      if (write && !WriteAll(out.get(), buf.data(), static_cast<size_t>(n)))
        return local_fail(shown + ": " + ErrnoText(errno));
    }
    if (written != p.size)
      return fail(shown + ": inflates to " + std::to_string(written) + " bytes, its header says " +
                  std::to_string(p.size));
    ++r.files;
  }
  return r;
}

}  // namespace

ExtractResult ExtractZip(const std::filesystem::path& archive, const std::filesystem::path& dest,
                         const ExtractLimits& limits) {
  if (dest.empty()) {
    ExtractResult r;
    r.errors.emplace_back("ExtractZip: no destination");
    r.local_errno = EINVAL;
    return r;
  }
  return Unpack(archive, dest, limits);
}

ExtractResult CheckZip(const std::filesystem::path& archive, const ExtractLimits& limits) {
  return Unpack(archive, {}, limits);
}

}  // namespace starforge::capsule
