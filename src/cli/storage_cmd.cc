// `forge storage put|get|head|presign`: the configured object store (S3, or the filesystem
// store under the storage root) by hand.
#include <unistd.h>

#include <ctime>
#include <iostream>
#include <memory>

#include "command.h"
#include "starforge/cli/forge.h"
#include "starforge/objstore/object_store.h"
#include "starforge/objstore/progress.h"
#include "starforge/objstore/sigv4.h"

namespace starforge::cli {

namespace {

// Presigned URLs default to one day: long enough for a job's pre-running deadline and a late
// node joining, short enough that a leaked URL soon stops working. Jobs choose their own.
constexpr int64_t kDefaultPresignSeconds = 86400;

struct Options {
  std::string file;
  std::string key;
  int64_t expires = kDefaultPresignSeconds;
  std::string now;
};

std::unique_ptr<objstore::ObjectStore> OpenStore(Context& c, int* exit_code) {
  config::Config cfg;
  if (!LoadConfig(c, &cfg)) {
    *exit_code = kExitUsage;
    return nullptr;
  }
  auto store = objstore::Open(cfg);
  if (!store) {
    c.err << "forge: " << store.status().message() << "\n";
    *exit_code = kExitUsage;
    return nullptr;
  }
  return std::move(store).value();
}

int Fail(Context& c, const std::string& what, const Status& e) {
  c.err << "forge: " << what << ": " << e.message() << "\n";
  return kExitInvalid;
}

// A progress meter only when a person is watching: the real stderr, on a terminal.
std::unique_ptr<objstore::ProgressMeter> MeterFor(Context& c, const std::string& label) {
  if (!StderrIsTerminal(c)) return nullptr;
  return std::make_unique<objstore::ProgressMeter>(c.err, label);
}

objstore::Progress Feed(objstore::ProgressMeter* meter) {
  if (!meter) return {};
  return [meter](int64_t done, int64_t total) { meter->Update(done, total); };
}

}  // namespace

void RegisterStorageCommands(Registry& registry) {
  auto opts = std::make_shared<Options>();
  CLI::App* storage = registry.app().add_subcommand(
      "storage", "Object storage for capsules (S3 when FORGE_S3_ENDPOINT is set)");
  storage->require_subcommand(1);

  CLI::App* put = registry.Add(
      storage, "put", "Upload FILE as KEY unless KEY already exists", [opts](Context& c) {
        int code = kExitOk;
        auto store = OpenStore(c, &code);
        if (!store) return code;
        auto meter = MeterFor(c, "put " + opts->key);
        auto r = store->PutFile(opts->key, opts->file, Feed(meter.get()));
        if (meter) meter->Finish();
        if (!r) return Fail(c, "storage put", r.status());
        if (r->already_present) {
          c.out << opts->key << ": already stored (" << r->size << " bytes); 0 bytes uploaded\n";
        } else {
          c.out << opts->key << ": " << r->bytes_uploaded << " bytes uploaded to "
                << store->Describe() << "\n";
        }
        return kExitOk;
      });
  put->add_option("FILE", opts->file, "File to upload")->required();
  put->add_option("KEY", opts->key, "Object key, e.g. capsules/sha256-<hex>.zip")->required();

  CLI::App* get = registry.Add(storage, "get", "Download KEY to FILE", [opts](Context& c) {
    int code = kExitOk;
    auto store = OpenStore(c, &code);
    if (!store) return code;
    auto meter = MeterFor(c, "get " + opts->key);
    auto r = store->GetFile(opts->key, opts->file, Feed(meter.get()));
    if (meter) meter->Finish();
    if (!r) return Fail(c, "storage get", r.status());
    c.out << opts->key << ": " << r.value() << " bytes written to " << opts->file << "\n";
    return kExitOk;
  });
  get->add_option("KEY", opts->key, "Object key")->required();
  get->add_option("FILE", opts->file, "Where to write it")->required();

  CLI::App* head =
      registry.Add(storage, "head", "Print KEY's size and ETag; exit 1 when it does not exist",
                   [opts](Context& c) {
                     int code = kExitOk;
                     auto store = OpenStore(c, &code);
                     if (!store) return code;
                     auto r = store->Head(opts->key);
                     if (!r) return Fail(c, "storage head", r.status());
                     if (!r.value()) {
                       c.err << "forge: object \"" << opts->key << "\" does not exist in "
                             << store->Describe() << "\n";
                       return kExitInvalid;
                     }
                     c.out << "key: " << opts->key << "\nsize: " << r.value()->size << "\n";
                     if (!r.value()->etag.empty()) c.out << "etag: " << r.value()->etag << "\n";
                     return kExitOk;
                   });
  head->add_option("KEY", opts->key, "Object key")->required();

  CLI::App* presign = registry.Add(
      storage, "presign", "Print a URL that lets anyone GET KEY until it expires",
      [opts](Context& c) {
        std::time_t now = std::time(nullptr);
        if (!opts->now.empty()) {
          std::optional<std::time_t> parsed = objstore::sigv4::ParseAmzDate(opts->now);
          if (!parsed) {
            c.err << "forge: --now: expected YYYYMMDDTHHMMSSZ (UTC), e.g. 20130524T000000Z, got \""
                  << opts->now << "\"\n";
            return kExitUsage;
          }
          now = *parsed;
        }
        int code = kExitOk;
        auto store = OpenStore(c, &code);
        if (!store) return code;
        auto r = store->PresignGet(opts->key, opts->expires, now);
        if (!r) return Fail(c, "storage presign", r.status());
        c.out << r.value() << "\n";
        return kExitOk;
      });
  presign->add_option("KEY", opts->key, "Object key")->required();
  presign->add_option("--expires", opts->expires,
                      "Seconds the URL stays valid (1-604800, the SigV4 maximum; default 86400)");
  presign->add_option("--now", opts->now,
                      "Signing time as YYYYMMDDTHHMMSSZ (UTC) instead of the clock, for a "
                      "reproducible URL");
}

}  // namespace starforge::cli
