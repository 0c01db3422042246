// Request bodies of the routes that take a small JSON object (tokens, playgrounds).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <httplib.h>

namespace starforge::api {

// RFC 9112 §6.3: a request with neither Content-Length nor Transfer-Encoding has no body.
// httplib would read one until the client closes (e.g. `curl -X POST …/cancel` waited for its
// read timeout), so such a body is never read.
bool HasBody(const httplib::Request& req);

// The whole body ("" when there is none), or nullopt when it is longer than `limit` bytes (the
// rest is left unread: the caller answers 413 and the connection closes).
std::optional<std::string> ReadSmallBody(const httplib::Request& req,
                                         const httplib::ContentReader* reader, size_t limit);

}  // namespace starforge::api
