// The REST API as clients meet it: the real `forge serve` binary (store, controller, local fleet)
// on a loopback port, a temp FORGE_STORAGE_ROOT, and HTTP requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "api/tfevents.pb.h"
#include "api_test_support.h"
#include "starforge/api/routes.h"
#include "starforge/api/tfevents.h"
#include "starforge/capsule/capsule.h"
#include "starforge/capsule/inspect.h"
#include "starforge/jobspec/parse.h"

namespace starforge::api {
namespace {

using nlohmann::json;
using support::Captured;
using ::testing::AllOf;
using testing::Forge;
using ::testing::HasSubstr;
using testing::MakeZip;
using ::testing::Not;
using testing::ParseSse;
using testing::ServeProcess;
using testing::SseEvent;
using testing::TempDir;
namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::regex kTokenLine("admin token \\(shown once, store it now\\): (sf_[a-z0-9]{40})\n");

std::string Spec(const std::string& name, const std::string& entrypoint = "[python3, main.py]",
                 const std::string& extra = "") {
  return "name: " + name + "\nimage: python:3.11-slim\nentrypoint: " + entrypoint +
         "\npools: [{name: main, cpusPerMachine: 1}]\n" + extra;
}

// Prints "step 1".."step N", a little apart, and ends with a line that has no newline.
const char* const kStepsPy =
    "import sys, time\n"
    "n = int(sys.argv[1]) if len(sys.argv) > 1 else 5\n"
    "for i in range(1, n + 1):\n"
    "    print(f'step {i}', flush=True)\n"
    "    time.sleep(0.15)\n"
    "print('done', end='', flush=True)\n";

json Body(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, /*allow_exceptions=*/false);
}

// Sends `bytes` on a fresh connection and returns what the server answers within a second of
// quiet. (No half-close: httplib takes a half-closed connection for a closed one.)
std::string SendRaw(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t w = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (w <= 0) break;
      sent += static_cast<size_t>(w);
    }
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0)
      reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

class Api : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  void Start(std::map<std::string, std::string> env = {}, std::vector<std::string> args = {}) {
    std::vector<std::string> all = {"--resync-ms", "100", "--cancel-grace-s", "2"};
    all.insert(all.end(), args.begin(), args.end());
    std::string error;
    serve_ = ServeProcess::Start(root_, env, all, &error);
    ASSERT_TRUE(serve_) << error;
    std::smatch m;
    const std::string out = serve_->Stdout();
    if (std::regex_search(out, m, kTokenLine)) admin_ = m[1];
    http_ = serve_->Client();
  }

  static httplib::Headers Auth(const std::string& token) {
    return {{"Authorization", "Bearer " + token}};
  }
  httplib::Result Get(const std::string& path, const std::string& token) {
    return http_->Get(path.c_str(), Auth(token));
  }
  httplib::Result Post(const std::string& path, const std::string& token) {
    return http_->Post(path.c_str(), Auth(token), "", "text/plain");
  }

  std::string Zip(const std::map<std::string, std::string>& files) {
    json entries = json::array();
    for (const auto& [name, data] : files)
      entries.push_back({{"name", name}, {"data", data}});
    return MakeZip(tmp_, entries);
  }

  httplib::Result Submit(const std::string& token, const std::string& spec,
                         const std::optional<std::string>& zip) {
    httplib::MultipartFormDataItems items = {{"spec", spec, "", ""}};
    if (zip) items.push_back({"code", *zip, "code.zip", "application/zip"});
    return http_->Post("/api/v1/jobs", Auth(token), items);
  }

  // Submits a job that runs main.py (kStepsPy unless given) and returns its id.
  std::string SubmitSteps(const std::string& token, const std::string& name,
                          const std::string& entrypoint = "[python3, main.py, '5']") {
    auto r = Submit(token, Spec(name, entrypoint), Zip({{"main.py", kStepsPy}}));
    EXPECT_TRUE(r);
    if (!r) return "";
    EXPECT_EQ(r->status, 201) << r->body;
    return Body(r).value("id", "");
  }

  // Polls the job until `done(job)` or the timeout; the last job JSON seen.
  json WaitFor(const std::string& token, const std::string& id,
               const std::function<bool(const json&)>& done, seconds timeout = seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    json job;
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = Get("/api/v1/jobs/" + id, token);
      if (r && r->status == 200) {
        job = Body(r);
        if (done(job)) return job;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << "job " << id << " did not get there in time; last seen: " << job.dump();
    return job;
  }
  json WaitForPhase(const std::string& token, const std::string& id, const std::string& phase,
                    seconds timeout = seconds(60)) {
    return WaitFor(
        token, id, [&](const json& j) { return j.value("phase", "") == phase; }, timeout);
  }
  json WaitForEnd(const std::string& token, const std::string& id) {
    return WaitFor(token, id, [](const json& j) {
      const std::string p = j.value("phase", "");
      return (p == "Succeeded" || p == "Failed" || p == "Cancelled") &&
             j["cleanup"].value("released", false);
    });
  }

  std::string NewToken(const std::string& user, bool admin = false) {
    Captured r = Forge("token create --user " + user + (admin ? " --admin" : ""),
                       {{"FORGE_STORAGE_ROOT", root_.string()}});
    EXPECT_EQ(r.code, 0) << r.err;
    std::string token = r.out;
    if (!token.empty() && token.back() == '\n') token.pop_back();
    return token;
  }

  // Expects an error response: status, kind, and the message/field to contain what is given.
  void ExpectError(const httplib::Result& r, int status, const std::string& kind,
                   const std::string& message_part = "", const std::string& field = "") {
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("application/json"));
    json b = Body(r);
    EXPECT_EQ(b.value("error", ""), kind) << r->body;
    EXPECT_THAT(b.value("message", ""), HasSubstr(message_part)) << r->body;
    if (!field.empty()) {
      EXPECT_EQ(b.value("field", ""), field) << r->body;
    }
  }

  // Builds what the test wrote under tmp_/code into tmp_/cap.zip for Spec(name), as forge submit
  // does before it uploads; *bytes gets the capsule.
  capsule::BuildResult BuildClientCapsule(const std::string& name, std::string* bytes) {
    const jobspec::ParseResult parsed = jobspec::Parse(Spec(name), jobspec::Defaults{});
    capsule::BuildResult built;
    if (!parsed.ok()) {
      built.errors.push_back("Spec(\"" + name + "\") does not parse");
      return built;
    }
    capsule::BuildOptions opts;
    opts.output = tmp_ / "cap.zip";
    built = capsule::Build(capsule::Collect(tmp_ / "code").files, *parsed.spec, opts);
    if (built.ok()) *bytes = support::ReadFile(opts.output);
    return built;
  }

  void ExpectHealthyAndNoJobs() {
    auto h = http_->Get("/healthz");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    auto l = Get("/api/v1/jobs", admin_);
    ASSERT_TRUE(l);
    EXPECT_EQ(Body(l)["items"], json::array());
    // Nothing left behind by refused uploads.
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(state_ / "uploads"))
      left.push_back(e.path().filename().string());
    EXPECT_EQ(left, std::vector<std::string>{});
  }

  TempDir tmp_;
  fs::path root_ = tmp_ / "root";
  fs::path state_ = tmp_ / "root-state";  // FORGE_STATE_DIR's default: beside the root
  std::unique_ptr<ServeProcess> serve_;
  std::unique_ptr<httplib::Client> http_;
  std::string admin_;
};

TEST_F(Api, PublicRoutesNeedNoToken) {
  auto r = http_->Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok\n");
  r = http_->Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = http_->Get("/api/v1/openapi.json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, OpenApiDocument());
  r = http_->Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("version=0.0.4"));
  EXPECT_THAT(r->body, HasSubstr("starforge_jobs{phase=\"Queued\"} 0\n"));
}

TEST_F(Api, TokensAreCheckedAndNeverLogged) {
  ASSERT_THAT(admin_, ::testing::MatchesRegex("sf_[a-z0-9]{40}"));
  auto r = http_->Get("/api/v1/whoami");
  ExpectError(r, 401, "Unauthorized", "missing bearer token");
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
  r = Get("/api/v1/whoami", "sf_" + std::string(40, 'x'));
  ExpectError(r, 401, "Unauthorized", "not valid");
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
  r = http_->Get("/api/v1/jobs", {{"Authorization", "Basic " + admin_}});
  ExpectError(r, 401, "Unauthorized", "Bearer <token>");
  // A submission without a token is refused before its body is looked at.
  r = Submit("", Spec("x"), Zip({{"main.py", "print(1)"}}));
  ExpectError(r, 401, "Unauthorized");
  r = Get("/api/v1/jobs/j-0000000000", "nope");
  ExpectError(r, 401, "Unauthorized");

  r = Get("/api/v1/whoami", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(r), json({{"user", "admin"}, {"admin", true}}));
  // The scheme is case-insensitive (RFC 7235).
  r = http_->Get("/api/v1/whoami", {{"Authorization", "bearer " + admin_}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);

  EXPECT_EQ(serve_->Stop(), 0);
  const std::string log = serve_->Stderr();
  EXPECT_THAT(log, HasSubstr("GET /api/v1/whoami 401"));
  EXPECT_THAT(log, Not(HasSubstr(admin_)));
  EXPECT_THAT(log, Not(HasSubstr("sf_")));
}

TEST_F(Api, TheAdminTokenIsPrintedOnceOnTheFirstStartOnly) {
  ASSERT_FALSE(admin_.empty());
  const std::string first = serve_->Stdout();
  EXPECT_THAT(
      first, ::testing::MatchesRegex("admin token \\(shown once, store it now\\): sf_[a-z0-9]{40}\n"
                                     "forge serve: listening on http://127\\.0\\.0\\.1:[0-9]+\n"));
  ASSERT_EQ(serve_->Stop(), 0);
  EXPECT_THAT(serve_->Stderr(), Not(HasSubstr(admin_)));
  // The token is stored only as a hash.
  for (const char* f : {"starforge.db", "starforge.db-wal"})
    EXPECT_THAT(support::ReadFile(state_ / f), Not(HasSubstr(admin_))) << f;

  Start();
  EXPECT_THAT(serve_->Stdout(),
              ::testing::MatchesRegex("forge serve: listening on http://127\\.0\\.0\\.1:[0-9]+\n"));
  auto r = Get("/api/v1/whoami", admin_);  // the first token still works
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  ASSERT_EQ(serve_->Stop(SIGINT), 0);  // Ctrl-C stops it as gracefully as SIGTERM
  EXPECT_THAT(serve_->Stderr(), Not(HasSubstr("sf_")));
}

TEST_F(Api, TokenCreateMakesUsersAndPrintsOnlyTheToken) {
  Captured r = Forge("token create --user bob --description 'laptop'",
                     {{"FORGE_STORAGE_ROOT", root_.string()}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::MatchesRegex("sf_[a-z0-9]{40}\n"));
  EXPECT_EQ(r.err, "");
  const std::string bob = r.out.substr(0, r.out.size() - 1);
  auto w = Get("/api/v1/whoami", bob);
  ASSERT_TRUE(w);
  EXPECT_EQ(Body(w), json({{"user", "bob"}, {"admin", false}}));

  const std::string carol = NewToken("carol", /*admin=*/true);
  w = Get("/api/v1/whoami", carol);
  ASSERT_TRUE(w);
  EXPECT_EQ(Body(w), json({{"user", "carol"}, {"admin", true}}));
  EXPECT_NE(NewToken("bob"), bob);  // another token for the same user

  r = Forge("token create --user 'Bad Name'", {{"FORGE_STORAGE_ROOT", root_.string()}});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--user: expected a user name"));
  EXPECT_EQ(r.out, "");
  r = Forge("token create", {{"FORGE_STORAGE_ROOT", root_.string()}});
  EXPECT_EQ(r.code, 2);
}

TEST_F(Api, TokensCanBeListedRevokedAndExpireAndAdminRightsTakenAway) {
  const std::map<std::string, std::string> env = {{"FORGE_STORAGE_ROOT", root_.string()}};
  const std::string bob = NewToken("bob", /*admin=*/true);
  auto whoami = [&](const std::string& token) { return Get("/api/v1/whoami", token); };
  ASSERT_EQ(whoami(bob)->status, 200);
  EXPECT_EQ(Body(whoami(bob))["admin"], true);

  // Admin rights can be taken away; the token stays.
  Captured r = Forge("token create --user bob --no-admin", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Body(whoami(bob))["admin"], false);
  ExpectError(Get("/api/v1/tokens", bob), 403, "Forbidden");

  // Listed without the token itself; revoked from the CLI, refused at the next request.
  r = Forge("token list --user bob", env);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr(bob)));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("(tok-[0-9a-f]{12}) +bob +active"))) << r.out;
  const std::string first_id = m[1];
  r = Forge("token revoke " + first_id, env);
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectError(whoami(bob), 401, "Unauthorized");
  r = Forge("token list --user bob", env);
  EXPECT_THAT(r.out, HasSubstr(first_id));
  EXPECT_THAT(r.out, HasSubstr("revoked"));

  // The admin API: create (with an expiry), list, revoke.
  auto created = http_->Post("/api/v1/tokens", Auth(admin_),
                             R"({"user": "bob", "description": "ci", "expiresInSeconds": 1})",
                             "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  const json made = Body(created);
  const std::string expiring = made["token"];
  EXPECT_EQ(made["user"], "bob");
  EXPECT_TRUE(made["expiresAt"].is_string());
  // Expiry is enforced: refused once its second has passed.
  bool refused = false;
  for (int i = 0; i < 100 && !refused; ++i) {
    refused = whoami(expiring)->status == 401;
    if (!refused) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(refused) << "the expired token is still accepted";

  created = http_->Post("/api/v1/tokens", Auth(admin_), R"({"user": "carol"})", "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  const std::string carol = Body(created)["token"];
  const std::string carol_id = Body(created)["id"];
  EXPECT_EQ(whoami(carol)->status, 200);
  auto list = Get("/api/v1/tokens?user=carol", admin_);
  ASSERT_TRUE(list);
  EXPECT_EQ(list->status, 200);
  EXPECT_THAT(list->body, Not(HasSubstr(carol)));
  EXPECT_THAT(list->body, HasSubstr(carol_id));
  auto revoked = Post("/api/v1/tokens/" + carol_id + "/revoke", admin_);
  ASSERT_TRUE(revoked);
  EXPECT_EQ(revoked->status, 200) << revoked->body;
  EXPECT_EQ(Body(revoked)["active"], false);
  ExpectError(whoami(carol), 401, "Unauthorized");
  ExpectError(Post("/api/v1/tokens/tok-000000000000/revoke", admin_), 404, "NotFound");
}

TEST_F(Api, UsersSeeOnlyTheirOwnJobsAndTheAdminSeesAll) {
  const std::string bob = NewToken("bob");
  const std::string eve = NewToken("eve");
  const std::string admins = SubmitSteps(admin_, "admins-job", "[python3, main.py, '1']");
  const std::string bobs = SubmitSteps(bob, "bobs-job", "[python3, main.py, '1']");
  ASSERT_FALSE(admins.empty());
  ASSERT_FALSE(bobs.empty());

  // Another user's job is exactly as missing as a job that does not exist.
  for (const std::string& path :
       {"/api/v1/jobs/" + bobs, "/api/v1/jobs/" + bobs + "/events",
        "/api/v1/jobs/" + bobs + "/logs", "/api/v1/jobs/" + bobs + "/logs?follow=1"}) {
    ExpectError(Get(path, eve), 404, "NotFound", "job " + bobs + " not found");
  }
  ExpectError(Get("/api/v1/jobs/j-doesnotexi", eve), 404, "NotFound", "job j-doesnotexi not found");
  ExpectError(Post("/api/v1/jobs/" + bobs + "/cancel", eve), 404, "NotFound");
  ExpectError(Get("/api/v1/jobs/" + admins, bob), 404, "NotFound");

  auto ids = [&](const std::string& query, const std::string& token) {
    auto r = Get("/api/v1/jobs" + query, token);
    std::vector<std::string> out;
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
    const json list = Body(r);
    if (r) {
      for (const auto& j : list["items"])
        out.push_back(j["id"]);
    }
    return out;
  };
  EXPECT_EQ(ids("", bob), std::vector<std::string>{bobs});
  EXPECT_EQ(ids("", eve), std::vector<std::string>{});
  EXPECT_EQ(ids("?owner=admin", bob), std::vector<std::string>{bobs});   // admin-only filter
  EXPECT_EQ(ids("", admin_), (std::vector<std::string>{bobs, admins}));  // newest first
  EXPECT_EQ(ids("?owner=bob", admin_), std::vector<std::string>{bobs});
  EXPECT_EQ(ids("?owner=eve", admin_), std::vector<std::string>{});

  auto r = Get("/api/v1/jobs/" + bobs, admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["owner"], "bob");
  WaitForEnd(admin_, admins);
  WaitForEnd(bob, bobs);
}

// Capacity shows a non-admin other users' jobs as counts, never their ids.
TEST_F(Api, CapacityShowsOtherUsersJobsAsCountsOnly) {
  const std::string bob = NewToken("bob");
  const std::string id = SubmitSteps(admin_, "admins-long", "[python3, main.py, '2000']");
  WaitForPhase(admin_, id, "Running");
  auto local = [&](const std::string& token) {
    auto r = Get("/api/v1/capacity", token);
    EXPECT_TRUE(r && r->status == 200);
    const json body = Body(r);
    for (const json& f : body["fleets"])
      if (f.value("fleet", "") == "local") return f;
    return json();
  };
  const json seen_by_bob = local(bob);
  EXPECT_EQ(seen_by_bob["running"], 1);
  EXPECT_EQ(seen_by_bob["jobs"], json::array());
  EXPECT_THAT(seen_by_bob.dump(), Not(HasSubstr(id)));
  EXPECT_THAT(local(admin_)["jobs"].dump(), HasSubstr(id));
  ASSERT_TRUE(Post("/api/v1/jobs/" + id + "/cancel", admin_));
  WaitForEnd(admin_, id);
}

TEST_F(Api, MalformedAndInvalidSubmissionsAreClear4xxAndLeaveNothing) {
  const std::string zip = Zip({{"main.py", "print(1)\n"}});
  auto r = Submit(admin_, "name: x\npools: [\n", zip);
  ExpectError(r, 400, "BadRequest", "not valid YAML or JSON", "spec");
  EXPECT_THAT(Body(r).value("message", ""), HasSubstr("line"));
  ExpectError(Submit(admin_, "{\"name\": \"x\",", zip), 400, "BadRequest", "not valid YAML",
              "spec");

  r = Submit(admin_, Spec("typo", "[python3, main.py]", "gpuz: 1\n"), zip);
  ExpectError(r, 422, "Invalid", "gpuz", "gpuz");
  r = Submit(admin_,
             "name: Bad_Name\nimage: python:3\nentrypoint: [python3]\n"
             "pools: [{name: main, machines: 0, gpusPerMachine: -1}]\n",
             zip);
  ExpectError(r, 422, "Invalid", "invalid JobSpec");
  std::set<std::string> fields;
  const json invalid = Body(r);
  for (const auto& e : invalid["errors"])
    fields.insert(e["field"].get<std::string>());
  EXPECT_EQ(fields, (std::set<std::string>{"name", "pools[0].machines", "pools[0].gpusPerMachine"}))
      << r->body;

  // The spec part is required; so is a multipart body; and the code.
  httplib::MultipartFormDataItems only_code = {{"code", zip, "code.zip", "application/zip"}};
  ExpectError(http_->Post("/api/v1/jobs", Auth(admin_), only_code), 400, "BadRequest",
              "missing the \"spec\" part", "spec");
  ExpectError(http_->Post("/api/v1/jobs", Auth(admin_), "{\"name\": \"x\"}", "application/json"),
              400, "BadRequest", "multipart/form-data");
  ExpectError(Submit(admin_, Spec("nocode"), std::nullopt), 422, "Invalid",
              "no code: pass --code DIR or set code: in the JobSpec", "code");
  httplib::MultipartFormDataItems extra = {{"spec", Spec("x"), "", ""},
                                           {"code", zip, "code.zip", "application/zip"},
                                           {"cdoe", "x", "", ""}};
  ExpectError(http_->Post("/api/v1/jobs", Auth(admin_), extra), 400, "BadRequest",
              "unexpected part \"cdoe\"");
  ExpectError(Submit(admin_, Spec("notzip"), "this is not a zip"), 422, "Invalid",
              "the code archive was refused", "code");
  ExpectHealthyAndNoJobs();
}

TEST_F(Api, HostileArchivesAreRefusedBeforeTheJobExists) {
  struct Case {
    const char* what;
    json entries;
    const char* message;
  };
  const Case cases[] = {
      {"traversal", {{{"name", "../x"}, {"data", "x"}}}, "../x: unsafe entry name"},
      {"nested traversal", {{{"name", "a/../../x"}, {"data", "x"}}}, "unsafe entry name"},
      {"absolute", {{{"name", "/etc/x"}, {"data", "x"}}}, "/etc/x: unsafe entry name"},
      {"symlink",
       {{{"name", "main.py"}, {"data", "print(1)"}},
        {{"name", "link"}, {"data", "/etc/passwd"}, {"attr", 0120777}}},
       "link: symlinks are not accepted"},
      {"empty", json::array(), "holds no files"},
      {"reserved", {{{"name", ".starforge/manifest.json"}, {"data", "{}"}}}, ".starforge/"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    ExpectError(Submit(admin_, Spec("hostile"), MakeZip(tmp_, c.entries)), 422, "Invalid",
                c.message, "code");
  }
  EXPECT_FALSE(fs::exists(state_ / "x"));
  EXPECT_FALSE(fs::exists(root_ / "x"));
  ExpectHealthyAndNoJobs();
}

// resumeFrom (docs/security.md, "Resuming from an earlier job"): a job reads its owner's earlier
// job's checkpoint, read-only; naming another user's job is refused at submit exactly like naming
// one that does not exist, admins included.
TEST_F(Api, AJobResumesOnlyFromItsOwnersEarlierJobs) {
  const std::string bob = NewToken("bob");
  const std::string eve = NewToken("eve");
  const char* write_py =
      "import os\n"
      "open(os.path.join(os.environ['FORGE_JOB_DIR'], 'ckpt.txt'), 'w').write('step 7')\n";
  auto r = Submit(bob, Spec("first"), Zip({{"main.py", write_py}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string first = Body(r)["id"];
  ASSERT_EQ(WaitForEnd(bob, first)["phase"], "Succeeded");

  const char* read_py =
      "import os\n"
      "d = os.environ['FORGE_RESUME_DIRS']\n"
      "print('read', open(os.path.join(d, 'ckpt.txt')).read(), flush=True)\n"
      "try:\n"
      "    open(os.path.join(d, 'ckpt.txt'), 'w').write('overwritten')\n"
      "    print('wrote it')\n"
      "except OSError as e:\n"
      "    print('cannot write', type(e).__name__)\n";
  const std::string resume = "resumeFrom: [" + first + "]\n";
  r = Submit(bob, Spec("second", "[python3, main.py]", resume), Zip({{"main.py", read_py}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string second = Body(r)["id"];
  EXPECT_EQ(Body(r)["spec"]["resumeFrom"], json::array({first}));
  ASSERT_EQ(WaitForEnd(bob, second)["phase"], "Succeeded");
  auto log = Get("/api/v1/jobs/" + second + "/logs", bob);
  ASSERT_TRUE(log);
  EXPECT_THAT(log->body, HasSubstr("read step 7"));
  EXPECT_THAT(log->body, HasSubstr("cannot write OSError"));
  EXPECT_EQ(support::ReadFile(root_ / "jobs" / first / "ckpt.txt"), "step 7");

  // Another user's job, an admin naming a user's job, and an unknown id: the same refusal.
  for (const std::string& token : {eve, admin_}) {
    ExpectError(
        Submit(token, Spec("steal", "[python3, main.py]", resume), Zip({{"main.py", read_py}})),
        422, "Invalid", "no job " + first + " of yours", "resumeFrom[0]");
  }
  ExpectError(Submit(bob, Spec("ghost", "[python3, main.py]", "resumeFrom: [j-doesnotexi]\n"),
                     Zip({{"main.py", read_py}})),
              422, "Invalid", "no job j-doesnotexi of yours", "resumeFrom[0]");
}

TEST_F(Api, ImpossibleJobsAreRejectedWithoutAJob) {
  const std::string zip = Zip({{"main.py", "print(1)\n"}});
  auto r = Submit(admin_,
                  "name: big\nimage: python:3\nentrypoint: [python3, main.py]\n"
                  "pools: [{name: main, machines: 2}]\n",
                  zip);
  ExpectError(r, 422, "Rejected");
  EXPECT_THAT(Body(r).value("message", ""), HasSubstr("kuberay"));
  r = Submit(admin_,
             "name: gpus\nimage: python:3\nentrypoint: [python3, main.py]\n"
             "pools: [{name: main, gpuSeries: h200, gpusPerMachine: 8}]\n",
             zip);
  ExpectError(r, 422, "Rejected");
  r = Submit(admin_, Spec("k", "[python3, main.py]", "fleet: kuberay\n"), zip);
  // Without a cluster and S3 the server says what to configure.
  ExpectError(r, 422, "Rejected", "the kuberay fleet is not configured on this server", "fleet");
  EXPECT_THAT(Body(r).value("message", ""),
              AllOf(HasSubstr("FORGE_K8S_API_SERVER"), HasSubstr("FORGE_S3_ENDPOINT")));
  ExpectHealthyAndNoJobs();
}

// Streams /logs?follow=1 on a thread, collecting its events.
class Follow {
 public:
  Follow(int port, const std::string& path, const httplib::Headers& headers) {
    thread_ = std::thread([this, port, path, headers] {
      httplib::Client c("127.0.0.1", port);
      {
        std::lock_guard lock(mu_);
        client_ = &c;
      }
      c.set_read_timeout(60, 0);
      std::string buf;
      auto r = c.Get(path.c_str(), headers, [&](const char* data, size_t n) {
        std::lock_guard lock(mu_);
        buf.append(data, n);
        int comments = 0;
        for (auto& e : ParseSse(&buf, &comments))
          events_.push_back(e);
        comments_ += comments;
        return !stop_;
      });
      std::lock_guard lock(mu_);
      client_ = nullptr;
      if (r) {
        status_ = r->status;
        content_type_ = r->get_header_value("Content-Type");
      }
      finished_ = true;
    });
  }
  ~Follow() {
    Disconnect();  // a quiet stream would otherwise hold the thread until its next keep-alive
    if (thread_.joinable()) thread_.join();
  }
  bool WaitFinished(seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        if (finished_) return true;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }
  std::vector<SseEvent> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  int comments() {
    std::lock_guard lock(mu_);
    return comments_;
  }
  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  std::string content_type() {
    std::lock_guard lock(mu_);
    return content_type_;
  }
  // Closes the connection now, even while waiting for data.
  void Disconnect() {
    stop_ = true;
    std::lock_guard lock(mu_);
    if (client_) client_->stop();
  }

 private:
  std::mutex mu_;
  std::vector<SseEvent> events_;
  int comments_ = 0;
  int status_ = 0;
  std::string content_type_;
  bool finished_ = false;
  std::atomic<bool> stop_{false};
  httplib::Client* client_ = nullptr;
  std::thread thread_;
};

std::string LogLines(const std::vector<SseEvent>& events) {
  std::string s;
  for (const auto& e : events)
    if (e.event == "log") s += e.data + "\n";
  return s;
}

TEST_F(Api, AJobRunsToSucceededWithItsLogsTimelineEventsAndMetrics) {
  auto r = Submit(admin_, Spec("steps", "[python3, main.py, '6']"), Zip({{"main.py", kStepsPy}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const json created = Body(r);
  const std::string id = created["id"];
  EXPECT_THAT(id, ::testing::MatchesRegex("j-[a-z0-9]{10}"));
  EXPECT_EQ(r->get_header_value("Location"), "/api/v1/jobs/" + id);
  EXPECT_EQ(created["phase"], "Queued");
  EXPECT_EQ(created["owner"], "admin");
  EXPECT_EQ(created["fleet"], "local");
  EXPECT_EQ(created["spec"]["name"], "steps");
  EXPECT_EQ(created["spec"]["entrypoint"], json({"python3", "main.py", "6"}));
  EXPECT_FALSE(created.contains("timeline"));

  // Follow from the start: the lines arrive while the job runs, then the end event.
  Follow follow(serve_->port(), "/api/v1/jobs/" + id + "/logs?follow=1", Auth(admin_));
  ASSERT_TRUE(follow.WaitFinished(seconds(60)));
  EXPECT_EQ(follow.status(), 200);
  EXPECT_EQ(follow.content_type(), "text/event-stream");
  std::vector<SseEvent> events = follow.events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(LogLines(events), "step 1\nstep 2\nstep 3\nstep 4\nstep 5\nstep 6\ndone\n");
  EXPECT_GT(events.size(), 2u) << "the lines came in one piece: they were not streamed";
  const SseEvent& end = events.back();
  EXPECT_EQ(end.event, "end");
  json end_data = json::parse(end.data);
  EXPECT_EQ(end_data["phase"], "Succeeded");
  EXPECT_EQ(end_data["exitCode"], 0);
  EXPECT_EQ(events[events.size() - 2].id, "46");  // the offset after "done"

  json job = WaitForEnd(admin_, id);
  EXPECT_EQ(job["phase"], "Succeeded");
  EXPECT_EQ(job["exitCode"], 0);
  EXPECT_TRUE(job["capsule"].is_object());
  EXPECT_THAT(job["capsule"].value("key", ""), ::testing::StartsWith("capsules/sha256-"));
  EXPECT_TRUE(job["startedAt"].is_string());
  EXPECT_TRUE(job["finishedAt"].is_string());
  const json& timeline = job["timeline"];
  ASSERT_GE(timeline.size(), 3u) << job.dump();
  EXPECT_EQ(timeline[0]["from"], nullptr);
  EXPECT_EQ(timeline[0]["to"], "Queued");
  EXPECT_EQ(timeline.back()["to"], "Succeeded");
  for (size_t i = 1; i < timeline.size(); ++i)
    EXPECT_EQ(timeline[i]["from"], timeline[i - 1]["to"]) << job.dump();
  // What the job's processes used, as the runner recorded it when the entrypoint ended: a
  // Python process's CPU time and resident set. No pods on the local fleet.
  ASSERT_TRUE(job["resources"]["usage"].is_object()) << job.dump();
  EXPECT_GT(job["resources"]["usage"]["cpuSeconds"].get<double>(), 0.0);
  EXPECT_LT(job["resources"]["usage"]["cpuSeconds"].get<double>(), 60.0);
  EXPECT_GT(job["resources"]["usage"]["maxRssBytes"].get<int64_t>(), 1 << 20);
  EXPECT_LT(job["resources"]["usage"]["maxRssBytes"].get<int64_t>(), int64_t{4} << 30);
  EXPECT_FALSE(job["resources"].contains("pods"));
  // The job writes its directory: a status.json it made up with nonsense, or a FIFO in its
  // place, is no usage (and no stalled answer).
  const fs::path status = root_ / "jobs" / id / "status.json";
  support::WriteFile(status, R"({"usage": {"cpuSeconds": -1, "maxRssBytes": 5}})");
  EXPECT_EQ(Body(Get("/api/v1/jobs/" + id, admin_))["resources"]["usage"], nullptr);
  support::WriteFile(status, R"({"usage": {"cpuSeconds": "1", "maxRssBytes": 5}})");
  EXPECT_EQ(Body(Get("/api/v1/jobs/" + id, admin_))["resources"]["usage"], nullptr);
  fs::remove(status);
  ASSERT_EQ(::mkfifo(status.c_str(), 0600), 0);
  EXPECT_EQ(Body(Get("/api/v1/jobs/" + id, admin_))["resources"]["usage"], nullptr);
  fs::remove(status);
  support::WriteFile(status, R"({"usage": {"cpuSeconds": 1.23456, "maxRssBytes": 5e3}})");
  EXPECT_EQ(Body(Get("/api/v1/jobs/" + id, admin_))["resources"]["usage"],
            json::parse(R"({"cpuSeconds": 1.235, "maxRssBytes": 5000})"));

  // Plain and tail.
  auto logs = Get("/api/v1/jobs/" + id + "/logs", admin_);
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->status, 200);
  EXPECT_EQ(logs->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(logs->body, "step 1\nstep 2\nstep 3\nstep 4\nstep 5\nstep 6\ndone");
  logs = Get("/api/v1/jobs/" + id + "/logs?tail=2", admin_);
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->body, "step 6\ndone");
  logs = Get("/api/v1/jobs/" + id + "/logs?tail=0", admin_);
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->body, "");
  ExpectError(Get("/api/v1/jobs/" + id + "/logs?tail=-1", admin_), 400, "BadRequest", "tail",
              "tail");

  // A follow of an ended job sends what is there and ends at once; Last-Event-ID and offset
  // resume after what a client already has.
  Follow again(serve_->port(), "/api/v1/jobs/" + id + "/logs?follow=1&tail=1", Auth(admin_));
  ASSERT_TRUE(again.WaitFinished(seconds(10)));
  EXPECT_EQ(LogLines(again.events()), "done\n");
  httplib::Headers resume = Auth(admin_);
  resume.emplace("Last-Event-ID", "28");  // after "step 4\n"
  Follow resumed(serve_->port(), "/api/v1/jobs/" + id + "/logs?follow=1", resume);
  ASSERT_TRUE(resumed.WaitFinished(seconds(10)));
  EXPECT_EQ(LogLines(resumed.events()), "step 5\nstep 6\ndone\n");
  EXPECT_EQ(resumed.events().back().event, "end");
  Follow offset(serve_->port(), "/api/v1/jobs/" + id + "/logs?follow=1&offset=35", Auth(admin_));
  ASSERT_TRUE(offset.WaitFinished(seconds(10)));
  EXPECT_EQ(LogLines(offset.events()), "step 6\ndone\n");
  ExpectError(Get("/api/v1/jobs/" + id + "/logs?follow=1&offset=x", admin_), 400, "BadRequest",
              "offset");

  auto ev = Get("/api/v1/jobs/" + id + "/events", admin_);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->status, 200);
  ASSERT_TRUE(Body(ev)["items"].is_array());
  const json events_json = Body(ev);
  for (const auto& e : events_json["items"]) {
    EXPECT_THAT(e.value("type", ""), ::testing::AnyOf("Normal", "Warning"));
    EXPECT_TRUE(e["count"].is_number_integer());
    EXPECT_TRUE(e["firstAt"].is_string());
  }

  auto cap = Get("/api/v1/capacity", admin_);
  ASSERT_TRUE(cap);
  EXPECT_EQ(cap->status, 200);
  // local, and kuberay marked unavailable (no cluster or S3 here).
  ASSERT_EQ(Body(cap)["fleets"].size(), 2u) << cap->body;
  EXPECT_EQ(Body(cap)["fleets"][0]["fleet"], "kuberay");
  EXPECT_EQ(Body(cap)["fleets"][0]["available"], false);
  EXPECT_EQ(Body(cap)["fleets"][1]["fleet"], "local");

  auto metrics = http_->Get("/metrics");
  ASSERT_TRUE(metrics);
  std::map<std::string, double> v;
  std::istringstream in(metrics->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    v[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  EXPECT_EQ(v["starforge_jobs{phase=\"Succeeded\"}"], 1);
  EXPECT_EQ(v["starforge_jobs{phase=\"Running\"}"], 0);
  EXPECT_GE(v["starforge_transitions_total"], static_cast<double>(timeline.size()));
  EXPECT_GT(v["starforge_reconciles_total"], 0);
  EXPECT_EQ(v["starforge_reconcile_duration_seconds_count"], v["starforge_reconciles_total"]);
  EXPECT_EQ(v["starforge_reconcile_duration_seconds_bucket{le=\"+Inf\"}"],
            v["starforge_reconcile_duration_seconds_count"]);
  EXPECT_TRUE(v.contains("starforge_fleet_errors_total"));
  EXPECT_TRUE(v.contains("starforge_reconcile_errors_total"));
}

TEST_F(Api, CancelStopsARunningJobAndRepeatsAreHarmless) {
  const std::string id = SubmitSteps(admin_, "long", "[python3, main.py, '400']");
  ASSERT_FALSE(id.empty());
  WaitForPhase(admin_, id, "Running");
  auto r = Post("/api/v1/jobs/" + id + "/cancel", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202) << r->body;
  EXPECT_EQ(Body(r)["cancelRequested"], true);
  json job = WaitForEnd(admin_, id);
  EXPECT_EQ(job["phase"], "Cancelled");
  r = Post("/api/v1/jobs/" + id + "/cancel", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(Body(r)["phase"], "Cancelled");
  auto ev = Get("/api/v1/jobs/" + id + "/events", admin_);
  ASSERT_TRUE(ev);
  EXPECT_THAT(ev->body, HasSubstr("cancel requested by admin"));
}

// One TFRecord of an Event with a scalar, as TensorBoard's writers frame it.
std::string ScalarRecord(int64_t step, const std::string& tag, float value) {
  tfevents::Event e;
  e.set_step(step);
  auto* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  const std::string data = e.SerializeAsString();
  const auto le = [](uint64_t x, int n) {
    std::string out;
    for (int i = 0; i < n; ++i)
      out += static_cast<char>((x >> (8 * i)) & 0xFF);
    return out;
  };
  const std::string len = le(data.size(), 8);
  return len + le(MaskedCrc32c(len), 4) + data + le(MaskedCrc32c(data), 4);
}

TEST_F(Api, MetricsServeTheScalarsOfTensorBoardEventFilesByCursor) {
  const std::string id = SubmitSteps(admin_, "tb");
  WaitForEnd(admin_, id);
  const fs::path dir = root_ / "jobs" / id;
  support::WriteFile(dir / "metrics.jsonl", "{\"step\": 0, \"loss\": 1.5}\n");
  const std::string records = ScalarRecord(0, "loss", 1.0F) + ScalarRecord(7, "eval/acc", 0.25F);
  support::WriteFile(dir / "runs" / "events.out.tfevents.1.host", records);
  auto r = Get("/api/v1/jobs/" + id + "/metrics", admin_);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json a = Body(r);
  ASSERT_EQ(a["series"].size(), 2u) << a.dump();
  EXPECT_EQ(a["series"][0], json::parse(R"({"name": "loss", "points": [[0, 1.5], [0, 1.0]]})"));
  EXPECT_EQ(a["series"][1], json::parse(R"({"name": "eval/acc", "points": [[7, 0.25]]})"));
  const json file = {{"path", "runs/events.out.tfevents.1.host"},
                     {"offset", records.size()},
                     {"size", records.size()}};
  EXPECT_EQ(a["eventFiles"], json::array({file})) << a.dump();
  EXPECT_TRUE(a["complete"]);
  // From the answer's cursor, only what came since.
  support::WriteFile(dir / "runs" / "events.out.tfevents.1.host",
                     records + ScalarRecord(8, "eval/acc", 0.5F));
  r = Get("/api/v1/jobs/" + id + "/metrics?cursor=" + a["cursor"].get<std::string>(), admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(Body(r)["series"], json::parse(R"([{"name": "eval/acc", "points": [[8, 0.5]]}])"));
  // The stream: every point, then the end (the job has ended).
  Follow f(serve_->port(), "/api/v1/jobs/" + id + "/metrics?follow=1", Auth(admin_));
  ASSERT_TRUE(f.WaitFinished(seconds(30)));
  const auto events = f.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event, "metrics");
  EXPECT_EQ(json::parse(events[0].data)["series"][1]["points"],
            json::parse("[[7, 0.25], [8, 0.5]]"));
  EXPECT_EQ(events[1].event, "end");
  ExpectError(Get("/api/v1/jobs/" + id + "/metrics?cursor=12,runs", admin_), 400, "BadRequest",
              "cursor: not a cursor this server returned", "cursor");
}

TEST_F(Api, ListingFiltersAndPages) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(SubmitSteps(admin_, "page-" + std::to_string(i), "[python3, main.py, '0']"));
  auto r = Get("/api/v1/jobs?limit=2", admin_);
  ASSERT_TRUE(r);
  json page = Body(r);
  ASSERT_EQ(page["items"].size(), 2u);
  EXPECT_EQ(page["items"][0]["id"], ids[2]);
  EXPECT_EQ(page["items"][1]["id"], ids[1]);
  EXPECT_FALSE(page["items"][0].contains("spec"));
  EXPECT_FALSE(page["items"][0].contains("timeline"));
  ASSERT_TRUE(page["nextCursor"].is_string());
  r = Get("/api/v1/jobs?limit=2&cursor=" + page["nextCursor"].get<std::string>(), admin_);
  ASSERT_TRUE(r);
  page = Body(r);
  ASSERT_EQ(page["items"].size(), 1u);
  EXPECT_EQ(page["items"][0]["id"], ids[0]);
  EXPECT_EQ(page["nextCursor"], nullptr);

  r = Get("/api/v1/jobs?name=page-1", admin_);
  ASSERT_TRUE(r);
  ASSERT_EQ(Body(r)["items"].size(), 1u);
  EXPECT_EQ(Body(r)["items"][0]["id"], ids[1]);
  // A part of the name, in any case: the index from 3 characters, a scan below.
  const auto found = [&](const std::string& query, const std::string& token) {
    std::vector<std::string> got;
    auto l = Get("/api/v1/jobs?" + query, token);
    if (!l || l->status != 200) return std::vector<std::string>{"error"};
    const json body = Body(l);
    for (const auto& j : body["items"])
      got.push_back(j["id"]);
    return got;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(found("nameContains=AGE-", admin_), (V{ids[2], ids[1], ids[0]}));
  EXPECT_EQ(found("nameContains=ge-1", admin_), V{ids[1]});
  EXPECT_EQ(found("nameContains=2", admin_), V{ids[2]});
  EXPECT_EQ(found("nameContains=page-11", admin_), V{});
  EXPECT_EQ(found("nameContains=%22%20OR%20", admin_), V{});  // not FTS5 syntax: a literal
  EXPECT_EQ(found("nameContains=page&limit=1&name=page-0", admin_), V{ids[0]});
  EXPECT_EQ(found("nameContains=page", NewToken("eve")), V{});  // others' jobs stay hidden
  ExpectError(Get("/api/v1/jobs?nameContains=" + std::string(257, 'a'), admin_), 400, "BadRequest",
              "nameContains is longer than 256", "nameContains");
  r = Get("/api/v1/jobs?fleet=kuberay", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(Body(r)["items"], json::array());
  for (const auto& id : ids)
    WaitForEnd(admin_, id);
  r = Get("/api/v1/jobs?phase=Succeeded", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(Body(r)["items"].size(), 3u);
  r = Get("/api/v1/jobs?phase=Running", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(Body(r)["items"], json::array());

  ExpectError(Get("/api/v1/jobs?phase=Done", admin_), 400, "BadRequest", "unknown phase \"Done\"",
              "phase");
  ExpectError(Get("/api/v1/jobs?limit=0", admin_), 400, "BadRequest", "1 to 500", "limit");
  ExpectError(Get("/api/v1/jobs?limit=501", admin_), 400, "BadRequest", "1 to 500", "limit");
  ExpectError(Get("/api/v1/jobs?cursor=abc", admin_), 400, "BadRequest", "cursor", "cursor");
  ExpectError(Get("/api/v1/jobs?state=Running", admin_), 400, "BadRequest",
              "unknown query parameter \"state\"", "state");
}

TEST_F(Api, UnknownRoutesAndMethodsAreJsonErrors) {
  ExpectError(Get("/api/v1/nope", admin_), 404, "NotFound", "no such route");
  ExpectError(http_->Get("/api"), 404, "NotFound");
  auto r = http_->Delete("/api/v1/jobs", Auth(admin_));
  ExpectError(r, 405, "MethodNotAllowed", "use POST or GET");
  EXPECT_EQ(r->get_header_value("Allow"), "POST, GET");
  ExpectError(http_->Put("/healthz", "x", "text/plain"), 405, "MethodNotAllowed");
  ExpectError(Get("/api/v1/jobs/j-x/cancel", admin_), 405, "MethodNotAllowed");
  // The connection is still usable after each of them.
  auto h = http_->Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

TEST_F(Api, OtherFilesOfAJobsLogsByName) {
  const std::string bob = NewToken("bob");
  const std::string id = SubmitSteps(bob, "files", "[python3, main.py, '1']");
  ASSERT_FALSE(id.empty());
  WaitForEnd(bob, id);
  // What a fleet archives next to driver.log (the kuberay fleet's ray-job.log, events.json, …).
  support::WriteFile(root_ / "jobs" / id / "logs" / "ray-job.log", "ray says hi\n");
  const std::string path = "/api/v1/jobs/" + id + "/logs?file=";
  auto r = Get(path + "ray-job.log", bob);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ray says hi\n");
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  r = Get(path + "driver.log", bob);
  EXPECT_EQ(r->body, "step 1\ndone");
  ExpectError(Get(path + "submitter.log", bob), 404, "NotFound", "has no log file submitter.log",
              "file");
  // A link a job planted in its logs directory is not followed out of it.
  fs::create_symlink(root_ / "control" / "starforge.db", root_ / "jobs" / id / "logs" / "db.log");
  ExpectError(Get(path + "db.log", bob), 404, "NotFound", "has no log file db.log", "file");
  // Only plain names: nothing outside the job's logs directory can be named.
  for (const char* bad : {"..", "../status.json", "%2e%2e%2fstatus.json", ".hidden", "a/b", ""})
    ExpectError(Get(path + bad, bob), 400, "BadRequest", "file must be a file name", "file");
  ExpectError(Get(path + "ray-job.log", NewToken("eve")), 404, "NotFound");

  // The listing: regular files only, each readable by name; the owner's, like the files.
  r = Get("/api/v1/jobs/" + id + "/artifacts", bob);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json listing = Body(r);
  EXPECT_EQ(listing["logsArchived"], true);
  std::vector<std::string> names;
  for (const auto& f : listing["items"])
    names.push_back(f["name"]);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"driver.log", "ray-job.log"}));
  EXPECT_THAT(names, Not(::testing::Contains("db.log"))) << "a symlink is not listed";
  EXPECT_EQ(listing["items"][std::find(names.begin(), names.end(), "ray-job.log") - names.begin()]
                   ["size"],
            12);
  EXPECT_FALSE(listing.contains("warning")) << "a local job's driver.log is here";
  ExpectError(Get("/api/v1/jobs/" + id + "/artifacts", NewToken("eve")), 404, "NotFound");
  // The doctor is for admins.
  ExpectError(Get("/api/v1/doctor", bob), 403, "Forbidden", "admin");
}

TEST_F(Api, AConsoleLoginCodeGivesItsTokenOnce) {
  const std::string bob = NewToken("bob");
  ExpectError(http_->Post("/api/v1/console/login-codes", "", "text/plain"), 401, "Unauthorized");
  auto r = Post("/api/v1/console/login-codes", bob);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string code = Body(r)["code"];
  EXPECT_THAT(code, ::testing::MatchesRegex("[a-z0-9]{32}"));
  const std::string body = json({{"code", code}}).dump();
  r = http_->Post("/api/v1/console/login", body, "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r)["token"], bob);
  ExpectError(http_->Post("/api/v1/console/login", body, "application/json"), 401, "Unauthorized",
              "used up or expired", "code");
  ExpectError(http_->Post("/api/v1/console/login", "{}", "application/json"), 400, "BadRequest");
  EXPECT_THAT(serve_->Stderr(), Not(HasSubstr(code)));
}

TEST_F(Api, EveryDocumentedRouteIsServed) {
  const std::string id = SubmitSteps(admin_, "routes", "[python3, main.py, '0']");
  ASSERT_FALSE(id.empty());
  // GET …/capsule answers 404 until the controller has packaged the job: wait for that first.
  WaitFor(admin_, id, [](const json& j) { return !j.value("capsule", json()).is_null(); });
  json doc = json::parse(OpenApiDocument());
  for (const auto& [path, item] : doc["paths"].items()) {
    std::string p = std::regex_replace(path, std::regex("\\{id\\}"), id);
    for (const auto& [method, op] : item.items()) {
      SCOPED_TRACE(method + " " + path);
      httplib::Result r =
          method == "get" ? Get(p, admin_) : http_->Post(p.c_str(), Auth(admin_), "", "text/plain");
      if (method == "post" && path == "/api/v1/jobs") {
        ExpectError(r, 400, "BadRequest", "multipart");  // served, and wants a multipart body
        continue;
      }
      if (method == "post" && path == "/api/v1/uploads") {
        ExpectError(r, 415, "UnsupportedMediaType", "application/yaml");  // served, wants a JobSpec
        continue;
      }
      if (path == "/api/v1/uploads/{id}") {  // served: no such upload in progress (a job id)
        ExpectError(http_->Put(p, Auth(admin_), "", "application/zip"), 404, "NotFound",
                    "no upload " + id);
        continue;
      }
      if (method == "post" && path == "/api/v1/tokens") {
        ExpectError(r, 400, "BadRequest", "\"user\"");  // served, and wants a JSON object
        continue;
      }
      if (path == "/api/v1/capsules/{sha256}") {
        ExpectError(Get("/api/v1/capsules/" + std::string(64, '0'), admin_), 404, "NotFound",
                    "send the capsule");  // served: no job of ours ran with it
        continue;
      }
      if (path == "/api/v1/tokens/{id}/revoke") {
        ExpectError(r, 404, "NotFound", "token " + id);  // served: no such token
        continue;
      }
      if (path == "/api/v1/doctor") {
        ExpectError(r, 404, "NotFound", "no kuberay fleet");  // served: nothing to check here
        continue;
      }
      if (method == "post" && path == "/api/v1/console/login") {
        ExpectError(r, 400, "BadRequest", "code");  // served, and wants a code
        continue;
      }
      if (path.starts_with("/api/v1/playgrounds/")) {  // served: no such playground (a job id)
        if (method == "delete") r = http_->Delete(p.c_str(), Auth(admin_));
        ExpectError(r, 404, "NotFound", "playground " + id);
        continue;
      }
      if (method == "post" && path == "/api/v1/playgrounds") {
        ExpectError(r, 422, "Invalid", "model");  // served, and wants a model
        continue;
      }
      ASSERT_TRUE(r);
      EXPECT_GE(r->status, 200);
      EXPECT_LT(r->status, 300) << r->body;
    }
  }
  WaitForEnd(admin_, id);
}

TEST_F(Api, GarbageOnTheWireDoesNotHurtTheServer) {
  auto send_raw = [&](const std::string& bytes) { return SendRaw(serve_->port(), bytes); };
  EXPECT_THAT(send_raw("GARBAGE\r\n\r\n"), HasSubstr("400"));
  EXPECT_THAT(
      send_raw("GET /healthz HTTP/1.1\r\nHost: x\r\n" + std::string(100000, 'A') + "\r\n\r\n"),
      ::testing::AnyOf(HasSubstr("400"), ::testing::IsEmpty()));
  // A chunked upload with a broken chunk.
  EXPECT_THAT(send_raw("POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin_ +
                       "\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n5\r\n--b\r\n\r\nzz\r\n"),
              HasSubstr("400"));
  auto h = http_->Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

// The job events of a jobs watch, by job id: the phases seen, in order.
std::map<std::string, std::vector<std::string>> WatchedPhases(const std::vector<SseEvent>& events) {
  std::map<std::string, std::vector<std::string>> phases;
  for (const auto& e : events) {
    if (e.event != "job") continue;
    const json j = json::parse(e.data);
    auto& seen = phases[j.value("id", "")];
    const std::string p = j.value("phase", "") + (j["cleanup"].value("released", false) ? "+" : "");
    if (seen.empty() || seen.back() != p) seen.push_back(p);
  }
  return phases;
}

// Waits (bounded) until `f` holds.
bool Eventually(const std::function<bool()>& f, seconds timeout = seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return f();
}

TEST_F(Api, AJobsWatchSendsEveryChangeAfterItsListToItsOwnerOnly) {
  const std::string bob = NewToken("bob");
  const std::string eve = NewToken("eve");
  auto l = Get("/api/v1/jobs", bob);
  ASSERT_TRUE(l);
  ASSERT_EQ(l->status, 200);
  const std::string rv = Body(l).value("resourceVersion", "");
  ASSERT_FALSE(rv.empty()) << l->body;
  // Submitted after the list, before the watch: a watch from the list's resourceVersion has it.
  const std::string first = SubmitSteps(bob, "first", "[python3, main.py, '1']");
  Follow bobs(serve_->port(), "/api/v1/jobs?watch=1&resourceVersion=" + rv, Auth(bob));
  Follow named(serve_->port(), "/api/v1/jobs?watch=1&name=second", Auth(admin_));
  Follow part(serve_->port(), "/api/v1/jobs?watch=1&nameContains=ECON", Auth(admin_));
  Follow eves(serve_->port(), "/api/v1/jobs?watch=1", Auth(eve));
  const std::string second = SubmitSteps(bob, "second", "[python3, main.py, '3']");
  WaitForEnd(bob, first);
  WaitForEnd(bob, second);
  const auto ended = [](const std::vector<std::string>& seen) {
    return !seen.empty() && seen.back() == "Succeeded+";
  };
  ASSERT_TRUE(Eventually([&] {
    auto phases = WatchedPhases(bobs.events());
    return ended(phases[first]) && ended(phases[second]);
  })) << ::testing::PrintToString(WatchedPhases(bobs.events()));
  EXPECT_EQ(bobs.status(), 0) << "the stream is still open";
  // The second job was watched as it ran: its phases one after another, not only its end (a
  // watch sends what changed since its last look, so a busy machine may merge some).
  const auto phases = WatchedPhases(bobs.events());
  EXPECT_GE(phases.at(second).size(), 2u) << ::testing::PrintToString(phases);
  EXPECT_THAT(phases.at(second), ::testing::Contains("Running"));
  // Each event's id is a resourceVersion after the list's, in order (jobs sent by one look at
  // the journal share one).
  const auto change = [](const std::string& v) { return std::stoll(v.substr(v.find('.') + 1)); };
  const int64_t listed = change(rv);
  int64_t last = listed;
  for (const auto& e : bobs.events()) {
    EXPECT_EQ(e.id.substr(0, e.id.find('.')), rv.substr(0, rv.find('.')));
    EXPECT_GT(change(e.id), listed);
    EXPECT_GE(change(e.id), last);
    last = change(e.id);
  }
  // The admin's watch filtered by name saw only that job; eve saw nothing of bob's.
  ASSERT_TRUE(Eventually([&] { return ended(WatchedPhases(named.events())[second]); }));
  EXPECT_EQ(WatchedPhases(named.events()).size(), 1u);
  ASSERT_TRUE(Eventually([&] { return ended(WatchedPhases(part.events())[second]); }));
  EXPECT_EQ(WatchedPhases(part.events()).size(), 1u);
  EXPECT_EQ(WatchedPhases(eves.events()).size(), 0u);

  // A watch resumed from an event's id (as EventSource sends it) gets what came after it.
  const auto events = bobs.events();
  httplib::Headers resume = Auth(bob);
  resume.emplace("Last-Event-ID", events.front().id);
  Follow resumed(serve_->port(), "/api/v1/jobs?watch=1", resume);
  ASSERT_TRUE(Eventually([&] {
    const auto got = resumed.events();
    return !got.empty() && got.back().data == events.back().data;
  }));
  EXPECT_NE(resumed.events().front().id, events.front().id);

  ExpectError(Get("/api/v1/jobs?watch=1&phase=Running", bob), 400, "BadRequest",
              "phase cannot be watched", "phase");
  ExpectError(Get("/api/v1/jobs?resourceVersion=" + rv, bob), 400, "BadRequest",
              "resourceVersion needs watch=1", "resourceVersion");
  // Another run's (or a made-up) resourceVersion: list again.
  ExpectError(Get("/api/v1/jobs?watch=1&resourceVersion=12.3", bob), 410, "Expired",
              "list the jobs again", "resourceVersion");
  ExpectError(Get("/api/v1/jobs?watch=1&resourceVersion=" + rv + "999999", bob), 410, "Expired");
  ExpectError(Get("/api/v1/jobs?watch=2", bob), 400, "BadRequest", "watch must be 1 or 0", "watch");
}

TEST_F(Api, AJobWatchSendsItsDetailAndEventsAsTheyChangeThenEnds) {
  const std::string bob = NewToken("bob");
  const std::string eve = NewToken("eve");
  const std::string id = SubmitSteps(bob, "live", "[python3, main.py, '8']");
  ExpectError(Get("/api/v1/jobs/" + id + "?watch=1", eve), 404, "NotFound");
  Follow watch(serve_->port(), "/api/v1/jobs/" + id + "?watch=1", Auth(bob));
  ASSERT_TRUE(watch.WaitFinished(seconds(90)));
  EXPECT_EQ(watch.status(), 200);
  EXPECT_EQ(watch.content_type(), "text/event-stream");
  const std::vector<SseEvent> events = watch.events();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[0].event, "job");
  EXPECT_EQ(events.back().event, "end");
  EXPECT_EQ(json::parse(events.back().data).value("phase", ""), "Succeeded");
  // The job as GET answers it, sent again as it changed: the phases in order, the timeline
  // growing; the events whenever one was recorded.
  std::vector<std::string> phases;
  size_t timeline = 0;
  int event_lists = 0;
  json last_job;
  for (const auto& e : events) {
    if (e.event == "events") {
      ++event_lists;
      EXPECT_TRUE(json::parse(e.data)["items"].is_array());
    }
    if (e.event != "job") continue;
    last_job = json::parse(e.data);
    EXPECT_EQ(last_job["spec"]["name"], "live");
    EXPECT_GE(last_job["timeline"].size(), timeline);
    timeline = last_job["timeline"].size();
    if (phases.empty() || phases.back() != last_job["phase"]) phases.push_back(last_job["phase"]);
  }
  EXPECT_THAT(phases, ::testing::Contains("Running"));
  EXPECT_EQ(phases.back(), "Succeeded");
  EXPECT_GE(phases.size(), 2u) << "only the end state was sent";
  EXPECT_TRUE(last_job["cleanup"].value("released", false));
  // Its resources as GET answers them: the use recorded at the end.
  EXPECT_EQ(last_job["resources"], Body(Get("/api/v1/jobs/" + id, bob))["resources"]);
  EXPECT_TRUE(last_job["resources"]["usage"].is_object()) << last_job.dump();
  EXPECT_GE(event_lists, 1);
  auto final_events = Get("/api/v1/jobs/" + id + "/events", bob);
  ASSERT_TRUE(final_events);
  std::string last_list;
  for (const auto& e : events)
    if (e.event == "events") last_list = e.data;
  EXPECT_EQ(json::parse(last_list), Body(final_events));

  // The capsule's file list comes from its manifest, then from the server's copy of it.
  auto cap = Get("/api/v1/jobs/" + id + "/capsule", bob);
  ASSERT_TRUE(cap);
  ASSERT_EQ(cap->status, 200) << cap->body;
  const json info = Body(cap);
  EXPECT_EQ(info["sha256"], last_job["capsule"]["sha256"]);
  EXPECT_GT(info.value("size", 0), 0);
  EXPECT_EQ(info["userFiles"], 1);
  std::vector<std::string> paths;
  for (const auto& f : info["files"])
    paths.push_back(f.value("path", "") + (f.value("starforge", false) ? " (ours)" : ""));
  EXPECT_THAT(paths, ::testing::Contains("main.py"));
  EXPECT_THAT(paths, ::testing::Contains(".starforge/jobspec.json (ours)"));
  EXPECT_TRUE(fs::exists(state_ / "capsule-manifests" /
                         ("sha256-" + info["sha256"].get<std::string>() + ".json")));
  auto again_cap = Get("/api/v1/jobs/" + id + "/capsule", bob);
  ASSERT_TRUE(again_cap);
  EXPECT_EQ(Body(again_cap), info);
  ExpectError(Get("/api/v1/jobs/" + id + "/capsule", eve), 404, "NotFound");

  // A finished job's watch sends its state and ends at once.
  Follow again(serve_->port(), "/api/v1/jobs/" + id + "?watch=1", Auth(bob));
  ASSERT_TRUE(again.WaitFinished(seconds(10)));
  ASSERT_EQ(again.events().size(), 3u);
  EXPECT_EQ(again.events()[0].event, "job");
  EXPECT_EQ(again.events()[1].event, "events");
  EXPECT_EQ(again.events()[2].event, "end");

  // One user holds a bounded number of watches; others are still served.
  constexpr int kWatchesPerUser = 16;  // ServerOptions::max_watches_per_user
  std::vector<std::unique_ptr<Follow>> held;
  for (int i = 0; i <= kWatchesPerUser; ++i)
    held.push_back(std::make_unique<Follow>(serve_->port(), "/api/v1/jobs?watch=1", Auth(eve)));
  ASSERT_TRUE(Eventually([&] {
    int refused = 0;
    for (auto& f : held)
      refused += f->status() == 429;
    return refused == 1;
  }));
  ExpectError(Get("/api/v1/jobs?watch=1", eve), 429, "TooManyRequests", "watching 16 times");
  auto other = Get("/api/v1/jobs", bob);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  held.clear();  // closing them gives the room back
  ASSERT_TRUE(Eventually([&] {
    Follow w(serve_->port(), "/api/v1/jobs?watch=1", Auth(eve));
    std::this_thread::sleep_for(milliseconds(300));
    return w.status() != 429;
  }));
}

TEST_F(Api, RevokingATokenEndsItsOpenWatchesAndLogFollows) {
  ASSERT_EQ(serve_->Stop(), 0);
  Start({}, {"--sse-keepalive-ms", "200"});  // the token is checked again this often
  const std::string bob = NewToken("bob");
  Follow jobs(serve_->port(), "/api/v1/jobs?watch=1", Auth(bob));
  Follow capacity(serve_->port(), "/api/v1/capacity?watch=1", Auth(bob));
  const std::string id = SubmitSteps(bob, "long", "[python3, main.py, '400']");
  Follow job(serve_->port(), "/api/v1/jobs/" + id + "?watch=1", Auth(bob));
  WaitForPhase(bob, id, "Running");
  Follow log(serve_->port(), "/api/v1/jobs/" + id + "/logs?follow=1", Auth(bob));
  ASSERT_TRUE(Eventually([&] {
    return !job.events().empty() && !jobs.events().empty() && !capacity.events().empty() &&
           !log.events().empty();
  }));
  EXPECT_FALSE(jobs.WaitFinished(seconds(1))) << "an open watch stays open";
  EXPECT_FALSE(log.WaitFinished(seconds(0))) << "an open log follow stays open";
  EXPECT_FALSE(capacity.WaitFinished(seconds(0))) << "an open capacity watch stays open";
  auto tokens = Get("/api/v1/tokens?user=bob", admin_);
  ASSERT_TRUE(tokens);
  const std::string token_id = Body(tokens)["items"][0].value("id", "");
  auto revoked = Post("/api/v1/tokens/" + token_id + "/revoke", admin_);
  ASSERT_TRUE(revoked);
  ASSERT_EQ(revoked->status, 200) << revoked->body;
  EXPECT_TRUE(jobs.WaitFinished(seconds(30)));
  EXPECT_TRUE(job.WaitFinished(seconds(30)));
  EXPECT_TRUE(capacity.WaitFinished(seconds(30)));
  // The job runs on (400 steps): only the revocation can end its log's stream, without "end".
  EXPECT_TRUE(log.WaitFinished(seconds(30))) << "a revoked token's log follow stayed open";
  for (const auto& e : log.events())
    EXPECT_NE(e.event, "end");
  ExpectError(Get("/api/v1/jobs?watch=1", bob), 401, "Unauthorized");
  ExpectError(Get("/api/v1/jobs/" + id + "/logs?follow=1", bob), 401, "Unauthorized");
  auto r = Post("/api/v1/jobs/" + id + "/cancel", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(WaitForEnd(admin_, id)["phase"], "Cancelled");
}

// The local fleet's part of a capacity answer.
json LocalCapacity(const json& body) {
  for (const json& f : body["fleets"])
    if (f.value("fleet", "") == "local") return f;
  return json();
}

TEST_F(Api, ACapacityWatchSendsTheNumbersWhenTheyChangeWithoutOtherUsersJobIds) {
  const std::string bob = NewToken("bob");
  const std::string eve = NewToken("eve");
  auto r = Get("/api/v1/capacity", bob);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const std::string rv = Body(r).value("resourceVersion", "");
  ASSERT_FALSE(rv.empty()) << r->body;
  EXPECT_EQ(LocalCapacity(Body(r))["running"], 0);
  // Without a resourceVersion the watch starts with the answer as it is; from the list's, it
  // sends nothing until the numbers change.
  Follow bobs(serve_->port(), "/api/v1/capacity?watch=1", Auth(bob));
  Follow from_list(serve_->port(), "/api/v1/capacity?watch=1&resourceVersion=" + rv, Auth(bob));
  Follow eves(serve_->port(), "/api/v1/capacity?watch=1", Auth(eve));
  ASSERT_TRUE(Eventually([&] { return !bobs.events().empty() && !eves.events().empty(); }));
  EXPECT_EQ(bobs.events()[0].event, "capacity");
  EXPECT_EQ(bobs.events()[0].id, rv) << "the same numbers, the same resourceVersion";
  EXPECT_EQ(json::parse(bobs.events()[0].data).value("resourceVersion", ""), rv);

  const std::string id = SubmitSteps(bob, "held", "[python3, main.py, '2000']");
  WaitForPhase(bob, id, "Running");
  const auto running = [](Follow& f, int n) {
    return Eventually([&] {
      const auto ev = f.events();
      return !ev.empty() && LocalCapacity(json::parse(ev.back().data))["running"] == n;
    });
  };
  ASSERT_TRUE(running(bobs, 1));
  ASSERT_TRUE(running(from_list, 1));
  ASSERT_TRUE(running(eves, 1));
  EXPECT_THAT(LocalCapacity(json::parse(bobs.events().back().data))["jobs"].dump(), HasSubstr(id));
  // The first thing the watch from the list's resourceVersion sent is the change: bob's job,
  // "starting" (in use, not yet counted as running) when the watch saw its launch, else "running".
  EXPECT_NE(from_list.events()[0].id, rv);
  EXPECT_THAT(LocalCapacity(json::parse(from_list.events()[0].data))["jobs"].dump(), HasSubstr(id));
  // Eve sees bob's job as a count, never its id, in every event.
  for (const auto& e : eves.events()) {
    EXPECT_THAT(e.data, Not(HasSubstr(id)));
    EXPECT_EQ(LocalCapacity(json::parse(e.data))["jobs"], json::array());
  }
  ASSERT_TRUE(Post("/api/v1/jobs/" + id + "/cancel", bob));
  WaitForEnd(bob, id);
  ASSERT_TRUE(running(bobs, 0));
  EXPECT_EQ(bobs.status(), 0) << "the watch is still open";
  // Back to the numbers of the start: back to their resourceVersion (a digest, not a count).
  EXPECT_EQ(bobs.events().back().id, rv);

  ExpectError(Get("/api/v1/capacity?resourceVersion=" + rv, bob), 400, "BadRequest",
              "resourceVersion needs watch=1", "resourceVersion");
  ExpectError(Get("/api/v1/capacity?owner=bob", bob), 400, "BadRequest");
}

TEST_F(Api, AClientThatLeavesEndsItsStream) {
  auto r = Submit(admin_, Spec("quiet"),
                  Zip({{"main.py", "import time\nprint('up', flush=True)\ntime.sleep(120)\n"}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = Body(r)["id"];
  WaitForPhase(admin_, id, "Running");
  // The job is silent and keep-alives are 15 s apart: only noticing the closed connection can
  // end the stream (the request is logged when it ends).
  {
    Follow leaver(serve_->port(), "/api/v1/jobs/" + id + "/logs?follow=1", Auth(admin_));
    std::this_thread::sleep_for(milliseconds(300));
    leaver.Disconnect();
    ASSERT_TRUE(leaver.WaitFinished(seconds(5)));
  }
  const std::string logged = "GET /api/v1/jobs/" + id + "/logs 200";
  for (int i = 0; i < 50 && serve_->Stderr().find(logged) == std::string::npos; ++i)
    std::this_thread::sleep_for(milliseconds(100));
  EXPECT_THAT(serve_->Stderr(), HasSubstr(logged)) << "the stream outlived its client";
  r = Post("/api/v1/jobs/" + id + "/cancel", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(WaitForEnd(admin_, id)["phase"], "Cancelled");
}

TEST_F(Api, StopEndsOpenLogStreamsAndRunningJobsSurvive) {
  ASSERT_EQ(serve_->Stop(), 0);
  Start({}, {"--sse-keepalive-ms", "200"});
  // One line, then silence: the stream gets keep-alive comments.
  auto r = Submit(admin_, Spec("survivor"),
                  Zip({{"main.py", "import time\nprint('up', flush=True)\ntime.sleep(120)\n"}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = Body(r)["id"];
  WaitForPhase(admin_, id, "Running");
  Follow follow(serve_->port(), "/api/v1/jobs/" + id + "/logs?follow=1", Auth(admin_));
  std::this_thread::sleep_for(milliseconds(800));
  EXPECT_GT(follow.comments(), 0) << "no keep-alive comment";
  EXPECT_EQ(LogLines(follow.events()), "up\n");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(serve_->Stop(SIGTERM, seconds(10)), 0) << serve_->Stderr();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(5));
  EXPECT_TRUE(follow.WaitFinished(seconds(5)));
  for (const auto& e : follow.events())
    EXPECT_NE(e.event, "end");  // the stream was cut, not ended: the job goes on

  // A new server finds the job still running, and can cancel it.
  Start();
  json job = WaitForPhase(admin_, id, "Running");
  r = Post("/api/v1/jobs/" + id + "/cancel", admin_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  const json end = WaitForEnd(admin_, id);
  EXPECT_EQ(end["phase"], "Cancelled");
  EXPECT_EQ(end["reason"], "CancelledByUser") << "one reason for a cancel, whatever the fleet";
}

// A connected loopback socket to the server (-1 when it cannot connect).
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `bytes` and reads until `until` appears (or 30 s of silence); what was read.
std::string SendAndReadUntil(int fd, const std::string& bytes, const std::string& until) {
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[4096];
  while (got.find(until) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Clients that never finish their headers (a slowloris needs no token) and the most log-follow
// streams one user may have. httplib's fixed pool of 32 threads stopped answering anything,
// /healthz included, at 32 of them; the front parks the slow ones without a thread
// (tests/api/front_test.cc has the caps and deadlines).
TEST_F(Api, SlowClientsAndLogFollowsLeaveTheServerAnswering) {
  const std::string id = SubmitSteps(admin_, "followed", "[python3, main.py, '2000']");
  WaitForPhase(admin_, id, "Running");
  constexpr int kSlow = 200;
  constexpr int kFollowsPerUser = 16;  // ServerOptions::max_follows_per_user
  std::vector<int> fds, slow;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = Connect(serve_->port());
    ASSERT_GE(fd, 0);
    const std::string start = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    ::send(fd, start.data(), start.size(), MSG_NOSIGNAL);
    slow.push_back(fd);
    fds.push_back(fd);
  }
  // A byte now and then, well within the read timeout: the headers never end.
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    while (!stop) {
      for (int fd : slow)
        ::send(fd, "a", 1, MSG_NOSIGNAL);
      for (int i = 0; i < 10 && !stop; ++i)
        std::this_thread::sleep_for(milliseconds(100));
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{stop, trickle};
  const std::string follow = "GET /api/v1/jobs/" + id +
                             "/logs?follow=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                             admin_ + "\r\n\r\n";
  for (int i = 0; i < kFollowsPerUser; ++i) {
    const int fd = Connect(serve_->port());
    ASSERT_GE(fd, 0);
    EXPECT_THAT(SendAndReadUntil(fd, follow, "\r\n\r\n"), ::testing::StartsWith("HTTP/1.1 200"))
        << "follow " << i;
    fds.push_back(fd);
  }
  // One more follow of the same user is refused with when to retry; others are still served.
  auto r = Get("/api/v1/jobs/" + id + "/logs?follow=1", admin_);
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "5");
  EXPECT_EQ(Body(r).value("error", ""), "TooManyRequests");
  auto fresh = serve_->Client();
  auto h = fresh->Get("/healthz");
  ASSERT_TRUE(h) << httplib::to_string(h.error());
  EXPECT_EQ(h->status, 200);
  auto l = fresh->Get("/api/v1/jobs", Auth(admin_));
  ASSERT_TRUE(l) << httplib::to_string(l.error());
  EXPECT_EQ(l->status, 200);

  stop = true;
  trickle.join();
  for (int fd : fds)
    ::close(fd);
  auto c = Post("/api/v1/jobs/" + id + "/cancel", admin_);
  ASSERT_TRUE(c);
  EXPECT_EQ(WaitForEnd(admin_, id)["phase"], "Cancelled");
  // The streams' slots come back: each stream notices its closed client at its next poll (or
  // ends with the job), on its own thread, so this is awaited rather than expected at once.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  do {
    r = Get("/api/v1/jobs/" + id + "/logs?follow=1", admin_);
    ASSERT_TRUE(r);
    if (r->status == 200) break;
    EXPECT_EQ(r->status, 429) << r->body;
    std::this_thread::sleep_for(milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(r->status, 200) << "the closed streams' slots never came back: " << r->body;
}

// `curl -X POST …/cancel` sends neither Content-Length nor a body: such a request has none
// (RFC 9112 §6.3), so it is answered at once, not after a read timeout with a 413.
TEST_F(Api, APostWithoutContentLengthIsServedAtOnce) {
  const std::string id = SubmitSteps(admin_, "to-cancel", "[python3, main.py, '2000']");
  WaitForPhase(admin_, id, "Running");
  const std::string reply =
      SendRaw(serve_->port(), "POST /api/v1/jobs/" + id + "/cancel HTTP/1.1\r\nHost: x\r\n" +
                                  "Authorization: Bearer " + admin_ + "\r\n\r\n");
  EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 202")) << reply;
  EXPECT_EQ(WaitForEnd(admin_, id)["phase"], "Cancelled");
}

// The status line and the body agree. An unauthenticated POST without Content-Length used to get
// its 401 body under a 400 status, after a 5 s wait for a body that never came.
TEST_F(Api, StatusCodesMatchTheirBodies) {
  const std::string reply =
      SendRaw(serve_->port(), "POST /api/v1/jobs/j-x/cancel HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 401")) << reply;
  EXPECT_THAT(reply, HasSubstr("Unauthorized"));
}

// httplib listens with a backlog of 5, so a burst of connects was reset; the kernel now queues
// SOMAXCONN of them (ss shows a listening socket's backlog as its Send-Q).
TEST_F(Api, TheListenBacklogIsTheSystemMaximum) {
  const support::Output o =
      support::Shell("ss -Hltn 'sport = :" + std::to_string(serve_->port()) + "' 2>&1");
  ASSERT_EQ(o.code, 0) << o.out;
  std::istringstream line(o.out);
  std::string state, recv_q, send_q;
  line >> state >> recv_q >> send_q;
  EXPECT_GE(std::atoi(send_q.c_str()), 128) << o.out;
}

class ApiSmallUploads : public Api {
 protected:
  void SetUp() override { Start({{"FORGE_CAPSULE_MAX_BYTES", "1Mi"}}); }
};

TEST_F(ApiSmallUploads, OversizedUploadsAre413AndZipBombsAreRefused) {
  // Over the limit by its declared length: refused from the header.
  std::string big(3 << 20, 'x');
  ExpectError(Submit(admin_, Spec("big"), big), 413, "PayloadTooLarge", "FORGE_CAPSULE_MAX_BYTES");
  // The body fits the slack for the spec, but the code part alone is over the limit.
  std::string over((1 << 20) + 1000, 'x');
  ExpectError(Submit(admin_, Spec("over"), over), 413, "PayloadTooLarge", "1.0 MiB");
  // 4 MB of zeros compress to a few KB; code may unpack to at most the limit itself (not 8 ×).
  json bomb = {
      {{"name", "bomb"}, {"data", "0000000000"}, {"repeat", 400000}, {"method", "deflate"}}};
  const std::string zip = MakeZip(tmp_, bomb);
  EXPECT_LT(zip.size(), 100000u);
  ExpectError(Submit(admin_, Spec("bomb"), zip), 422, "Invalid", "more than the 1.0 MiB allowed",
              "code");
  // A chunked body declares no length: it is counted while read and cut off at the limit.
  std::string chunked = "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin_ +
                        "\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n";
  const std::string head =
      "--b\r\nContent-Disposition: form-data; name=\"code\"; filename=\"c.zip\"\r\n\r\n";
  auto chunk = [](const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return size + data + "\r\n";
  };
  chunked += chunk(head);
  for (int i = 0; i < 64; ++i)
    chunked += chunk(std::string(64 << 10, 'z'));
  EXPECT_THAT(SendRaw(serve_->port(), chunked), ::testing::StartsWith("HTTP/1.1 413"));
  ExpectHealthyAndNoJobs();
}

TEST(ServeCommand, KuberayAsTheDefaultFleetNeedsAClusterAndS3) {
  TempDir t;
  Captured r =
      Forge("serve --listen 127.0.0.1:0", {{"FORGE_STORAGE_ROOT", (t / "root").string()},
                                           {"FORGE_DEFAULT_FLEET_KIND", "kuberay"},
                                           {"KUBECONFIG", (t / "no-kubeconfig").string()}});
  EXPECT_EQ(r.code, 78);
  EXPECT_THAT(r.err,
              AllOf(HasSubstr("the kuberay fleet is not configured on this server"),
                    HasSubstr("set FORGE_K8S_API_SERVER"), HasSubstr("set FORGE_S3_ENDPOINT")));
  EXPECT_EQ(r.out, "");
}

TEST(ServeCommand, AnUnwritableStorageRootSaysWhatToSet) {
  TempDir t;
  support::WriteFile(t / "file", "x");
  Captured r =
      Forge("serve --listen 127.0.0.1:0", {{"FORGE_STORAGE_ROOT", (t / "file" / "root").string()}});
  EXPECT_EQ(r.code, 78);
  EXPECT_THAT(r.err, AllOf(HasSubstr("is not writable"), HasSubstr("set FORGE_STORAGE_ROOT")));
  r = Forge("token create --user bob", {{"FORGE_STORAGE_ROOT", (t / "file" / "root").string()}});
  EXPECT_EQ(r.code, 78);
  EXPECT_THAT(r.err, HasSubstr("set FORGE_STORAGE_ROOT"));
  EXPECT_EQ(r.out, "");
}

// An earlier StarForge kept its state in <root>/control, where jobs write: the first start moves
// it to the state directory, and the users and tokens in it still work.
TEST(ServeCommand, TheOldControlDirectoryMovesToTheStateDirectory) {
  TempDir t;
  const fs::path root = t / "root";
  Captured r = Forge("token create --user bob", {{"FORGE_STORAGE_ROOT", root.string()},
                                                 {"FORGE_STATE_DIR", (t / "old").string()}});
  ASSERT_EQ(r.code, 0) << r.err;
  std::string bob = r.out;
  if (!bob.empty() && bob.back() == '\n') bob.pop_back();
  fs::rename(t / "old", root / "control");  // the old layout

  std::string error;
  auto serve = ServeProcess::Start(root, {}, {}, &error);
  ASSERT_TRUE(serve) << error;
  EXPECT_THAT(serve->Stderr(),
              HasSubstr("moved the control plane's state from " + (root / "control").string() +
                        " to " + (t / "root-state").string()));
  EXPECT_FALSE(fs::exists(root / "control"));
  EXPECT_TRUE(fs::exists(t / "root-state" / "starforge.db"));
  auto who = serve->Client()->Get("/api/v1/whoami", {{"Authorization", "Bearer " + bob}});
  ASSERT_TRUE(who);
  EXPECT_EQ(who->status, 200) << who->body;
}

// Where no sandbox can be made, a local job would run with the server's rights: only admins may
// submit one, and the server says so at start and at submit.
TEST_F(Api, WithoutASandboxOnlyAdminsRunLocalJobs) {
  serve_.reset();
  Start({}, {"--no-sandbox"});
  EXPECT_THAT(serve_->Stderr(), HasSubstr("local fleet: no sandbox (--no-sandbox): only admins"));
  const std::string bob = NewToken("bob");
  ExpectError(Submit(bob, Spec("bobs"), Zip({{"main.py", kStepsPy}})), 403, "Forbidden",
              "only admins may submit them", "fleet");
  const std::string id = SubmitSteps(admin_, "admins", "[python3, main.py, '1']");
  EXPECT_EQ(WaitForEnd(admin_, id)["phase"], "Succeeded");
}

TEST(ServeCommand, ABusyPortIsAClearError) {
  TempDir t;
  std::string error;
  auto first = ServeProcess::Start(t / "a", {}, {}, &error);
  ASSERT_TRUE(first) << error;
  Captured r = Forge("serve --listen 127.0.0.1:" + std::to_string(first->port()),
                     {{"FORGE_STORAGE_ROOT", (t / "b").string()}});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(first->port())));
  r = Forge("serve --listen nonsense", {{"FORGE_STORAGE_ROOT", (t / "b").string()}});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("expected HOST:PORT"));
  EXPECT_EQ(first->Stop(), 0);
}

// Two servers on one storage root would both submit, archive and delete the same jobs: the second
// is refused naming the first, and the root is free again as soon as the first is gone (even
// killed).
TEST(ServeCommand, OneServerPerStorageRoot) {
  TempDir t;
  std::string error;
  auto first = ServeProcess::Start(t / "root", {}, {}, &error);
  ASSERT_TRUE(first) << error;
  Captured r = Forge("serve --listen 127.0.0.1:0", {{"FORGE_STORAGE_ROOT", (t / "root").string()}});
  EXPECT_EQ(r.code, 78);
  EXPECT_THAT(r.err, AllOf(HasSubstr("another forge serve (pid " + std::to_string(first->pid()) +
                                     ") is using the state directory"),
                           HasSubstr("stop it first")));
  EXPECT_EQ(first->Stop(SIGKILL), 128 + SIGKILL);
  auto second = ServeProcess::Start(t / "root", {}, {}, &error);
  ASSERT_TRUE(second) << error;
  EXPECT_EQ(second->Stop(), 0);
}

}  // namespace
}  // namespace starforge::api

namespace starforge::api {
namespace {

// forge submit's way (docs/capsule.md, "Submitting"): a capsule built by the client is checked
// and stored as it is; a resubmit names it by digest and uploads nothing; only its owner may.
TEST_F(Api, ClientBuiltCapsulesAreCheckedStoredAndNamedByDigest) {
  support::WriteFile(tmp_ / "code/main.py", kStepsPy);
  std::string bytes;
  const capsule::BuildResult built = BuildClientCapsule("cap", &bytes);
  ASSERT_TRUE(built.ok());

  auto send = [&](const std::string& token, const std::string& spec, const std::string& part,
                  const std::string& data) {
    httplib::MultipartFormDataItems items = {{"spec", spec, "", ""},
                                             {part, data, "capsule.zip", "application/zip"}};
    return http_->Post("/api/v1/jobs", Auth(token), items);
  };
  auto r = send(admin_, Spec("cap"), "capsule", bytes);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string first = Body(r)["id"];
  const std::string sha = Body(r)["capsule"].value("sha256", "");
  // The server's reading of the JobSpec (its defaults) may differ from the client's: then it
  // stores a copy with its own, and says so with the digest.
  ASSERT_EQ(sha.size(), 64u) << r->body;
  EXPECT_EQ(WaitForEnd(admin_, first)["phase"], "Succeeded");

  auto known = Get("/api/v1/capsules/" + sha, admin_);
  ASSERT_TRUE(known);
  EXPECT_EQ(known->status, 200) << known->body;
  EXPECT_EQ(Body(known)["key"], "capsules/sha256-" + sha + ".zip");
  const std::string bob = NewToken("bob");
  ExpectError(Get("/api/v1/capsules/" + sha, bob), 404, "NotFound", "send the capsule");
  ExpectError(Get("/api/v1/capsules/nothex", admin_), 400, "BadRequest", "not a SHA-256");

  // A resubmit by digest: nothing uploaded, the same capsule, the job runs.
  r = send(admin_, Spec("cap"), "capsuleSha256", sha);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(Body(r)["capsule"]["sha256"], sha);
  const std::string second = Body(r)["id"];
  EXPECT_EQ(WaitForEnd(admin_, second)["phase"], "Succeeded");
  // Not for another JobSpec (the capsule holds the JobSpec), nor for another user.
  ExpectError(send(admin_, Spec("other"), "capsuleSha256", sha), 409, "CapsuleNotFound",
              "send the capsule itself", "capsuleSha256");
  ExpectError(send(bob, Spec("cap"), "capsuleSha256", sha), 409, "CapsuleNotFound");

  // A capsule that disagrees with its own manifest, or holds an unsafe name, is refused.
  auto doctored = [&](const std::string& name, const std::string& extra) {
    const fs::path out = tmp_ / name;
    support::Output o = support::Shell(
        "python3 -c 'import sys, zipfile\n"
        "src = zipfile.ZipFile(sys.argv[1]); dst = zipfile.ZipFile(sys.argv[2], \"w\")\n"
        "for i in src.infolist():\n"
        "    data = src.read(i)\n"
        "    dst.writestr(i, b\"#\" * len(data) if i.filename == \"main.py\" else data)\n"
        "if sys.argv[3]: dst.writestr(sys.argv[3], b\"x\")\n"
        "dst.close()' " +
        support::Quote(built.path.string()) + " " + support::Quote(out.string()) + " " +
        support::Quote(extra));
    EXPECT_EQ(o.code, 0);
    return support::ReadFile(out);
  };
  ExpectError(send(admin_, Spec("lie"), "capsule", doctored("lie.zip", "")), 422, "Invalid",
              "main.py: SHA-256", "capsule");
  ExpectError(send(admin_, Spec("lie"), "capsule", doctored("escape.zip", "../escape.py")), 422,
              "Invalid", "unsafe entry name", "capsule");
  ExpectError(send(admin_, Spec("both"), "capsuleSha256", "x" + sha.substr(1)), 400, "BadRequest",
              "not a SHA-256");
}

// A capsule is checked while it arrives (capsule/stream_check.h): an archive whose central
// directory disagrees with its local headers, one cut short, or an upload that stops midway is
// refused with a clear error, and nothing is left behind.
TEST_F(Api, CapsulesCheckedWhileTheyArriveRefuseWhatDisagreesOrIsCutShort) {
  support::WriteFile(tmp_ / "code/main.py", kStepsPy);
  support::WriteFile(tmp_ / "code/lib/util.py", "X = 1\n");
  std::string good;
  ASSERT_TRUE(BuildClientCapsule("cap", &good).ok());
  auto send = [&](const std::string& bytes) {
    httplib::MultipartFormDataItems items = {{"spec", Spec("cap"), "", ""},
                                             {"capsule", bytes, "capsule.zip", "application/zip"}};
    return http_->Post("/api/v1/jobs", Auth(admin_), items);
  };
  // main.py's record in the central directory says another CRC-32 than its local header.
  const std::string record("PK\x01\x02", 4);
  size_t cd = std::string::npos;
  for (size_t at = good.find(record); at != std::string::npos; at = good.find(record, at + 1))
    if (good.compare(at + 46, 7, "main.py") == 0) cd = at;
  ASSERT_NE(cd, std::string::npos);
  std::string doctored = good;
  doctored[cd + 16] ^= 1;
  ExpectError(send(doctored), 422, "Invalid", "main.py: the central directory says CRC-32 ",
              "capsule");
  ExpectError(send(good.substr(0, good.size() / 2)), 422, "Invalid",
              "the upload was cut short or the archive is truncated", "capsule");
  ExpectHealthyAndNoJobs();

  // The connection closes halfway through the body: no job, no file.
  const std::string boundary = "sfb";
  const std::string head = "--" + boundary +
                           "\r\nContent-Disposition: form-data; name=\"spec\"\r\n\r\n" +
                           Spec("cap") + "\r\n--" + boundary +
                           "\r\nContent-Disposition: form-data; name=\"capsule\"; "
                           "filename=\"c.zip\"\r\n\r\n";
  const std::string tail = "\r\n--" + boundary + "--\r\n";
  const std::string request =
      "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin_ +
      "\r\nContent-Type: multipart/form-data; boundary=" + boundary +
      "\r\nContent-Length: " + std::to_string(head.size() + good.size() + tail.size()) +
      "\r\n\r\n" + head + good.substr(0, good.size() / 2);
  // No answer within SendRaw's second of quiet (the body is not over); then it closes the
  // connection, the server's read of the body fails and it removes what it had written.
  EXPECT_EQ(SendRaw(serve_->port(), request), "");
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (!fs::is_empty(state_ / "uploads") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(100));
  ExpectHealthyAndNoJobs();
}

}  // namespace
}  // namespace starforge::api

namespace starforge::api {
namespace {

// forge submit's way (docs/api.md, "Uploading a capsule"): the JobSpec
// first (POST /api/v1/uploads, checked before any code is sent), then the capsule as the plain
// body of PUT /api/v1/uploads/{id}, checked as it arrives like a "capsule" part. Whatever is
// refused leaves no job and no file; an upload is its owner's, and used once.
TEST_F(Api, CapsulesSentAsAPlainBodyAfterTheirJobSpec) {
  support::WriteFile(tmp_ / "code/main.py", kStepsPy);
  support::WriteFile(tmp_ / "code/lib/util.py", "X = 1\n");
  std::string good;
  const capsule::BuildResult built = BuildClientCapsule("plain", &good);
  ASSERT_TRUE(built.ok());

  auto start = [&](const std::string& token, const std::string& spec,
                   const std::string& type = "application/yaml") {
    return http_->Post("/api/v1/uploads", Auth(token), spec, type.c_str());
  };
  // A new upload's URL, or "" (with a failure) when none was given.
  auto url = [&](const std::string& token = "") {
    auto r = start(token.empty() ? admin_ : token, Spec("plain"));
    EXPECT_TRUE(r);
    if (!r) return std::string();
    EXPECT_EQ(r->status, 201) << r->body;
    const std::string u = Body(r).value("url", "");
    EXPECT_EQ(r->get_header_value("Location"), u);
    EXPECT_THAT(u, ::testing::StartsWith("/api/v1/uploads/u-"));
    return u;
  };
  auto put = [&](const std::string& path, const std::string& bytes,
                 const std::string& type = "application/zip", const std::string& token = "") {
    return http_->Put(path, Auth(token.empty() ? admin_ : token), bytes, type.c_str());
  };

  // The JobSpec is checked first: nothing to upload for a bad one.
  ExpectError(start(admin_, "name: [unclosed"), 400, "BadRequest", "not valid YAML or JSON",
              "spec");
  ExpectError(start(admin_, Spec("typo", "[python3, main.py]", "gpuz: 1\n")), 422, "Invalid",
              "gpuz", "gpuz");
  ExpectError(start(admin_, ""), 400, "BadRequest", "it is empty");
  ExpectError(start(admin_, Spec("plain"), "application/zip"), 415, "UnsupportedMediaType",
              "application/yaml or application/json");
  ExpectError(start("", Spec("plain")), 401, "Unauthorized");
  // The capsule's PUT: only with a token, for the caller's own upload, once.
  const std::string bob = NewToken("bob");
  std::string u = url();
  ExpectError(put(u, good, "application/zip", "sf_not_a_token"), 401, "Unauthorized");
  ExpectError(put(u, good, "application/zip", bob), 404, "NotFound", "POST /api/v1/uploads");
  // Used up by its first PUT, whatever the outcome.
  ExpectError(put(u, good, "text/plain"), 415, "UnsupportedMediaType", "application/zip");
  ExpectError(put(u, good), 404, "NotFound", "of yours in progress");
  ExpectError(put("/api/v1/uploads/u-0123", good), 404, "NotFound");
  ExpectError(put(url(), good, "multipart/form-data; boundary=x"), 415, "UnsupportedMediaType",
              "application/zip", "capsule");
  ExpectError(put(url() + "?sha256=abc", good), 400, "BadRequest", "not a SHA-256", "sha256");
  ExpectError(put(url() + "?other=1", good), 400, "BadRequest", "unknown query parameter");
  // Malformed, truncated, or not the bytes the client named: refused.
  ExpectError(put(url(), "not a zip at all"), 422, "Invalid", "", "capsule");
  ExpectError(put(url(), good.substr(0, good.size() / 2)), 422, "Invalid",
              "the upload was cut short or the archive is truncated", "capsule");
  ExpectError(put(url() + "?sha256=" + std::string(64, '0'), good), 422, "Invalid",
              "not the " + std::string(64, '0'), "sha256");
  ExpectError(put(url(), ""), 400, "BadRequest", "empty");
  ExpectHealthyAndNoJobs();

  // The connection closes halfway through the body: no job, no file.
  const std::string request =
      "PUT " + url() + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + admin_ +
      "\r\nContent-Type: application/zip\r\nContent-Length: " + std::to_string(good.size()) +
      "\r\n\r\n" + good.substr(0, good.size() / 2);
  EXPECT_EQ(SendRaw(serve_->port(), request), "");
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (!fs::is_empty(state_ / "uploads") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(100));
  ExpectHealthyAndNoJobs();

  // The good capsule with its digest: the job is created and runs; the answer is POST
  // /api/v1/jobs's.
  auto r = put(url() + "?sha256=" + built.sha256, good);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  const std::string id = Body(r)["id"];
  EXPECT_EQ(r->get_header_value("Location"), "/api/v1/jobs/" + id);
  EXPECT_EQ(Body(r)["spec"]["name"], "plain");
  EXPECT_EQ(Body(r)["capsule"].value("sha256", "").size(), 64u) << r->body;
  EXPECT_EQ(WaitForEnd(admin_, id)["phase"], "Succeeded");
  // And without a digest, sent chunked (its length unknown, as forge submit sends while it
  // builds).
  const std::string chunked_url = url();
  r = http_->Put(
      chunked_url, Auth(admin_),
      [&](size_t offset, httplib::DataSink& sink) {
        const size_t n = std::min<size_t>(4096, good.size() - offset);
        sink.write(good.data() + offset, n);
        if (offset + n == good.size()) sink.done();
        return true;
      },
      "application/zip");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(WaitForEnd(admin_, Body(r)["id"])["phase"], "Succeeded");
}

// An upload's capsule is held to FORGE_CAPSULE_MAX_BYTES, declared or chunked, like a form's.
TEST_F(ApiSmallUploads, PlainCapsuleBodiesOverTheLimitAre413) {
  auto start = [&] {
    auto r = http_->Post("/api/v1/uploads", Auth(admin_), Spec("big"), "application/yaml");
    EXPECT_TRUE(r && r->status == 201);
    return r ? Body(r).value("url", "") : std::string();
  };
  auto r = http_->Put(start(), Auth(admin_), std::string((1 << 20) + 1000, 'x'), "application/zip");
  ExpectError(r, 413, "PayloadTooLarge", "FORGE_CAPSULE_MAX_BYTES");
  std::string chunked = "PUT " + start() + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                        admin_ +
                        "\r\nContent-Type: application/zip\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 64; ++i)
    chunked += "10000\r\n" + std::string(64 << 10, 'z') + "\r\n";
  EXPECT_THAT(SendRaw(serve_->port(), chunked), ::testing::StartsWith("HTTP/1.1 413"));
  ExpectHealthyAndNoJobs();
}

}  // namespace
}  // namespace starforge::api
