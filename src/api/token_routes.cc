// The token routes: who the caller is, and the API tokens admins create, list and revoke.
#include "starforge/api/handlers.h"

#include <optional>
#include <string>

#include <spdlog/spdlog.h>

#include "starforge/api/body.h"
#include "starforge/api/convert.h"
#include "starforge/common/api_errors.h"
#include "starforge/common/format.h"
#include "starforge/common/sha256.h"

namespace starforge::api {

namespace {

nlohmann::json TokenJson(const store::TokenInfo& t) {
  const int64_t now = NowMs();
  return {{"id", t.id},
          {"user", t.user},
          {"description", t.description},
          {"createdAt", FormatTime(t.created_at)},
          {"expiresAt", t.expires_at ? TimeOrNull(t.expires_at) : nlohmann::json(nullptr)},
          {"revokedAt", t.revoked_at ? TimeOrNull(t.revoked_at) : nlohmann::json(nullptr)},
          {"active", t.revoked_at == 0 && (t.expires_at == 0 || t.expires_at > now)}};
}

}  // namespace

void Whoami(Call& c) {
  SetJson(c.res, 200, {{"user", c.user.name}, {"admin", c.user.admin}});
}

void ListTokens(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {"user"});
  RequireAdmin(c, "manage tokens");
  nlohmann::json items = nlohmann::json::array();
  for (const store::TokenInfo& t :
       s.store.ListTokens(c.req.has_param("user") ? Param(c, "user") : ""))
    items.push_back(TokenJson(t));
  SetJson(c.res, 200, {{"items", std::move(items)}});
}

void CreateToken(Call& c) {
  ServerState& s = c.server;
  OnlyParams(c, {});
  c.body_read = true;
  const std::optional<std::string> body = ReadSmallBody(c.req, c.reader, kMaxSmallBody);
  if (!body)
    throw ApiError{413, api_errors::kPayloadTooLarge, "a token request is a small JSON object"};
  RequireAdmin(c, "manage tokens");
  const nlohmann::json req = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (!req.is_object() || !req.contains("user") || !req["user"].is_string())
    throw BadRequest(
        "expected a JSON object with \"user\" (and optionally \"description\", "
        "\"expiresInSeconds\", \"admin\")");
  const std::string user = req["user"];
  const std::string description = req.value("description", "");
  int64_t expires_at = 0;
  if (req.contains("expiresInSeconds")) {
    const nlohmann::json& e = req["expiresInSeconds"];
    if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > 10LL * 365 * 86400)
      throw BadRequest("expiresInSeconds must be a whole number of seconds from 1 to 10 years",
                       "expiresInSeconds");
    expires_at = NowMs() + e.get<int64_t>() * 1000;
  }
  try {
    s.store.EnsureUser(user, false);
  } catch (const std::invalid_argument& e) {
    throw BadRequest(std::string("user: ") + e.what(), "user");
  }
  if (req.contains("admin")) {
    if (!req["admin"].is_boolean()) throw BadRequest("admin must be true or false", "admin");
    if (user == c.user.name && !req["admin"].get<bool>())
      throw BadRequest("an admin cannot take away their own admin rights", "admin");
    s.store.SetAdmin(user, req["admin"].get<bool>());
  }
  const std::string token = s.store.CreateToken(user, description, expires_at);
  nlohmann::json out;
  for (const store::TokenInfo& t : s.store.ListTokens(user))
    if (t.id == "tok-" + Sha256Hex(token).substr(0, 12)) out = TokenJson(t);
  out["token"] = token;
  spdlog::info("{} created a token for {} ({})", c.user.name, user, out.value("id", ""));
  SetJson(c.res, 201, out);
}

void RevokeToken(Call& c) {
  ServerState& s = c.server;
  NoBody(c);
  OnlyParams(c, {});
  RequireAdmin(c, "manage tokens");
  const std::string id = c.Path();
  const std::optional<store::TokenInfo> t = s.store.RevokeToken(id);
  if (!t) throw ApiError{404, api_errors::kNotFound, "token " + id + " not found"};
  spdlog::info("{} revoked token {} of {}", c.user.name, id, t->user);
  SetJson(c.res, 200, TokenJson(*t));
}

}  // namespace starforge::api
