#include "starforge/api/capsule_info.h"

#include <unistd.h>
#include <zip.h>

#include <atomic>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "starforge/capsule/capsule.h"
#include "starforge/common/atomic_file.h"

namespace starforge::api {

namespace fs = std::filesystem;

namespace {

struct ZipClose {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileClose {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

std::optional<std::string> ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

StatusOr<capsule::Manifest> ReadCapsuleManifest(const fs::path& file) {
  int err = 0;
  std::unique_ptr<zip_t, ZipClose> za(zip_open(file.c_str(), ZIP_RDONLY, &err));
  if (!za) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    std::string why = "cannot open " + file.string() + " as a zip: " + zip_error_strerror(&ze);
    zip_error_fini(&ze);
    return Status::Invalid(std::move(why));
  }
  const zip_int64_t index = zip_name_locate(za.get(), capsule::kManifestPath, ZIP_FL_ENC_RAW);
  zip_stat_t st;
  if (index < 0 || zip_stat_index(za.get(), static_cast<zip_uint64_t>(index), 0, &st) != 0) {
    return Status::Invalid(file.string() + " has no " + capsule::kManifestPath);
  }
  if (!(st.valid & ZIP_STAT_SIZE) || st.size > capsule::kMaxManifestBytes) {
    return Status::Invalid(std::string(capsule::kManifestPath) + " in " + file.string() +
                           " is too large");
  }
  std::unique_ptr<zip_file_t, ZipFileClose> f(
      zip_fopen_index(za.get(), static_cast<zip_uint64_t>(index), 0));
  if (!f) {
    return Status::Invalid(std::string("cannot read ") + capsule::kManifestPath + ": " +
                           zip_error_strerror(zip_get_error(za.get())));
  }
  std::string text(static_cast<size_t>(st.size), '\0');
  const zip_int64_t n = zip_fread(f.get(), text.data(), st.size);
  if (n < 0 || static_cast<zip_uint64_t>(n) != st.size) {
    return Status::Invalid(std::string("cannot read ") + capsule::kManifestPath +
                           " (a short or corrupt entry)");
  }
  return capsule::ParseManifest(text);
}

StatusOr<CapsuleInfo> LoadCapsuleInfo(objstore::ObjectStore& objects, const fs::path& cache_dir,
                                      const std::string& sha256) {
  const fs::path cached = cache_dir / ("sha256-" + sha256 + ".json");
  if (std::optional<std::string> text = ReadText(cached)) {
    const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.contains("size") && j["size"].is_number_unsigned() &&
        j.contains("manifest") && j["manifest"].is_string()) {
      if (auto m = capsule::ParseManifest(j["manifest"].get<std::string>()); m.ok())
        return CapsuleInfo{j["size"].get<uint64_t>(), std::move(m).value()};
    }
  }
  const std::string key = capsule::ObjectKey(sha256);
  auto head = objects.Head(key);
  if (!head.ok()) {
    return Status(head.status().code(), "looking up " + key + ": " + head.status().message());
  }
  if (!head.value()) return Status::NotFound(key + " is not in the object store");
  CapsuleInfo info;
  info.size = static_cast<uint64_t>(head.value()->size);
  // A filesystem store's "presigned" URL is the object's own path: read it there.
  fs::path file;
  bool downloaded = false;
  if (auto url = objects.PresignGet(key, 60, std::time(nullptr));
      url.ok() && url.value().rfind("file://", 0) == 0) {
    file = url.value().substr(7);
  } else {
    std::error_code ec;
    fs::create_directories(cache_dir, ec);
    static std::atomic<int> downloads{0};  // two requests may read the same capsule at once
    file = cache_dir / (".download-" + sha256 + "-" + std::to_string(::getpid()) + "-" +
                        std::to_string(++downloads) + ".zip");
    auto got = objects.GetFile(key, file.string());
    if (!got.ok()) {
      return Status(got.status().code(), "downloading " + key + ": " + got.status().message());
    }
    downloaded = true;
  }
  StatusOr<capsule::Manifest> m = ReadCapsuleManifest(file);
  if (downloaded) {
    std::error_code ec;
    fs::remove(file, ec);
  }
  if (!m) return m.status();
  info.manifest = std::move(*m);
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  const nlohmann::json keep = {{"size", info.size}, {"manifest", capsule::ToText(info.manifest)}};
  WriteFileAtomic(cached, keep.dump(), 0600);  // only a cache: a failure means reading again
  return info;
}

}  // namespace starforge::api
