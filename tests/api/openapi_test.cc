// The OpenAPI document describes exactly the routes the server registers: the route table that
// drives dispatch (routes.h) and src/api/openapi.json are checked against each other both ways,
// and a running server answers every documented operation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "api_test_support.h"
#include "starforge/api/routes.h"

namespace starforge::api {
namespace {

using nlohmann::json;

std::set<std::string> DocumentRoutes(const json& doc) {
  std::set<std::string> out;
  for (const auto& [path, item] : doc.at("paths").items()) {
    for (const auto& [method, op] : item.items()) {
      std::string m = method;
      for (char& ch : m)
        ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      out.insert(m + " " + path);
    }
  }
  return out;
}

TEST(OpenApi, TheCompiledDocumentIsTheFileInTheRepository) {
  std::ifstream f(std::string(STARFORGE_SOURCE_DIR) + "/src/api/openapi.json");
  const std::string file{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  EXPECT_EQ(OpenApiDocument(), file);
}

std::string Upper(std::string s) {
  for (char& ch : s)
    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

TEST(OpenApi, IsJsonOpenApi3) {
  json doc = json::parse(OpenApiDocument());  // throws (fails) when not JSON
  EXPECT_TRUE(doc.at("openapi").get<std::string>().starts_with("3.0"));
}

TEST(OpenApi, EveryRouteIsDocumented) {
  const std::set<std::string> documented = DocumentRoutes(json::parse(OpenApiDocument()));
  for (const Route& r : Routes())
    EXPECT_TRUE(documented.contains(r.method + " " + r.path))
        << r.method << " " << r.path
        << " is in the route table (src/api/routes.cc) but not in src/api/openapi.json";
}

TEST(OpenApi, EveryDocumentedOperationIsRouted) {
  std::set<std::string> routed;
  for (const Route& r : Routes())
    routed.insert(r.method + " " + r.path);
  for (const std::string& op : DocumentRoutes(json::parse(OpenApiDocument())))
    EXPECT_TRUE(routed.contains(op))
        << op << " is in src/api/openapi.json but not in the route table (src/api/routes.cc)";
}

TEST(Routes, EachOnceWithAHandler) {
  std::set<std::string> seen;
  for (const Route& r : Routes()) {
    EXPECT_TRUE(seen.insert(r.method + " " + r.path).second)
        << "twice: " << r.method << " " << r.path;
    EXPECT_NE(r.handler, nullptr) << r.method << " " << r.path;
    EXPECT_THAT(r.method, ::testing::AnyOf("GET", "POST", "PUT", "DELETE")) << r.path;
    EXPECT_EQ(r.method, Upper(r.method));
  }
}

// The server dispatches every documented operation: none is answered "no such route" (404) or
// 405, with or without a token.
TEST(Routes, TheServerAnswersEveryDocumentedOperation) {
  testing::TempDir root("openapi-routes");
  std::string error;
  auto serve = testing::ServeProcess::Start(root.path(), {}, {}, &error);
  ASSERT_TRUE(serve) << error;
  auto http = serve->Client();
  for (const std::string& op : DocumentRoutes(json::parse(OpenApiDocument()))) {
    const std::string method = op.substr(0, op.find(' '));
    // Each {param} as a value that names nothing.
    const std::string path =
        std::regex_replace(op.substr(op.find(' ') + 1), std::regex("\\{[a-z0-9]+\\}"), "x");
    httplib::Request req;
    req.method = method;
    req.path = path;
    if (method != "GET") {
      req.body = "{}";
      req.set_header("Content-Type", "application/json");
    }
    auto res = http->send(req);
    ASSERT_TRUE(res) << op;
    EXPECT_NE(res->status, 405) << op << ": " << res->body;
    EXPECT_FALSE(res->status == 404 && res->body.find("no such route") != std::string::npos)
        << op << ": " << res->body;
  }
}

TEST(OpenApi, PublicRoutesOptOutOfAuthAndOthersDoNot) {
  json doc = json::parse(OpenApiDocument());
  EXPECT_EQ(doc.at("security"), json::parse(R"([{"bearerAuth": []}])"));
  for (const auto& r : Routes()) {
    std::string method = r.method;
    for (char& ch : method)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const json& op = doc.at("paths").at(r.path).at(method);
    EXPECT_EQ(op.contains("security"), !r.auth) << r.method << " " << r.path;
    if (!r.auth) {
      EXPECT_EQ(op.at("security"), json::array()) << r.path;
    }
    // Every {param} of the path is declared.
    std::smatch m;
    std::string rest = r.path;
    while (std::regex_search(rest, m, std::regex("\\{([a-z]+)\\}"))) {
      bool declared = false;
      for (const auto& p : op.value("parameters", json::array()))
        declared = declared || (p.at("in") == "path" && p.at("name") == m[1].str());
      EXPECT_TRUE(declared) << r.path << " " << m[1];
      rest = m.suffix();
    }
  }
}

TEST(OpenApi, EveryReferenceResolves) {
  json doc = json::parse(OpenApiDocument());
  std::vector<std::string> refs;
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_object()) {
      for (const auto& [k, v] : j.items()) {
        if (k == "$ref") refs.push_back(v.get<std::string>());
        walk(v);
      }
    } else if (j.is_array()) {
      for (const auto& v : j)
        walk(v);
    }
  };
  walk(doc);
  EXPECT_FALSE(refs.empty());
  for (const auto& ref : refs) {
    ASSERT_TRUE(ref.starts_with("#/")) << ref;
    EXPECT_TRUE(doc.contains(json::json_pointer(ref.substr(1)))) << ref;
  }
}

TEST(PathRegex, ParamsMatchOneSegment) {
  const std::regex re(PathRegex("/api/v1/jobs/{id}/logs"));
  std::smatch m;
  const std::string ok = "/api/v1/jobs/j-abc/logs";
  ASSERT_TRUE(std::regex_match(ok, m, re));
  EXPECT_EQ(m[1], "j-abc");
  EXPECT_FALSE(std::regex_match(std::string("/api/v1/jobs/a/b/logs"), re));
  EXPECT_FALSE(std::regex_match(std::string("/api/v1/jobs//logs"), re));
  EXPECT_TRUE(std::regex_match(std::string("/api/v1/openapi.json"),
                               std::regex(PathRegex("/api/v1/openapi.json"))));
  EXPECT_FALSE(std::regex_match(std::string("/api/v1/openapiXjson"),
                                std::regex(PathRegex("/api/v1/openapi.json"))));
}

}  // namespace
}  // namespace starforge::api
