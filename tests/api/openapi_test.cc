// The OpenAPI document describes exactly the routes the server registers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

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

TEST(OpenApi, ValidJsonOpenApi3WithEveryRouteAndNoOther) {
  json doc = json::parse(OpenApiDocument());  // throws (fails) when not JSON
  EXPECT_TRUE(doc.at("openapi").get<std::string>().starts_with("3.0"));
  std::set<std::string> registered;
  for (const auto& r : Routes())
    registered.insert(r.method + " " + r.path);
  EXPECT_EQ(DocumentRoutes(doc), registered);
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
