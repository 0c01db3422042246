#include "starforge/capsule/accept.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <set>

#include "internal.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/inspect.h"
#include "starforge/jobspec/parse.h"
#include "starforge/runner/embedded.h"
#include "zip_writer.h"

namespace starforge::capsule {

namespace {

using internal::Printable;

using internal::ZipCloser;
using internal::ZipFileCloser;

bool IsStarforgePath(std::string_view p) {
  return p.starts_with(std::string(kStarforgeDir) + "/");
}

// Writes the capsule with the server's JobSpec and runner: the user's entries as they are
// (compressed bytes copied through libzip, CRC and sizes from the verified archive), StarForge's
// encoded as Build encodes them.
std::string Rebuild(const std::filesystem::path& upload, const Manifest& manifest,
                    std::string_view jobspec_text, std::string_view runner,
                    const std::filesystem::path& scratch_dir, AcceptResult* r) {
  int zerr = 0;
  std::unique_ptr<zip_t, ZipCloser> za(zip_open(upload.c_str(), ZIP_RDONLY, &zerr));
  if (!za) return "cannot open the upload again";
  Manifest rebuilt;
  for (const auto& m : manifest.files) {
    if (m.path == kJobSpecPath || m.path == kRunnerPath) continue;
    rebuilt.files.push_back(m);
  }
  rebuilt.files.push_back(
      {kJobSpecPath, jobspec_text.size(), internal::Sha256Hex(jobspec_text), false});
  rebuilt.files.push_back({kRunnerPath, runner.size(), internal::Sha256Hex(runner), false});
  std::sort(rebuilt.files.begin(), rebuilt.files.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  const std::string manifest_text = ToText(rebuilt);

  std::string tmpl = (scratch_dir / ".rebuild-XXXXXX").string();
  internal::Fd fd(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (fd.get() < 0) {
    r->local_errno = errno;
    return "cannot create a file in " + scratch_dir.string() + ": " + internal::ErrnoText(errno);
  }
  struct Unlink {
    std::string path;
    ~Unlink() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  } unlink{tmpl};
  internal::ZipWriter zip(fd.get());
  internal::Compressor c = internal::NewCompressor();
  if (!c) return "out of memory for the compressor";
  std::vector<std::pair<std::string, const ManifestEntry*>> entries;
  for (const auto& m : rebuilt.files)
    entries.emplace_back(m.path, &m);
  entries.emplace_back(kManifestPath, nullptr);
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return ArchiveOrder(a.first, b.first); });
  std::vector<char> buf(1 << 20);
  for (const auto& [path, m] : entries) {
    internal::ZipEntryInfo info;
    info.name = path;
    std::string_view own;
    if (path == kManifestPath) own = manifest_text;
    if (path == kJobSpecPath) own = jobspec_text;
    if (path == kRunnerPath) own = runner;
    if (m == nullptr || path == kJobSpecPath || path == kRunnerPath) {
      std::vector<uint8_t> data;
      const bool deflate = !LooksIncompressible(own.substr(0, 64 << 10));
      internal::EncodeEntry(c.get(), std::vector<uint8_t>(own.begin(), own.end()), deflate, &info,
                            &data);
      zip.Begin(info);
      zip.Data(data.data(), data.size());
      continue;
    }
    const zip_int64_t idx = zip_name_locate(za.get(), path.c_str(), ZIP_FL_ENC_RAW);
    zip_stat_t st;
    if (idx < 0 || zip_stat_index(za.get(), static_cast<zip_uint64_t>(idx), 0, &st) != 0)
      return Printable(path) + ": cannot be read again";
    if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
      return Printable(path) + ": compressed with method " + std::to_string(st.comp_method) +
             "; capsules use stored or deflate";
    info.method = static_cast<uint16_t>(st.comp_method);
    info.crc32 = st.crc;
    info.size = st.size;
    info.comp_size = st.comp_size;
    info.executable = m->executable;
    zip.Begin(info);
    std::unique_ptr<zip_file_t, ZipFileCloser> f(
        zip_fopen_index(za.get(), static_cast<zip_uint64_t>(idx), ZIP_FL_COMPRESSED));
    if (!f) return Printable(path) + ": cannot be read again";
    uint64_t copied = 0;
    while (true) {
      const zip_int64_t n = zip_fread(f.get(), buf.data(), buf.size());
      if (n < 0) return Printable(path) + ": cannot be read again";
      if (n == 0) break;
      copied += static_cast<uint64_t>(n);
      zip.Data(buf.data(), static_cast<size_t>(n));
    }
    if (copied != info.comp_size) return Printable(path) + ": shorter than its header says";
  }
  if (!zip.Finish()) {
    r->local_errno = EIO;
    return "writing " + tmpl + ": " + zip.error();
  }
  r->sha256 = zip.HexDigest();
  r->size = zip.bytes();
  r->path = scratch_dir / FileName(r->sha256);
  if (::rename(tmpl.c_str(), r->path.c_str()) != 0) {
    r->local_errno = errno;
    return "cannot write " + r->path.string() + ": " + internal::ErrnoText(errno);
  }
  unlink.path.clear();
  r->rebuilt = true;
  return "";
}

std::string OverLimit(uint64_t size, uint64_t max_bytes) {
  return "the capsule is " + FormatBytes(size) + ", over the " + FormatBytes(max_bytes) +
         " limit (FORGE_CAPSULE_MAX_BYTES)";
}

}  // namespace

AcceptResult AcceptCapsule(const std::filesystem::path& upload, const jobspec::JobSpec& spec,
                           const AcceptOptions& options) {
  AcceptResult r;
  struct stat st {};
  if (::stat(upload.c_str(), &st) != 0) {
    r.local_errno = errno;
    r.errors.push_back(upload.string() + ": " + internal::ErrnoText(errno));
    return r;
  }
  if (static_cast<uint64_t>(st.st_size) > options.max_bytes) {
    r.errors.push_back(OverLimit(static_cast<uint64_t>(st.st_size), options.max_bytes));
    return r;
  }
  InspectOptions io;
  io.max_total_bytes = options.max_bytes;
  return AcceptInspected(upload, Inspect(upload, io), spec, options);
}

AcceptResult AcceptInspected(const std::filesystem::path& upload, InspectResult inspected,
                             const jobspec::JobSpec& spec, const AcceptOptions& options) {
  AcceptResult r;
  if (inspected.size > options.max_bytes) {
    r.errors.push_back(OverLimit(inspected.size, options.max_bytes));
    return r;
  }
  if (!inspected.ok()) {
    r.errors = std::move(inspected.problems);
    if (r.errors.empty()) r.errors.emplace_back("no readable manifest");
    return r;
  }
  const Manifest& manifest = *inspected.manifest;
  std::set<std::string_view> paths;
  for (const auto& m : manifest.files)
    paths.insert(m.path);
  for (const auto& m : manifest.files) {
    if (IsStarforgePath(m.path) && m.path != kJobSpecPath && m.path != kRunnerPath) {
      r.errors.push_back(Printable(m.path) + ": .starforge/ is reserved for StarForge's own files");
      continue;
    }
    if (!IsStarforgePath(m.path)) ++r.user_files;
    const std::string_view p = m.path;
    for (size_t slash = p.find('/'); slash != std::string_view::npos;
         slash = p.find('/', slash + 1)) {
      if (paths.count(p.substr(0, slash)))
        r.errors.push_back(Printable(p.substr(0, slash)) + ": is a file, but " + Printable(p) +
                           " needs it to be a directory");
    }
  }
  if (r.user_files == 0) r.errors.emplace_back("the capsule holds no files of yours");
  if (!r.ok()) return r;

  const std::string jobspec_text = jobspec::ToCanonicalText(spec);
  const std::string_view runner = options.runner ? *options.runner : runner::Zipapp();
  auto digest_of = [&](const char* path) {
    for (const auto& m : manifest.files)
      if (m.path == path) return m.sha256;
    return std::string();
  };
  if (digest_of(kJobSpecPath) == internal::Sha256Hex(jobspec_text) &&
      digest_of(kRunnerPath) == internal::Sha256Hex(runner)) {
    r.sha256 = inspected.sha256;
    r.size = inspected.size;
    r.path = upload;
    return r;
  }
  if (std::string error = Rebuild(upload, manifest, jobspec_text, runner, options.scratch_dir, &r);
      !error.empty()) {
    r.errors.push_back(error);
    r.path.clear();
    r.sha256.clear();
  }
  return r;
}

}  // namespace starforge::capsule
