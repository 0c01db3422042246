// The capsule's zip container at its limits: what Python's zipfile (Ray's unzip) reads back.
#include "../../src/capsule/zip_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "capsule_test_support.h"

namespace starforge::capsule::internal {
namespace {

using testing::Python;
using testing::Quote;
using testing::Shell;
using testing::TempDir;

// More than 65 535 entries need the zip64 end records; Python must see every entry.
TEST(ZipWriter, SixtyFiveThousandEntriesAndMoreUseZip64EndRecords) {
  TempDir t;
  const std::string path = (t / "many.zip").string();
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  ASSERT_GE(fd.get(), 0);
  ZipWriter zip(fd.get());
  constexpr int kEntries = 70000;
  for (int i = 0; i < kEntries; ++i) {
    const std::string data = std::to_string(i);
    ZipEntryInfo e;
    e.name = "d/" + std::to_string(i);
    std::vector<uint8_t> bytes;
    EncodeEntry(nullptr, std::vector<uint8_t>(data.begin(), data.end()), false, &e, &bytes);
    zip.Begin(e);
    zip.Data(bytes.data(), bytes.size());
  }
  ASSERT_TRUE(zip.Finish()) << zip.error();
  support::Output o = Shell(
      "python3 -c 'import sys, zipfile\n"
      "z = zipfile.ZipFile(sys.argv[1])\n"
      "assert z.testzip() is None\n"
      "print(len(z.namelist()), z.read(\"d/69999\").decode())' " +
      Quote(path));
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(o.out, "70000 69999\n");
}

}  // namespace
}  // namespace starforge::capsule::internal
