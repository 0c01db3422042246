#include "starforge/api/console_assets.h"

#include <httplib.h>

namespace starforge::api {

namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Paths that belong to the API, never to the console (a typo there must stay a JSON 404).
bool IsApiPath(std::string_view path) {
  return path == "/api" || StartsWith(path, "/api/") || path == "/healthz" || path == "/readyz" ||
         path == "/metrics";
}

const ConsoleFile* Find(std::string_view path, const std::vector<ConsoleFile>& files) {
  for (const ConsoleFile& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> SecurityHeaders() {
  return {{"Content-Security-Policy", std::string(ConsoleCsp())},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Frame-Options", "DENY"}};
}

}  // namespace

std::string_view ConsoleCsp() {
  return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
         "connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
         "form-action 'self'; frame-ancestors 'none'";
}

std::string ContentTypeFor(std::string_view path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash))
    return "application/octet-stream";
  const std::string_view ext = path.substr(dot + 1);
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"html", "text/html; charset=utf-8"},
      {"js", "text/javascript; charset=utf-8"},
      {"mjs", "text/javascript; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},
      {"json", "application/json"},
      {"svg", "image/svg+xml"},
      {"png", "image/png"},
      {"ico", "image/x-icon"},
      {"woff2", "font/woff2"},
      {"txt", "text/plain; charset=utf-8"},
  };
  for (const auto& [e, type] : kTypes) {
    if (ext == e) return std::string(type);
  }
  return "application/octet-stream";
}

std::optional<ConsoleResponse> ConsoleLookup(std::string_view path,
                                             const std::vector<ConsoleFile>& files) {
  if (IsApiPath(path)) return std::nullopt;
  ConsoleResponse r;
  r.headers = SecurityHeaders();
  const ConsoleFile* f = path == "/" ? nullptr : Find(path, files);
  if (f != nullptr && path != "/index.html") {
    r.body = f->body;
    r.content_type = ContentTypeFor(path);
    // Vite names everything under /assets/ by its content hash: it never changes.
    r.headers.emplace_back("Cache-Control", StartsWith(path, "/assets/")
                                                ? "public, max-age=31536000, immutable"
                                                : "no-cache");
    return r;
  }
  const size_t slash = path.rfind('/');
  const bool has_extension =
      path.find('.', slash == std::string_view::npos ? 0 : slash) != std::string_view::npos;
  if (f == nullptr && (StartsWith(path, "/assets/") || has_extension) && path != "/index.html") {
    r.status = 404;
    r.body = "not found\n";
    r.content_type = "text/plain; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-cache");
    return r;
  }
  // A client route (/jobs/j-…, /capacity, …): the page, which routes itself. Revalidated on
  // every load so a new build's asset names are picked up.
  const ConsoleFile* index = Find("/index.html", files);
  if (index == nullptr) return std::nullopt;
  r.body = index->body;
  r.content_type = ContentTypeFor("/index.html");
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

bool ServeConsole(const httplib::Request& req, httplib::Response& res) {
  std::optional<ConsoleResponse> r = ConsoleLookup(req.path, ConsoleFiles());
  if (!r) return false;
  res.status = r->status;
  for (auto& [k, v] : r->headers)
    res.set_header(k, v);
  // A copy per request (the files are tens of KB), so that httplib compresses it for clients
  // that accept gzip or brotli.
  res.set_content(std::string(r->body), r->content_type);
  return true;
}

}  // namespace starforge::api
