// The web console's routes: one-time login codes (login_codes.h) by which `forge console --login`
// signs a browser in. The console's files are answered for any other GET (console_assets.cc).
#include "starforge/api/handlers.h"

#include <optional>
#include <string>

#include "starforge/api/body.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/format.h"

namespace starforge::api {

// POST /api/v1/console/login-codes: a code for the caller's own token.
void ConsoleLoginCode(Call& c) {
  ServerState& s = c.server;
  NoBody(c);
  OnlyParams(c, {});
  // Authenticate() accepted "Bearer <token>": the token is the header's last word.
  const std::string header = c.req.get_header_value("Authorization");
  const size_t end = header.find_last_not_of(' ');
  const size_t start = header.find_last_of(' ', end) + 1;
  const std::string token = header.substr(start, end + 1 - start);
  const std::string code = s.login_codes.Issue(token, NowMs());
  SetJson(c.res, 201, {{"code", code}, {"expiresInSeconds", LoginCodes::kLifetimeMs / 1000}});
}

// POST /api/v1/console/login {"code"}: the token, once. Unauthenticated by design: the code
// is the credential.
void ConsoleLogin(Call& c) {
  ServerState& s = c.server;
  c.body_read = true;
  const std::optional<std::string> body = ReadSmallBody(c.req, c.reader, kMaxSmallBody);
  if (!body) throw ApiError{413, api_errors::kPayloadTooLarge, "the body is too large", {}, {}};
  OnlyParams(c, {});
  const nlohmann::json doc = nlohmann::json::parse(*body, nullptr, false);
  if (!doc.is_object() || !doc.contains("code") || !doc["code"].is_string())
    throw BadRequest("expected {\"code\": \"...\"} from forge console --login", "code");
  auto token = s.login_codes.Redeem(doc["code"].get<std::string>(), NowMs());
  if (!token)
    throw ApiError{401,
                   api_errors::kUnauthorized,
                   "this login link is used up or expired (it works once, for a minute): run "
                   "forge console --login again, or sign in with a token",
                   "code",
                   {}};
  SetJson(c.res, 200, {{"token", *token}});
}

}  // namespace starforge::api
