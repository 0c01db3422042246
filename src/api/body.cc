#include "starforge/api/body.h"

namespace starforge::api {

bool HasBody(const httplib::Request& req) {
  return req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
}

std::optional<std::string> ReadSmallBody(const httplib::Request& req,
                                         const httplib::ContentReader* reader, size_t limit) {
  std::string body;
  if (reader == nullptr || !HasBody(req)) return body;
  bool too_large = false;
  (*reader)([&](const char* data, size_t n) {
    if (body.size() + n > limit) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_large) return std::nullopt;
  return body;
}

}  // namespace starforge::api
