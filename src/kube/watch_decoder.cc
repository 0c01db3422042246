// Incremental JSON object-stream splitting for watch bodies.
#include "starforge/kube/watch_decoder.h"

#include <stdexcept>

namespace starforge::kube {

bool WatchDecoder::Feed(std::string_view bytes,
                        const std::function<bool(nlohmann::json)>& on_object) {
  buffer_.append(bytes);
  size_t start = 0;  // where the current object begins in buffer_
  size_t i = scanned_;
  bool keep_going = true;
  for (; i < buffer_.size() && keep_going; ++i) {
    char c = buffer_[i];
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (depth_ == 0) {
      // Between objects only whitespace is allowed; skip it so `start` lands on the '{'.
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        start = i + 1;
        continue;
      }
      if (c != '{') {
        throw std::runtime_error("malformed watch stream: expected '{' between events");
      }
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) {
        nlohmann::json obj = nlohmann::json::parse(buffer_.begin() + static_cast<long>(start),
                                                   buffer_.begin() + static_cast<long>(i) + 1,
                                                   nullptr, /*allow_exceptions=*/false);
        if (obj.is_discarded()) throw std::runtime_error("malformed watch event: invalid JSON");
        start = i + 1;
        keep_going = on_object(std::move(obj));
      }
    }
  }
  buffer_.erase(0, start);
  scanned_ = i - start;
  if (buffer_.size() > max_object_bytes) {
    throw std::runtime_error("malformed watch stream: event larger than the limit");
  }
  return keep_going;
}

}  // namespace starforge::kube
