#include "starforge/capsule/manifest.h"

#include <nlohmann/json.hpp>

namespace starforge::capsule {

namespace {

// Strings that nlohmann::json::dump() writes as they are, but for '"' (escaped as \"): valid
// UTF-8 without control characters or backslashes — every path Build accepts.
bool Plain(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == '\\') return false;
  return IsValidUtf8(s);
}

void AppendQuoted(std::string* out, std::string_view s) {
  *out += '"';
  for (char c : s) {
    if (c == '"') *out += '\\';
    *out += c;
  }
  *out += '"';
}

}  // namespace

std::string ToText(const Manifest& manifest) {
  // The bytes of nlohmann's dump() below (sorted keys, no spaces), written directly: a build
  // writes this for every file of the tree, on the path of every rebuild.
  bool plain = true;
  for (const auto& f : manifest.files)
    plain = plain && Plain(f.path) && Plain(f.sha256);
  if (plain) {
    std::string out = "{\"files\":[";
    out.reserve(out.size() + manifest.files.size() * 160);
    for (size_t i = 0; i < manifest.files.size(); ++i) {
      const ManifestEntry& f = manifest.files[i];
      out += i == 0 ? "{\"executable\":" : ",{\"executable\":";
      out += f.executable ? "true" : "false";
      out += ",\"path\":";
      AppendQuoted(&out, f.path);
      out += ",\"sha256\":";
      AppendQuoted(&out, f.sha256);
      out += ",\"size\":" + std::to_string(f.size) + "}";
    }
    return out + "],\"version\":" + std::to_string(manifest.version) + "}\n";
  }
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : manifest.files) {
    files.push_back(
        {{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}, {"executable", f.executable}});
  }
  nlohmann::json doc = {{"version", manifest.version}, {"files", std::move(files)}};
  return doc.dump() + "\n";
}

namespace {

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

StatusOr<Manifest> ParseManifest(std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto fail = [](std::string why) { return Status::Invalid(std::move(why)); };
  if (doc.is_discarded()) return fail("not valid JSON");
  if (!doc.is_object()) return fail("not a JSON object");
  if (!doc.contains("version") || !doc["version"].is_number_integer())
    return fail("version: missing or not an integer");
  Manifest m;
  m.version = doc["version"].get<int>();
  if (m.version != kManifestVersion)
    return fail("version: " + std::to_string(m.version) + " is not supported (expected " +
                std::to_string(kManifestVersion) + ")");
  if (!doc.contains("files") || !doc["files"].is_array())
    return fail("files: missing or not an array");
  size_t i = 0;
  for (const auto& f : doc["files"]) {
    const std::string where = "files[" + std::to_string(i++) + "]";
    if (!f.is_object()) return fail(where + ": not an object");
    if (!f.contains("path") || !f["path"].is_string())
      return fail(where + ".path: missing or not a string");
    if (!f.contains("size") || !f["size"].is_number_unsigned())
      return fail(where + ".size: missing or not a non-negative integer");
    if (!f.contains("sha256") || !f["sha256"].is_string())
      return fail(where + ".sha256: missing or not a string");
    if (!f.contains("executable") || !f["executable"].is_boolean())
      return fail(where + ".executable: missing or not a boolean");
    ManifestEntry e{f["path"].get<std::string>(), f["size"].get<uint64_t>(),
                    f["sha256"].get<std::string>(), f["executable"].get<bool>()};
    if (std::string why = CheckArchivePath(e.path); !why.empty())
      return fail(where + ".path: " + why);
    if (!IsLowerHex64(e.sha256)) return fail(where + ".sha256: not 64 lower-case hex digits");
    if (!m.files.empty() && !(m.files.back().path < e.path))
      return fail(where + ".path: not sorted or duplicated (" + e.path + ")");
    m.files.push_back(std::move(e));
  }
  return m;
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string CheckArchivePath(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.front() == '/') return "is absolute";
  if (!IsValidUtf8(path)) return "is not valid UTF-8";
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) return "contains a control character";
    if (c == '\\') return "contains a backslash (a directory separator on Windows)";
  }
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    const std::string_view part = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty()) return "has an empty component ('//' or a trailing '/')";
    if (part == "..") return "contains '..'";
    if (part == ".") return "contains '.'";
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return "";
}

}  // namespace starforge::capsule
