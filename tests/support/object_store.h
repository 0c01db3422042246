// An object store that refuses every call ("not in this test"): a test derives from it and
// overrides only the calls its code makes.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "starforge/objstore/object_store.h"

namespace starforge::support {

class RefusingObjectStore : public objstore::ObjectStore {
 public:
  StatusOr<objstore::PutOutcome> PutFile(const std::string&, const std::string&,
                                         const objstore::Progress&) override {
    return Refused();
  }
  StatusOr<objstore::PutOutcome> PutBytes(const std::string&, std::string_view,
                                          const objstore::Progress&) override {
    return Refused();
  }
  StatusOr<std::optional<objstore::ObjectInfo>> Head(const std::string&) override {
    return Refused();
  }
  StatusOr<int64_t> GetFile(const std::string&, const std::string&,
                            const objstore::Progress&) override {
    return Refused();
  }
  StatusOr<std::string> GetBytes(const std::string&) override { return Refused(); }
  StatusOr<std::string> PresignGet(const std::string&, int64_t, std::time_t) override {
    return Refused();
  }
  std::string Describe() const override { return "refusing object store"; }

 protected:
  static Status Refused() {
    return objstore::Failure(objstore::ErrorKind::kInvalid, "not in this test");
  }
};

}  // namespace starforge::support
