// The S3 store against two real S3 protocol peers started per test on a loopback port — s3rver
// (checks access key ids, accepts any signature) and s3sigpeer (gofakes3: verifies every SigV4
// signature, presigned URLs' expiry, the region and the payload hash, as AWS does) — and, for
// failures a real server will not produce on demand, a scripted HTTP server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "s3peer.h"
#include "scripted_server.h"
#include "starforge/objstore/s3_store.h"
#include "support/files.h"
#include "support/net.h"
#include "support/temp_dir.h"

namespace starforge::objstore {
namespace {

using support::ReadFile;
using support::TempDir;
using support::WriteFile;
using testing::CannedReply;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::S3Peer;
using testing::ScriptedServer;

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (char& c : s)
    c = static_cast<char>(gen());
  return s;
}

S3Options BaseOptions(const std::string& endpoint) {
  S3Options o;
  o.endpoint = endpoint;
  o.bucket = S3Peer::kBucket;
  o.credentials = {Secret(S3Peer::kAccessKey), Secret(S3Peer::kSecretKey)};
  o.region = "us-east-1";
  o.max_attempts = 3;
  o.backoff_base = std::chrono::milliseconds(5);
  o.backoff_cap = std::chrono::milliseconds(20);
  return o;
}

std::unique_ptr<ObjectStore> MustOpen(const S3Options& o) {
  auto store = OpenS3(o);
  EXPECT_TRUE(store) << (store ? "" : store.status().message());
  return store ? std::move(store).value() : nullptr;
}

// Lines of the peer's request log that match `method` and contain `needle`.
size_t CountRequests(const std::vector<std::string>& log, const std::string& method,
                     const std::string& needle) {
  return std::count_if(log.begin(), log.end(), [&](const std::string& line) {
    return line.rfind(method + " ", 0) == 0 && line.find(needle) != std::string::npos;
  });
}

// Options for `peer`: its endpoint, keys and region.
S3Options PeerOptions(const S3Peer& peer) {
  S3Options o = BaseOptions(peer.endpoint());
  o.credentials = {Secret(peer.access_key()), Secret(peer.secret_key())};
  o.region = peer.region();
  return o;
}

// Every test of this fixture runs against both peers.
class S3StoreTest : public ::testing::TestWithParam<S3Peer::Kind> {
 protected:
  void SetUp() override {
    std::string error;
    peer_ = S3Peer::Start(GetParam(), &error);
    ASSERT_TRUE(peer_) << error;
  }
  S3Options Options() const { return PeerOptions(*peer_); }

  std::unique_ptr<S3Peer> peer_;
  TempDir tmp_;
};

INSTANTIATE_TEST_SUITE_P(Peers, S3StoreTest,
                         ::testing::Values(S3Peer::Kind::kS3rver, S3Peer::Kind::kSigV4),
                         [](const ::testing::TestParamInfo<S3Peer::Kind>& p) {
                           return p.param == S3Peer::Kind::kS3rver ? "s3rver" : "sigv4";
                         });

TEST_P(S3StoreTest, PutHeadGetRoundTrip) {
  auto store = MustOpen(Options());
  ASSERT_TRUE(store);
  const std::string data = RandomBytes(300000, 1);
  const std::string key = "capsules/sha256-round-trip.zip";

  auto put = store->PutBytes(key, data);
  ASSERT_TRUE(put) << put.status().message();
  EXPECT_EQ(put->size, 300000);
  EXPECT_EQ(put->bytes_uploaded, 300000);
  EXPECT_FALSE(put->already_present);

  auto head = store->Head(key);
  ASSERT_TRUE(head) << head.status().message();
  ASSERT_TRUE(head.value());
  EXPECT_EQ(head.value()->size, 300000);
  EXPECT_FALSE(head.value()->etag.empty());
  EXPECT_EQ(head.value()->etag.find('"'), std::string::npos);

  auto bytes = store->GetBytes(key);
  ASSERT_TRUE(bytes) << bytes.status().message();
  EXPECT_TRUE(bytes.value() == data);

  const std::string out = tmp_ / "out.zip";
  auto got = store->GetFile(key, out);
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(got.value(), 300000);
  EXPECT_TRUE(ReadFile(out) == data);
  // Only the object itself is left in the directory: the temporary file was renamed.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp_.path()),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_P(S3StoreTest, KeysWithCharactersThatNeedEncoding) {
  auto store = MustOpen(Options());
  ASSERT_TRUE(store);
  const std::string key = "dir/a b$c=d&e\xE1\x88\xB4.txt";
  ASSERT_TRUE(store->PutBytes(key, "encoded"));
  auto head = store->Head(key);
  ASSERT_TRUE(head) << head.status().message();
  ASSERT_TRUE(head.value());
  EXPECT_EQ(head.value()->size, 7);
  EXPECT_EQ(store->GetBytes(key).value(), "encoded");
}

TEST_P(S3StoreTest, MissingKeyIsNulloptForHeadAndNotFoundForGet) {
  auto store = MustOpen(Options());
  ASSERT_TRUE(store);
  auto head = store->Head("capsules/absent.zip");
  ASSERT_TRUE(head) << head.status().message();
  EXPECT_FALSE(head.value());
  auto get = store->GetBytes("capsules/absent.zip");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.status().reason(), ToString(ErrorKind::kNotFound));
  EXPECT_THAT(get.status().message(), HasSubstr("\"capsules/absent.zip\" does not exist"));
  // A failed download leaves no file behind.
  const std::string out = tmp_ / "never.zip";
  EXPECT_FALSE(store->GetFile("capsules/absent.zip", out));
  EXPECT_TRUE(std::filesystem::is_empty(tmp_.path()));
}

TEST_P(S3StoreTest, SecondUploadOfTheSameKeySendsNoBody) {
  auto store = MustOpen(Options());
  ASSERT_TRUE(store);
  const std::string file = tmp_ / "capsule.zip";
  WriteFile(file, RandomBytes(200000, 2));
  const std::string key = "capsules/sha256-dedup.zip";

  auto first = store->PutFile(key, file);
  ASSERT_TRUE(first) << first.status().message();
  EXPECT_EQ(first->bytes_uploaded, 200000);
  const size_t before = peer_->Requests().size();

  auto second = store->PutFile(key, file);
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_TRUE(second->already_present);
  EXPECT_EQ(second->bytes_uploaded, 0);
  EXPECT_EQ(second->size, 200000);

  // What the server saw: exactly one PUT in all, and the second Put was a lone HEAD.
  const std::vector<std::string> log = peer_->Requests();
  EXPECT_EQ(CountRequests(log, "PUT", key), 1u);
  ASSERT_EQ(log.size(), before + 1) << ::testing::PrintToString(log);
  EXPECT_EQ(log.back(), "HEAD /forge-test/" + key + " 0");
}

TEST_P(S3StoreTest, SameKeyWithDifferentSizeIsAnError) {
  auto store = MustOpen(Options());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->PutBytes("capsules/k.zip", "abc"));
  auto again = store->PutBytes("capsules/k.zip", "abcd");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.status().reason(), ToString(ErrorKind::kInvalid));
  EXPECT_THAT(again.status().message(), HasSubstr("content-addressed"));
}

TEST_P(S3StoreTest, MultipartAboveTheThreshold) {
  S3Options o = Options();
  o.multipart_threshold = 1 << 20;
  o.part_size = 256 << 10;
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  const std::string data = RandomBytes((1 << 20) + 1000, 3);  // 4 full parts and a short one
  const std::string file = tmp_ / "big.zip";
  WriteFile(file, data);
  const std::string key = "capsules/sha256-multipart.zip";

  std::vector<int64_t> seen;
  auto put = store->PutFile(key, file, [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, static_cast<int64_t>(data.size()));
    seen.push_back(done);
  });
  ASSERT_TRUE(put) << put.status().message();
  EXPECT_EQ(put->bytes_uploaded, static_cast<int64_t>(data.size()));
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), static_cast<int64_t>(data.size()));

  const std::vector<std::string> log = peer_->Requests();
  EXPECT_EQ(CountRequests(log, "POST", key + "?uploads"), 1u);
  EXPECT_EQ(CountRequests(log, "PUT", "partNumber="), 5u);
  EXPECT_EQ(CountRequests(log, "POST", "uploadId="), 1u);
  EXPECT_EQ(CountRequests(log, "PUT", "partNumber=5&uploadId="), 1u);

  auto back = store->GetBytes(key);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_TRUE(back.value() == data);
  EXPECT_EQ(store->Head(key).value()->size, static_cast<int64_t>(data.size()));
  // Multipart objects dedup too.
  EXPECT_TRUE(store->PutFile(key, file)->already_present);
}

int RunCurl(const std::string& url, const std::string& out) {
  const std::string cmd = "curl -sS -f -o '" + out + "' '" + url + "' 2>/dev/null";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// GETs `url` with the curl tool: the HTTP status, with the body in `*body` (0: no reply).
int CurlStatus(const std::string& url, std::string* body, const std::string& ca_file = "") {
  TempDir tmp;
  const std::string out = tmp / "body";
  std::string cmd = "curl -sS -o '" + out + "' -w '%{http_code}' ";
  if (!ca_file.empty()) cmd += "--cacert '" + ca_file + "' ";
  cmd += "'" + url + "' > '" + (tmp / "code").string() + "' 2>/dev/null";
  (void)std::system(cmd.c_str());
  if (std::filesystem::exists(out)) *body = ReadFile(out);
  const std::string code = ReadFile(tmp / "code");
  return code.empty() ? 0 : std::atoi(code.c_str());
}

TEST_P(S3StoreTest, PresignedGetWorksWithTheCurlTool) {
  auto store = MustOpen(Options());
  ASSERT_TRUE(store);
  const std::string key = "capsules/sha256-presigned $+.zip";
  const std::string data = RandomBytes(50000, 4);
  ASSERT_TRUE(store->PutBytes(key, data));

  auto url = store->PresignGet(key, 600, std::time(nullptr));
  ASSERT_TRUE(url) << url.status().message();
  EXPECT_THAT(*url,
              HasSubstr(peer_->endpoint() + "/forge-test/capsules/sha256-presigned%20%24%2B.zip?"));
  EXPECT_THAT(*url, HasSubstr("X-Amz-SignedHeaders=host&X-Amz-Signature="));
  const std::string out = tmp_ / "fetched.zip";
  ASSERT_EQ(RunCurl(*url, out), 0) << *url;
  EXPECT_TRUE(ReadFile(out) == data);

  // An expired URL is refused (the peer checks X-Amz-Date + X-Amz-Expires).
  auto old = store->PresignGet(key, 60, std::time(nullptr) - 3600);
  ASSERT_TRUE(old);
  EXPECT_NE(RunCurl(*old, tmp_ / "expired.zip"), 0);
}

TEST_P(S3StoreTest, MissingBucketIsAClearError) {
  S3Options o = Options();
  o.bucket = "no-such-bucket";
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  const std::string expected = "bucket \"no-such-bucket\" does not exist at " + peer_->endpoint();
  auto put = store->PutBytes("capsules/x.zip", "x");
  ASSERT_FALSE(put);
  EXPECT_EQ(put.status().reason(), ToString(ErrorKind::kNoSuchBucket));
  EXPECT_EQ(put.status().message(), expected);
  auto head = store->Head("capsules/x.zip");
  ASSERT_FALSE(head);
  EXPECT_EQ(head.status().reason(), ToString(ErrorKind::kNoSuchBucket));
  auto get = store->GetBytes("capsules/x.zip");
  ASSERT_FALSE(get);
  EXPECT_EQ(get.status().message(), expected);
}

// A HEAD, a PUT and a GET of one key with credentials the server refuses (code): each is
// bad-credentials, names the settings to fix and none of `never`.
void ExpectBadCredentials(ObjectStore& store, const std::string& code,
                          const std::vector<std::string>& never) {
  for (const Status& e :
       {store.Head("capsules/x.zip").status(), store.PutBytes("capsules/x.zip", "x").status(),
        store.GetBytes("capsules/x.zip").status()}) {
    EXPECT_EQ(e.reason(), ToString(ErrorKind::kBadCredentials)) << e.message();
    EXPECT_THAT(e.message(), HasSubstr("the S3 credentials were rejected (" + code + ")"));
    EXPECT_THAT(e.message(), HasSubstr("check FORGE_S3_ACCESS_KEY/FORGE_S3_SECRET_KEY"));
    for (const std::string& text : never)
      EXPECT_THAT(e.message(), Not(HasSubstr(text)));
  }
}

TEST_P(S3StoreTest, UnknownAccessKeyIsBadCredentialsAndNeverEchoesSecrets) {
  S3Options o = Options();
  const std::string access = "AKIAUNKNOWNKEY000001";
  const std::string secret = "s3cr3t-value-that-must-not-leak";
  o.credentials = {Secret(access), Secret(secret)};
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  ExpectBadCredentials(*store, "InvalidAccessKeyId", {secret, access});
  EXPECT_THAT(store->Describe(), Not(HasSubstr(secret)));
  EXPECT_THAT(store->Describe(), Not(HasSubstr(access)));
}

// --- Refusals only a server that checks signatures gives (s3sigpeer) --------------------

class S3SignatureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    peer_ = S3Peer::Start(S3Peer::Kind::kSigV4, &error);
    ASSERT_TRUE(peer_) << error;
  }
  S3Options Options() const { return PeerOptions(*peer_); }

  std::unique_ptr<S3Peer> peer_;
  TempDir tmp_;
};

TEST_F(S3SignatureTest, WrongSecretIsBadCredentialsWithoutTheSecret) {
  S3Options o = Options();
  const std::string secret = "wrong/secret+value-that-must-not-leak";
  o.credentials.secret_access_key = Secret(secret);
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  ExpectBadCredentials(*store, "SignatureDoesNotMatch", {secret, S3Peer::kSigAccessKey});
  // Nothing was stored under the wrong signature.
  EXPECT_FALSE(MustOpen(Options())->Head("capsules/x.zip").value());
}

TEST_F(S3SignatureTest, WrongRegionNamesTheSettingAndTheExpectedRegion) {
  S3Options o = Options();
  o.region = "us-east-1";  // the default; the peer is in eu-central-1
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  for (const Status& e :
       {store->Head("capsules/x.zip").status(), store->PutBytes("capsules/x.zip", "x").status(),
        store->GetBytes("capsules/x.zip").status()}) {
    EXPECT_EQ(e.reason(), ToString(ErrorKind::kInvalid)) << e.message();
    EXPECT_THAT(e.message(), HasSubstr("expects another region"));
    EXPECT_THAT(e.message(), HasSubstr("expecting 'eu-central-1'"));
    EXPECT_THAT(e.message(), HasSubstr("set FORGE_S3_REGION"));
    EXPECT_THAT(e.message(), Not(HasSubstr(S3Peer::kSigSecretKey)));
  }
}

TEST_F(S3SignatureTest, PresignedUrlsAreCheckedLikeAwsChecksThem) {
  auto store = MustOpen(Options());
  ASSERT_TRUE(store);
  const std::string key = "capsules/sha256-presigned $+=&~ሴ.zip";
  const std::string data = RandomBytes(40000, 5);
  ASSERT_TRUE(store->PutBytes(key, data));
  const std::time_t now = std::time(nullptr);
  std::string body;

  const std::string url = store->PresignGet(key, 600, now).value();
  ASSERT_EQ(CurlStatus(url, &body), 200) << body;
  EXPECT_TRUE(body == data);

  // Past its expiry (signed an hour ago for 60 s).
  EXPECT_EQ(CurlStatus(store->PresignGet(key, 60, now - 3600).value(), &body), 403);
  EXPECT_THAT(body, HasSubstr("Request has expired"));

  // Any change to what was signed: the expiry, the date, another object with the same signature.
  const auto altered = [&](const std::string& from, const std::string& to) {
    const size_t at = url.find(from);
    EXPECT_NE(at, std::string::npos) << from << " not in the URL";
    std::string u = url;
    return at == std::string::npos ? u : u.replace(at, from.size(), to);
  };
  for (const std::string& u : {altered("X-Amz-Expires=600", "X-Amz-Expires=601"),
                               altered("sha256-presigned", "sha256-presignee")}) {
    EXPECT_EQ(CurlStatus(u, &body), 403) << u;
    EXPECT_THAT(body, HasSubstr("SignatureDoesNotMatch")) << u;
  }

  // Signed with the wrong secret, or for the wrong region.
  S3Options wrong = Options();
  wrong.credentials.secret_access_key = Secret("not-the-secret");
  EXPECT_EQ(CurlStatus(MustOpen(wrong)->PresignGet(key, 600, now).value(), &body), 403);
  EXPECT_THAT(body, HasSubstr("SignatureDoesNotMatch"));
  wrong = Options();
  wrong.region = "us-east-1";
  EXPECT_EQ(CurlStatus(MustOpen(wrong)->PresignGet(key, 600, now).value(), &body), 400);
  EXPECT_THAT(body, HasSubstr("AuthorizationQueryParametersError"));
}

TEST(S3StoreTls, HttpsEndpointWithTheCaFileOfFORGE_S3_CA_FILE) {
  std::string error;
  auto peer = S3Peer::Start(S3Peer::Kind::kSigV4, &error, /*tls=*/true);
  ASSERT_TRUE(peer) << error;
  ASSERT_THAT(peer->endpoint(), ::testing::StartsWith("https://"));

  // Without the CA the server's certificate is not trusted: a clear error, not retried forever.
  S3Options o = PeerOptions(*peer);
  o.max_attempts = 1;
  auto untrusted = MustOpen(o);
  ASSERT_TRUE(untrusted);
  auto refused = untrusted->Head("capsules/x.zip");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().reason(), ToString(ErrorKind::kUnreachable))
      << refused.status().message();
  EXPECT_THAT(refused.status().message(), HasSubstr("cannot reach " + peer->endpoint()));

  config::Config cfg;
  cfg.s3_endpoint = peer->endpoint();
  cfg.s3_bucket = S3Peer::kBucket;
  cfg.s3_access_key = Secret(peer->access_key());
  cfg.s3_secret_key = Secret(peer->secret_key());
  cfg.s3_region = peer->region();
  cfg.s3_ca_file = peer->ca_file();
  auto store = MustOpen(S3OptionsFromConfig(cfg));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->PutBytes("capsules/tls.zip", "over https"));
  EXPECT_EQ(store->GetBytes("capsules/tls.zip").value(), "over https");
  std::string body;
  EXPECT_EQ(CurlStatus(store->PresignGet("capsules/tls.zip", 600, std::time(nullptr)).value(),
                       &body, peer->ca_file()),
            200);
  EXPECT_EQ(body, "over https");
}

// --- Failures without the peer -----------------------------------------------------------

TEST(S3StoreFailures, UnreachableEndpointIsRetriedThenNamed) {
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(support::FreePort());
  S3Options o = BaseOptions(endpoint);
  o.max_attempts = 2;
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  auto put = store->PutBytes("capsules/x.zip", "x");
  ASSERT_FALSE(put);
  EXPECT_EQ(put.status().reason(), ToString(ErrorKind::kUnreachable));
  EXPECT_THAT(put.status().message(), HasSubstr("cannot reach " + endpoint + ": "));
  EXPECT_THAT(put.status().message(), HasSubstr("after 2 attempts"));
}

TEST(S3StoreFailures, StalledServerIsATimeout) {
  // Listens but never accepts: the kernel completes the handshake, then nothing is answered.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  S3Options o = BaseOptions("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  o.max_attempts = 1;
  o.low_speed_time = std::chrono::seconds(1);
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  auto head = store->Head("capsules/x.zip");
  ::close(fd);
  ASSERT_FALSE(head);
  EXPECT_EQ(head.status().reason(), ToString(ErrorKind::kTimeout));
  EXPECT_THAT(head.status().message(), HasSubstr("timed out talking to http://127.0.0.1:"));
}

constexpr const char* kSlowDown =
    "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Please reduce your request "
    "rate.</Message></Error>";

TEST(S3StoreFailures, ServerErrorsAndThrottlingAreRetried) {
  ScriptedServer server({{503, kSlowDown, ""},
                         {500, "<Error><Code>InternalError</Code></Error>", ""},
                         {200, "hello", ""}});
  auto store = MustOpen(BaseOptions(server.endpoint()));
  ASSERT_TRUE(store);
  auto got = store->GetBytes("k");
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(got.value(), "hello");
  EXPECT_EQ(server.received().size(), 3u);
}

TEST(S3StoreFailures, PersistentServerErrorsGiveUpWithTheCode) {
  ScriptedServer server({{503, kSlowDown, ""}, {503, kSlowDown, ""}, {503, kSlowDown, ""}});
  auto store = MustOpen(BaseOptions(server.endpoint()));
  ASSERT_TRUE(store);
  auto got = store->GetBytes("k");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.status().reason(), ToString(ErrorKind::kServer));
  EXPECT_THAT(got.status().message(),
              HasSubstr("HTTP 503 SlowDown: Please reduce your request rate."));
  EXPECT_THAT(got.status().message(), HasSubstr("after 3 attempts"));
  EXPECT_EQ(server.received().size(), 3u);
}

TEST(S3StoreFailures, ClientErrorsAreNotRetried) {
  ScriptedServer server(
      {{403, "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>", ""}});
  auto store = MustOpen(BaseOptions(server.endpoint()));
  ASSERT_TRUE(store);
  auto got = store->GetBytes("k");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.status().reason(), ToString(ErrorKind::kAccessDenied));
  EXPECT_THAT(got.status().message(), HasSubstr("s3:ListBucket"));
  EXPECT_EQ(server.received().size(), 1u);
}

TEST(S3StoreFailures, FailedMultipartUploadIsAborted) {
  ScriptedServer server({
      {404, "", ""},                                       // HEAD
      {404, "<Error><Code>NoSuchKey</Code></Error>", ""},  // ranged GET probe
      {200,
       "<InitiateMultipartUploadResult><UploadId>up-1</UploadId>"
       "</InitiateMultipartUploadResult>",
       ""},                                                  // POST ?uploads
      {200, "", "ETag: \"p1\"\r\n"},                         // part 1
      {400, "<Error><Code>InvalidPart</Code></Error>", ""},  // part 2: not retried
      {204, "", ""},                                         // DELETE ?uploadId
  });
  S3Options o = BaseOptions(server.endpoint());
  o.multipart_threshold = 10;
  o.part_size = 8;
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  auto put = store->PutBytes("k", "0123456789abcdef!");
  ASSERT_FALSE(put);
  EXPECT_THAT(put.status().message(), HasSubstr("InvalidPart"));
  const auto got = server.received();
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[0].request_line, "HEAD /forge-test/k HTTP/1.1");
  EXPECT_EQ(got[2].request_line, "POST /forge-test/k?uploads= HTTP/1.1");
  EXPECT_EQ(got[3].request_line, "PUT /forge-test/k?partNumber=1&uploadId=up-1 HTTP/1.1");
  EXPECT_EQ(got[3].body, "01234567");
  EXPECT_EQ(got[5].request_line, "DELETE /forge-test/k?uploadId=up-1 HTTP/1.1");
}

TEST(S3StoreFailures, CompleteThatFailsWithStatus200IsRetried) {
  const std::string error200 = "<Error><Code>InternalError</Code></Error>";
  ScriptedServer server({
      {404, "", ""},
      {404, "<Error><Code>NoSuchKey</Code></Error>", ""},
      {200, "<UploadId>up-2</UploadId>", ""},
      {200, "", "ETag: \"p1\"\r\n"},
      {200, "", "ETag: \"p2\"\r\n"},
      {200, error200, ""},  // CompleteMultipartUpload failed after all
      {200, "<CompleteMultipartUploadResult><ETag>\"x-2\"</ETag></CompleteMultipartUploadResult>",
       ""},
  });
  S3Options o = BaseOptions(server.endpoint());
  o.multipart_threshold = 10;
  o.part_size = 8;
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  auto put = store->PutBytes("k", "0123456789abcdef");
  ASSERT_TRUE(put) << put.status().message();
  const auto got = server.received();
  ASSERT_EQ(got.size(), 7u);
  EXPECT_EQ(got[6].body,
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;p1&quot;</ETag>"
            "</Part><Part><PartNumber>2</PartNumber><ETag>&quot;p2&quot;</ETag></Part>"
            "</CompleteMultipartUpload>");
}

TEST(S3StoreFailures, RequestsAreSignedAndVirtualHostedWhenAsked) {
  ScriptedServer server({{200, "", "Content-Length: 0\r\n"}});
  S3Options o = BaseOptions("http://localhost:" + std::to_string(server.port()));
  o.addressing = config::S3Addressing::kVirtual;
  o.clock = [] { return std::time_t{1369353600}; };
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  (void)store->GetBytes("a b.txt");
  const auto got = server.received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].request_line, "GET /a%20b.txt HTTP/1.1");
  EXPECT_THAT(got[0].headers,
              HasSubstr("Host: forge-test.localhost:" + std::to_string(server.port())));
  EXPECT_THAT(got[0].headers, HasSubstr("x-amz-date: 20130524T000000Z"));
  EXPECT_THAT(got[0].headers,
              HasSubstr("authorization: AWS4-HMAC-SHA256 Credential=S3RVER/20130524/us-east-1/s3/"
                        "aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                        "Signature="));
}

TEST(S3StoreOptions, BadSettingsAreRefusedWithoutEchoingThem) {
  S3Options o = BaseOptions("http://user:hunter2@127.0.0.1:9000");
  auto store = OpenS3(o);
  ASSERT_FALSE(store);
  EXPECT_THAT(store.status().message(), Not(HasSubstr("hunter2")));
  o = BaseOptions("ftp://127.0.0.1");
  EXPECT_FALSE(OpenS3(o));
  o = BaseOptions("http://127.0.0.1:9000");
  o.bucket = "";
  EXPECT_THAT(OpenS3(o).status().message(), HasSubstr("FORGE_S3_BUCKET"));
  o = BaseOptions("http://127.0.0.1:9000");
  o.credentials.secret_access_key = Secret();
  EXPECT_THAT(OpenS3(o).status().message(), HasSubstr("FORGE_S3_SECRET_KEY"));
}

TEST(S3StoreOptions, PresignedUrlsCarryTheKeyIdButNeverTheSecret) {
  S3Options o = BaseOptions("https://s3.example.com");
  o.credentials = {Secret("AKIAPRESIGNTEST"), Secret("presign-secret/value+1")};
  auto store = MustOpen(o);
  ASSERT_TRUE(store);
  const std::string url = store->PresignGet("capsules/a.zip", 3600, 1369353600).value();
  EXPECT_THAT(url, HasSubstr("X-Amz-Credential=AKIAPRESIGNTEST%2F20130524%2F"));
  EXPECT_THAT(url, Not(HasSubstr("presign-secret")));
  EXPECT_THAT(url, Not(HasSubstr("presign-secret%2Fvalue")));
}

TEST(S3StoreOptions, FactoryPicksS3WhenAnEndpointIsSet) {
  config::Config cfg;
  cfg.s3_endpoint = "http://127.0.0.1:9000";
  cfg.s3_bucket = "b";
  cfg.s3_access_key = Secret("AKIAFACTORYTEST");
  cfg.s3_secret_key = Secret("factory-secret");
  auto store = Open(cfg);
  ASSERT_TRUE(store) << store.status().message();
  EXPECT_EQ(store.value()->Describe(),
            "s3 bucket \"b\" at http://127.0.0.1:9000 (region us-east-1, path-style addressing)");
  cfg.s3_endpoint = "";
  cfg.storage_root = "/srv/forge/";
  EXPECT_EQ(Open(cfg).value()->Describe(), "filesystem store at /srv/forge/objects");
}

}  // namespace
}  // namespace starforge::objstore
