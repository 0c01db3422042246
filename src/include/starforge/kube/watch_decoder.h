// Splits a watch response body into its JSON objects as bytes arrive. The server writes one
// object per line, but chunk boundaries fall anywhere (HTTP chunking), so the decoder scans for
// complete top-level objects itself (tracking strings and escapes) and never relies on newlines.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace starforge::kube {

class WatchDecoder {
 public:
  // Appends `bytes` and calls `on_object` for every complete top-level JSON value, in order.
  // Stops early (and returns false) when `on_object` returns false. Throws std::runtime_error on
  // malformed JSON or when a single object exceeds `max_object_bytes`.
  bool Feed(std::string_view bytes, const std::function<bool(nlohmann::json)>& on_object);

  // Bytes of an incomplete object still buffered (non-zero at end of stream = truncated event).
  size_t pending() const { return buffer_.size(); }

  size_t max_object_bytes = size_t{64} << 20;

 private:
  std::string buffer_;
  size_t scanned_ = 0;  // bytes of buffer_ already scanned in the current object
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
};

}  // namespace starforge::kube
