#include "starforge/cli/code_archive.h"

#include <sys/stat.h>
#include <zip.h>

#include <chrono>
#include <fstream>
#include <memory>

#include "starforge/capsule/capsule.h"

namespace starforge::cli {

namespace {

// 1980-01-01 00:00, the DOS epoch: the archive does not depend on when files were touched.
constexpr zip_uint16_t kDosTime = 0;
constexpr zip_uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;
constexpr size_t kHeadBytes = 64 << 10;

struct ZipDiscard {
  void operator()(zip_t* za) const { zip_discard(za); }
};

std::string Head(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::string head(kHeadBytes, '\0');
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  return head;
}

struct ProgressState {
  const std::function<void(double)>* progress;
  std::chrono::steady_clock::time_point last;
};

}  // namespace

std::string WriteCodeZip(const std::vector<capsule::InputFile>& files,
                         const std::filesystem::path& out,
                         const std::function<void(double)>& progress) {
  int zerr = 0;
  std::unique_ptr<zip_t, ZipDiscard> za(zip_open(out.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &zerr));
  if (!za) {
    zip_error_t e;
    zip_error_init_with_code(&e, zerr);
    std::string msg = "cannot create " + out.string() + ": " + zip_error_strerror(&e);
    zip_error_fini(&e);
    return msg;
  }
  auto zip_error = [&za](const std::string& path) {
    return path + ": " + zip_error_strerror(zip_get_error(za.get()));
  };
  for (const capsule::InputFile& f : files) {
    zip_source_t* src = zip_source_file(za.get(), f.source.c_str(), 0, 0);
    if (src == nullptr) return zip_error(f.path);
    const zip_int64_t idx = zip_file_add(za.get(), f.path.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      return zip_error(f.path);
    }
    const auto uidx = static_cast<zip_uint64_t>(idx);
    const bool store = f.size == 0 || capsule::LooksIncompressible(Head(f.source));
    const zip_uint32_t mode = S_IFREG | (f.executable ? 0755 : 0644);
    if (zip_set_file_compression(za.get(), uidx, store ? ZIP_CM_STORE : ZIP_CM_DEFLATE,
                                 store ? 0 : 6) != 0 ||
        zip_file_set_dostime(za.get(), uidx, kDosTime, kDosDate, 0) != 0 ||
        zip_file_set_external_attributes(za.get(), uidx, 0, ZIP_OPSYS_UNIX, mode << 16) != 0)
      return zip_error(f.path);
  }
  ProgressState state{&progress, {}};
  if (progress) {
    zip_register_progress_callback_with_state(
        za.get(), 0.001,
        [](zip_t*, double fraction, void* ud) {
          auto* s = static_cast<ProgressState*>(ud);
          const auto now = std::chrono::steady_clock::now();
          if (fraction < 1.0 && now - s->last < std::chrono::milliseconds(100)) return;
          s->last = now;
          (*s->progress)(fraction);
        },
        nullptr, &state);
  }
  if (zip_close(za.get()) != 0) return "writing " + out.string() + ": " + zip_error("the archive");
  za.release();  // zip_close freed it
  return "";
}

}  // namespace starforge::cli
