// The resubmit cache: same inputs → remembered digest; any change → a different key.
#include "starforge/capsule/cache.h"

#include <gtest/gtest.h>

#include <sys/time.h>

#include <chrono>
#include <thread>

#include "capsule_test_support.h"
#include "starforge/capsule/capsule.h"

namespace starforge::capsule {
namespace {

using testing::MiniSpec;
using testing::TempDir;
using testing::Write;
namespace fs = std::filesystem;

TEST(DigestCache, KeyFollowsEveryInput) {
  TempDir t;
  Write(t / "code/a.py", "a");
  Write(t / "code/b.py", "b");
  DigestCache cache(t / "cache");
  const auto files = Collect(t / "code").files;
  const Fingerprint base = cache.Compute(files, MiniSpec(), "runner");
  EXPECT_EQ(base.key.size(), 64u);
  EXPECT_TRUE(base.racy);  // just written
  EXPECT_EQ(cache.Compute(files, MiniSpec(), "runner").key, base.key);
  EXPECT_NE(cache.Compute(files, MiniSpec("other"), "runner").key, base.key);
  EXPECT_NE(cache.Compute(files, MiniSpec(), "runner2").key, base.key);
  // Same size and inode: only the times tell (after a pause longer than the clock's tick).
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  Write(t / "code/a.py", "A");
  EXPECT_NE(cache.Compute(Collect(t / "code").files, MiniSpec(), "runner").key, base.key);
  fs::permissions(t / "code/b.py", fs::perms(0755));
  const auto with_x = Collect(t / "code").files;
  const std::string x_key = cache.Compute(with_x, MiniSpec(), "runner").key;
  auto renamed = with_x;
  renamed[0].path = "c.py";
  EXPECT_NE(cache.Compute(renamed, MiniSpec(), "runner").key, x_key);
  renamed[0].source = t / "missing";
  EXPECT_EQ(cache.Compute(renamed, MiniSpec(), "runner").key, "");
}

// `forge submit` looks up with the walk's stats and remembers only when a fresh stat after the
// build gives the same key: both must agree on an unchanged tree, and differ on a changed one.
TEST(DigestCache, TheWalksStatsGiveTheSameKeyAsAFreshStat) {
  TempDir t;
  Write(t / "code/a.py", "a");
  Write(t / "code/b.py", "b");
  DigestCache cache(t / "cache");
  auto files = Collect(t / "code").files;
  ASSERT_TRUE(files[0].has_stat);
  EXPECT_EQ(cache.FromWalk(files, MiniSpec(), "r").key, cache.Compute(files, MiniSpec(), "r").key);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  Write(t / "code/a.py", "A");
  EXPECT_NE(cache.FromWalk(files, MiniSpec(), "r").key, cache.Compute(files, MiniSpec(), "r").key);
  // A list not from Collect (no identity) is stat'ed.
  auto listed = Collect(t / "code").files;
  for (auto& f : listed)
    f.has_stat = false;
  EXPECT_EQ(cache.FromWalk(listed, MiniSpec(), "r").key,
            cache.Compute(listed, MiniSpec(), "r").key);
}

TEST(DigestCache, RemembersOnlyWhenNotRacy) {
  TempDir t;
  Write(t / "code/a.py", "a");
  DigestCache cache(t / "cache");
  const auto files = Collect(t / "code").files;
  const std::string digest(64, 'e');
  Fingerprint fresh = cache.Compute(files, MiniSpec(), "r");
  ASSERT_TRUE(fresh.racy);
  cache.Remember(fresh, digest);
  EXPECT_FALSE(cache.Lookup(fresh));
  // Once the files are older than the clock's granularity can hide, the digest is kept.
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  Fingerprint settled = cache.Compute(files, MiniSpec(), "r");
  ASSERT_FALSE(settled.racy);
  EXPECT_EQ(settled.key, fresh.key);
  cache.Remember(settled, digest);
  EXPECT_EQ(cache.Lookup(settled), digest);
  cache.Remember(settled, "not-a-digest");
  EXPECT_EQ(cache.Lookup(settled), digest);
  Write(t / "code/a.py", "b");
  EXPECT_FALSE(cache.Lookup(cache.Compute(Collect(t / "code").files, MiniSpec(), "r")));
}

}  // namespace
}  // namespace starforge::capsule
