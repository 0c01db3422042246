#include "starforge/api/console_assets.h"

#include <gtest/gtest.h>

namespace starforge::api {
namespace {

const std::vector<ConsoleFile> kFiles = {
    {"/index.html", "<!doctype html><script type=module src=/assets/index-abc.js></script>"},
    {"/assets/index-abc.js", "console.log(1)"},
    {"/assets/index-abc.css", "body{}"},
    {"/favicon.svg", "<svg/>"},
};

std::string Header(const ConsoleResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

TEST(ConsoleLookup, ApiPathsAreLeftToTheApi) {
  for (const char* p : {"/api", "/api/", "/api/v1/nope", "/healthz", "/readyz", "/metrics"})
    EXPECT_FALSE(ConsoleLookup(p, kFiles)) << p;
}

TEST(ConsoleLookup, HashedAssetsAreImmutableWithTheirTypes) {
  auto r = ConsoleLookup("/assets/index-abc.js", kFiles);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "console.log(1)");
  EXPECT_EQ(r->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(Header(*r, "Cache-Control"), "public, max-age=31536000, immutable");
  EXPECT_EQ(ConsoleLookup("/assets/index-abc.css", kFiles)->content_type,
            "text/css; charset=utf-8");
  auto svg = ConsoleLookup("/favicon.svg", kFiles);
  EXPECT_EQ(svg->content_type, "image/svg+xml");
  EXPECT_EQ(Header(*svg, "Cache-Control"), "no-cache");
}

TEST(ConsoleLookup, ClientRoutesGetTheRevalidatedPage) {
  for (const char* p : {"/", "/index.html", "/jobs", "/jobs/j-abc", "/capacity", "/submit"}) {
    auto r = ConsoleLookup(p, kFiles);
    ASSERT_TRUE(r) << p;
    EXPECT_EQ(r->status, 200) << p;
    EXPECT_EQ(r->body, kFiles[0].body) << p;
    EXPECT_EQ(r->content_type, "text/html; charset=utf-8");
    EXPECT_EQ(Header(*r, "Cache-Control"), "no-cache");
  }
}

TEST(ConsoleLookup, MissingFilesAre404NotThePage) {
  // A stale page asking for an old build's asset must not get HTML back as JavaScript.
  for (const char* p : {"/assets/index-old.js", "/assets/x", "/favicon.ico", "/robots.txt"}) {
    auto r = ConsoleLookup(p, kFiles);
    ASSERT_TRUE(r) << p;
    EXPECT_EQ(r->status, 404) << p;
    EXPECT_EQ(r->content_type, "text/plain; charset=utf-8");
  }
}

TEST(ConsoleLookup, EveryAnswerCarriesTheStrictPolicy) {
  for (const char* p : {"/", "/jobs/j-1", "/assets/index-abc.js", "/nope.png"}) {
    auto r = ConsoleLookup(p, kFiles);
    ASSERT_TRUE(r) << p;
    const std::string csp = Header(*r, "Content-Security-Policy");
    EXPECT_EQ(csp, ConsoleCsp());
    EXPECT_EQ(Header(*r, "X-Content-Type-Options"), "nosniff");
  }
  const std::string csp(ConsoleCsp());
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe"), std::string::npos);
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos);
}

TEST(ConsoleFiles, TheBuiltConsoleIsEmbedded) {
  // Built by scripts/bootstrap (web/ → web/dist); without it, a page that says how to build it.
  bool index = false;
  for (const ConsoleFile& f : ConsoleFiles())
    index = index || (f.path == "/index.html" && !f.body.empty());
  EXPECT_TRUE(index);
}

TEST(ContentTypeFor, ByExtension) {
  EXPECT_EQ(ContentTypeFor("/a/b.json"), "application/json");
  EXPECT_EQ(ContentTypeFor("/a.b/c"), "application/octet-stream");
  EXPECT_EQ(ContentTypeFor("/x.bin"), "application/octet-stream");
}

}  // namespace
}  // namespace starforge::api
