// ObjectStore over S3 (AWS or any S3-compatible server) with libcurl and our SigV4 signer.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include "starforge/config/config.h"
#include "starforge/objstore/object_store.h"
#include "starforge/objstore/sigv4.h"

namespace starforge::objstore {

struct S3Options {
  std::string endpoint;  // http(s)://host[:port][/base], no credentials, query or fragment
  std::string bucket;
  sigv4::Credentials credentials;
  std::string region = "us-east-1";
  config::S3Addressing addressing = config::S3Addressing::kPath;
  std::string ca_file;  // PEM bundle for an https endpoint ("" = the system trust store)

  // Objects larger than this go up in parts of `part_size` (real S3 wants parts >= 5 MiB).
  int64_t multipart_threshold = int64_t{64} << 20;
  int64_t part_size = int64_t{16} << 20;

  // Transport errors, timeouts, 5xx and SlowDown are retried up to `max_attempts` in all.
  int max_attempts = 5;
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_cap{10000};
  std::chrono::milliseconds connect_timeout{10000};
  // A transfer slower than `low_speed_bytes` per second for `low_speed_time` is a timeout.
  // There is no overall deadline: a large upload on a slow link is legitimate.
  int64_t low_speed_bytes = 1024;
  std::chrono::seconds low_speed_time{30};

  // The signing clock (tests pin it); default: the system clock.
  std::function<std::time_t()> clock;
};

// Settings from FORGE_S3_*; the tuning fields keep their defaults.
S3Options S3OptionsFromConfig(const config::Config& cfg);

// Checks `options` (endpoint shape, bucket, credentials) and makes the store. Makes no request.
// The store serialises its own requests; it is safe to share between threads.
StatusOr<std::unique_ptr<ObjectStore>> OpenS3(S3Options options);

}  // namespace starforge::objstore
