// playground::LocalBackend's refusals: the command missing (named with its setting), no sandbox.
// Running a server is tests/e2e/playground_local_test.sh (bubblewrap and the vLLM emulator).
#include "starforge/playground/local_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "support/temp_dir.h"

namespace starforge::playground {
namespace {

using ::testing::HasSubstr;

TEST(LocalBackend, AMissingCommandIsRefusedNamingTheSetting) {
  LocalBackendOptions o;
  o.config.local_vllm_command = "vllm";
  o.path = "/nonexistent-dir";
  o.sandbox = fleet::LocalSandbox{};
  LocalBackend b(o);
  EXPECT_EQ(b.Command(), "");
  Spec spec;
  spec.gpus = 0;
  const fleet::Admission a = b.Admit(store::Playground{}, spec);
  EXPECT_FALSE(a.possible);
  EXPECT_EQ(a.field, "fleet");
  EXPECT_THAT(a.message, HasSubstr("FORGE_LOCAL_VLLM_COMMAND"));
  EXPECT_THAT(a.message, HasSubstr("not found"));
  EXPECT_EQ(b.Unavailable(), a.message);  // what GET /api/v1/playgrounds says of the fleet
  const Status s = b.Create(store::Playground{}, spec);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.retryable());
}

TEST(LocalBackend, AFoundCommandWithoutASandboxIsRefusedSayingWhy) {
  support::TempDir dir;
  const std::string vllm = (dir.path() / "vllm").string();
  std::ofstream(vllm) << "#!/bin/sh\n";
  std::filesystem::permissions(vllm, std::filesystem::perms::owner_all);
  LocalBackendOptions o;
  o.config.local_vllm_command = "vllm";
  o.path = "/nonexistent-dir:" + dir.path().string();
  o.sandbox_error = "bubblewrap (bwrap) is not installed";
  LocalBackend b(o);
  EXPECT_EQ(b.Command(), vllm);
  const fleet::Admission a = b.Admit(store::Playground{}, Spec{});
  EXPECT_FALSE(a.possible);
  EXPECT_THAT(a.message, HasSubstr("sandbox"));
  EXPECT_THAT(a.message, HasSubstr("bubblewrap (bwrap) is not installed"));
  EXPECT_EQ(b.Unavailable(), a.message);
  // An absolute command is taken as is.
  o.config.local_vllm_command = vllm;
  o.path = "";
  EXPECT_EQ(LocalBackend(o).Command(), vllm);
  // With a sandbox too: it can run playgrounds.
  o.sandbox = fleet::LocalSandbox{};
  EXPECT_EQ(LocalBackend(o).Unavailable(), "");
  EXPECT_EQ(UnavailableBackend("kuberay", "needs S3").Unavailable(), "needs S3");
}

}  // namespace
}  // namespace starforge::playground
