// Watch streams (?watch=true): synthetic ADDED events for the current state when no
// resourceVersion (or "0") is given, then events from the history after the cursor; BOOKMARKs
// when allowed; the stream ends at timeoutSeconds, on a forced close, or with an ERROR event
// (410 Expired) when the requested resourceVersion is older than the history.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>

#include "selectors.h"
#include "server.h"

namespace kubesim {

using nlohmann::json;

namespace {

struct WatchState {
  uint64_t cursor = 0;
  uint64_t epoch = 0;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::steady_clock::time_point next_bookmark;
  std::vector<std::string> pending;  // encoded lines to write first
  bool expired = false;
  bool done = false;
  // as=Table: each event's object is a Table of one row; only the first carries the columns.
  std::optional<table::Options> as_table;
  table::Printer printer;
};

std::string Line(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

// One event line; a Status (ERROR) stays a Status, a BOOKMARK becomes a Table without rows.
std::string Encode(WatchState& st, const std::string& type, const json& object) {
  if (!st.as_table || type == "ERROR") return Line(type, object);
  const int64_t now = std::time(nullptr);
  json t = type == "BOOKMARK"
               ? table::ToTable(st.printer, {}, object["metadata"], *st.as_table, now)
               : table::ToTable(st.printer, {object}, nullptr, *st.as_table, now);
  st.as_table->no_headers = true;
  return Line(type, t);
}

// The line of a history event for a plain JSON watch: the same bytes as Line(type, Present(r,
// object)), with the object's encoding made once per event and resource and shared by every
// watch (nlohmann's objects keep keys sorted: "object" before "type").
std::string HistoryLine(const std::string& type, const WatchEvent& e, const ResourceInfo& r) {
  const std::string* enc = nullptr;
  for (const auto& [key, text] : e.encoded) {
    if (key == &r) enc = &text;
  }
  if (enc == nullptr) {
    e.encoded.emplace_back(&r, Present(r, e.object).dump());
    enc = &e.encoded.back().second;
  }
  std::string line;
  line.reserve(enc->size() + type.size() + 24);
  line += "{\"object\":";
  line += *enc;
  line += ",\"type\":";
  line += json(type).dump();
  line += "}\n";
  return line;
}

}  // namespace

void Server::Watch(const httplib::Request& req, httplib::Response& res, const Target& t,
                   int close_after_ms) {
  const ResourceInfo* r = t.r;
  auto ls = std::make_shared<LabelSelector>(LabelSelector::Parse(
      req.has_param("labelSelector") ? req.get_param_value("labelSelector") : ""));
  auto fs = std::make_shared<FieldSelector>(FieldSelector::Parse(
      req.has_param("fieldSelector") ? req.get_param_value("fieldSelector") : "", *r));
  const std::string rv_text =
      req.has_param("resourceVersion") ? req.get_param_value("resourceVersion") : "";
  const bool bookmarks = BoolParam(req, "allowWatchBookmarks");
  int64_t timeout_s = 1800;
  if (req.has_param("timeoutSeconds")) {
    try {
      timeout_s = std::stoll(req.get_param_value("timeoutSeconds"));
    } catch (const std::exception&) {
      throw BadRequest("invalid timeoutSeconds");
    }
  }
  uint64_t start_rv = 0;
  if (!rv_text.empty() && rv_text != "0") {
    try {
      start_rv = std::stoull(rv_text);
    } catch (const std::exception&) {
      throw BadRequest("invalid resource version: " + rv_text);
    }
  }
  const std::string ns = t.ns;
  auto st = std::make_shared<WatchState>();
  st->as_table = TableRequested(req, t);
  if (st->as_table) st->printer = PrinterFor(*r);
  const auto started = std::chrono::steady_clock::now();
  st->deadline = started + std::chrono::seconds(timeout_s);
  if (close_after_ms >= 0) {
    st->deadline = std::min(st->deadline, started + std::chrono::milliseconds(close_after_ms));
  }
  st->next_bookmark = started + std::chrono::milliseconds(opts_.bookmark_interval_ms);
  {
    std::lock_guard<std::mutex> lock(store_.mu);
    st->epoch = store_.WatchEpoch();
    if (start_rv == 0) {
      std::string lkey;
      std::string lvalue;
      const std::vector<const json*> objs = ls->Equality(&lkey, &lvalue)
                                                ? store_.ListByLabel(r->storage, ns, lkey, lvalue)
                                                : store_.List(r->storage, ns);
      for (const json* obj : objs) {
        if (ls->Matches(*obj) && fs->Matches(*obj))
          st->pending.push_back(Encode(*st, "ADDED", Present(*r, *obj)));
      }
      st->cursor = store_.CurrentRv();
    } else if (start_rv < store_.OldestRv()) {
      ApiError e = ExpiredError("too old resource version: " + std::to_string(start_rv) + " (" +
                                std::to_string(store_.OldestRv() + 1) + ")");
      if (faults_.ExpiredAsHttp()) throw e;
      st->pending.push_back(Line("ERROR", StatusJson(e)));
      st->expired = true;
    } else {
      st->cursor = start_rv;
    }
  }
  auto matches = [ls, fs, ns](const json& obj) {
    if (obj.is_null()) return false;
    if (!ns.empty() && obj["metadata"].value("namespace", "") != ns) return false;
    return ls->Matches(obj) && fs->Matches(obj);
  };
  res.status = 200;
  res.set_chunked_content_provider(
      "application/json", [this, st, r, matches, bookmarks](size_t, httplib::DataSink& sink) {
        auto write_all = [&](std::vector<std::string>& lines) {
          for (const auto& l : lines) {
            if (!sink.write(l.data(), l.size())) return false;
          }
          lines.clear();
          return true;
        };
        if (!st->pending.empty()) {
          if (!write_all(st->pending)) return false;
          if (st->expired) {
            sink.done();
            return true;
          }
          return true;
        }
        std::vector<std::string> out;
        {
          std::unique_lock<std::mutex> lock(store_.mu);
          while (true) {
            const auto now = std::chrono::steady_clock::now();
            if (store_.stopping || now >= st->deadline || store_.WatchEpoch() != st->epoch) {
              lock.unlock();
              sink.done();
              return true;
            }
            if (st->cursor < store_.OldestRv()) {
              ApiError e = ExpiredError("too old resource version: " + std::to_string(st->cursor) +
                                        " (" + std::to_string(store_.OldestRv() + 1) + ")");
              out.push_back(Line("ERROR", StatusJson(e)));
              st->expired = true;
              break;
            }
            const auto& h = store_.History();
            auto it = std::upper_bound(h.begin(), h.end(), st->cursor,
                                       [](uint64_t rv, const WatchEvent& e) { return rv < e.rv; });
            for (; it != h.end(); ++it) {
              st->cursor = it->rv;
              if (it->storage != r->storage) continue;
              const bool now_match = it->type != "DELETED" && matches(it->object);
              const bool was_match = matches(it->old);
              std::string type;
              if (it->type == "DELETED") {
                if (was_match) type = "DELETED";
              } else if (now_match && was_match) {
                type = "MODIFIED";
              } else if (now_match) {
                type = "ADDED";
              } else if (was_match) {
                type = "DELETED";
              }
              if (type.empty()) continue;
              out.push_back(st->as_table ? Encode(*st, type, Present(*r, it->object))
                                         : HistoryLine(type, *it, *r));
            }
            if (!out.empty()) break;
            if (bookmarks && now >= st->next_bookmark) {
              st->next_bookmark = now + std::chrono::milliseconds(opts_.bookmark_interval_ms);
              json bm = {{"kind", r->kind},
                         {"apiVersion", r->ApiVersion()},
                         {"metadata", {{"resourceVersion", std::to_string(st->cursor)}}}};
              out.push_back(Encode(*st, "BOOKMARK", bm));
              break;
            }
            auto wake = std::min(st->deadline, now + std::chrono::milliseconds(500));
            if (bookmarks) wake = std::min(wake, st->next_bookmark);
            store_.cv.wait_until(lock, wake);
          }
        }
        if (!write_all(out)) return false;
        if (st->expired) sink.done();
        return true;
      });
}

}  // namespace kubesim
