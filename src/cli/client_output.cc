#include "starforge/cli/client_output.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>

#include "starforge/capsule/capsule.h"
#include "starforge/common/json_read.h"

namespace starforge::cli {

namespace {

using nlohmann::json;

constexpr const char* kNone = "<none>";
constexpr std::string_view kReset = "\033[0m";

// One line: a message with newlines or tabs would break the table's columns.
std::string OneLine(std::string text) {
  for (char& ch : text) {
    if (ch == '\n' || ch == '\r' || ch == '\t') ch = ' ';
  }
  return text;
}

using json_read::Str;

std::string OrNone(const std::string& text) {
  return text.empty() ? kNone : OneLine(text);
}

// A word as a user would type it: quoted only when the shell would need it.
std::string DisplayWord(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                              "0123456789_./:=,@%+-") == std::string::npos)
    return word;
  std::string out = "'";
  for (char ch : word) {
    if (ch == '\'')
      out += "'\\''";
    else
      out.push_back(ch);
  }
  return out + "'";
}

// "2026-11-29T12:00:00.123Z (5m ago)", or "<none>".
std::string TimeAndAge(const json& object, const char* key, int64_t now_ms) {
  const std::string text = Str(object, key);
  if (text.empty()) return kNone;
  const auto t = ParseRfc3339(text);
  return t ? text + " (" + FormatAge(now_ms - *t) + " ago)" : text;
}

// Every scalar leaf of `value` under a dotted key, in document order.
void Flatten(const json& value, const std::string& prefix,
             std::vector<std::pair<std::string, json>>* out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [k, v] : value.items())
      Flatten(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out->emplace_back(prefix, value);
}

// A JSON key as a column header: "cpusInUse" → "CPUS IN USE", "cpus.total" → "CPUS.TOTAL".
std::string Header(const std::string& key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(key[i]);
    if (std::isupper(ch) && i > 0 && std::islower(static_cast<unsigned char>(key[i - 1])))
      out.push_back(' ');
    out.push_back(static_cast<char>(std::toupper(ch)));
  }
  return out;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Indents every line of `block` by `n` spaces.
std::string Indent(const std::string& block, size_t n) {
  std::string out;
  size_t start = 0;
  while (start < block.size()) {
    size_t end = block.find('\n', start);
    if (end == std::string::npos) end = block.size();
    out += std::string(n, ' ') + block.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string FormatAge(int64_t ms) {
  // k8s.io/apimachinery/pkg/util/duration.HumanDuration, so the columns read as in kubectl.
  const int64_t seconds = std::max<int64_t>(ms, 0) / 1000;
  auto fmt = [](int64_t a, const char* ua, int64_t b, const char* ub) {
    return std::to_string(a) + ua + (b == 0 ? std::string() : std::to_string(b) + ub);
  };
  if (seconds < 120) return std::to_string(seconds) + "s";
  const int64_t minutes = seconds / 60;
  if (minutes < 10) return fmt(minutes, "m", seconds % 60, "s");
  if (minutes < 180) return std::to_string(minutes) + "m";
  const int64_t hours = minutes / 60;
  if (hours < 8) return fmt(hours, "h", minutes % 60, "m");
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) return fmt(hours / 24, "d", hours % 24, "h");
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) return fmt(hours / 24 / 365, "y", (hours / 24) % 365, "d");
  return std::to_string(hours / 24 / 365) + "y";
}

std::string AgeOf(const json& object, const char* field, int64_t now_ms) {
  const auto t = ParseRfc3339(Str(object, field));
  return t ? FormatAge(now_ms - *t) : "<unknown>";
}

std::string_view PhaseColor(std::string_view phase) {
  if (phase == "Succeeded") return "\033[32m";
  if (phase == "Failed") return "\033[31m";
  if (phase == "Cancelled") return "\033[33m";
  if (phase == "Running") return "\033[36m";
  return "";
}

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows, bool color,
                        std::vector<size_t>* min_widths) {
  // Widths in code points, so "≥" or "é" do not push columns apart.
  auto width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char ch : s)
      n += (ch & 0xC0) != 0x80;
    return n;
  };
  std::vector<size_t> widths(header.size(), 0);
  for (size_t i = 0; i < header.size(); ++i)
    widths[i] = width(header[i]);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], width(row[i]));
  }
  if (min_widths != nullptr) {
    for (size_t i = 0; i < widths.size() && i < min_widths->size(); ++i)
      widths[i] = std::max(widths[i], (*min_widths)[i]);
    *min_widths = widths;
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells, bool is_header) {
    std::string text;
    for (size_t i = 0; i < header.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      std::string_view code;
      if (color && !is_header) {
        if (header[i] == "PHASE" || header[i] == "TO") code = PhaseColor(cell);
        if (header[i] == "TYPE" && cell == "Warning") code = "\033[33m";
      }
      if (!code.empty()) {
        text += std::string(code) + cell + std::string(kReset);
      } else {
        text += cell;
      }
      if (i + 1 < header.size()) text += std::string(widths[i] - width(cell) + 3, ' ');
    }
    while (!text.empty() && text.back() == ' ')
      text.pop_back();
    out += text + "\n";
  };
  line(header, true);
  for (const auto& row : rows)
    line(row, false);
  return out;
}

std::vector<std::string> JobHeader(bool wide) {
  std::vector<std::string> h = {"ID", "NAME", "PHASE", "REASON", "AGE"};
  if (wide) h.insert(h.end(), {"FLEET", "OWNER", "CAPSULE", "MESSAGE"});
  return h;
}

std::vector<std::string> JobRow(const json& job, bool wide, int64_t now_ms) {
  std::vector<std::string> row = {OrNone(Str(job, "id")), OrNone(Str(job, "name")),
                                  OrNone(Str(job, "phase")), OrNone(Str(job, "reason")),
                                  AgeOf(job, "createdAt", now_ms)};
  if (wide) {
    std::string capsule;
    const auto c = job.find("capsule");
    if (c != job.end() && c->is_object()) capsule = Str(*c, "sha256").substr(0, 12);
    row.insert(row.end(), {OrNone(Str(job, "fleet")), OrNone(Str(job, "owner")), OrNone(capsule),
                           OrNone(Str(job, "message"))});
  }
  return row;
}

std::string Cell(const json& value) {
  if (value.is_null()) return kNone;
  if (value.is_string()) return OneLine(value.get<std::string>());
  if (value.is_array()) {
    std::string out;
    for (const json& v : value) {
      if (v.is_structured()) return value.dump();
      if (!out.empty()) out += ",";
      out += v.is_string() ? v.get<std::string>() : v.dump();
    }
    return out.empty() ? kNone : OneLine(out);
  }
  return value.dump();
}

std::string DescribeJob(const json& job, const json& events, int64_t now_ms, bool color) {
  std::string out;
  auto field = [&out](const std::string& name, const std::string& value) {
    std::string label = name + ":";
    label.resize(std::max<size_t>(label.size() + 1, 14), ' ');
    out += label + value + "\n";
  };
  const std::string phase = Str(job, "phase");
  field("Name", OrNone(Str(job, "name")));
  field("ID", OrNone(Str(job, "id")));
  field("Owner", OrNone(Str(job, "owner")));
  field("Fleet", OrNone(Str(job, "fleet")));
  const std::string_view code = color ? PhaseColor(phase) : "";
  field("Phase", code.empty() ? OrNone(phase) : std::string(code) + phase + std::string(kReset));
  field("Reason", OrNone(Str(job, "reason")));
  field("Message", OrNone(Str(job, "message")));
  const auto exit_code = job.find("exitCode");
  field("Exit Code", exit_code != job.end() && exit_code->is_number_integer()
                         ? std::to_string(exit_code->get<int64_t>())
                         : kNone);
  const auto capsule = job.find("capsule");
  if (capsule != job.end() && capsule->is_object()) {
    field("Capsule", "sha256:" + Str(*capsule, "sha256"));
    field("Capsule Key", OrNone(Str(*capsule, "key")));
  } else {
    field("Capsule", "<none> (not packaged yet)");
  }
  if (job.value("cancelRequested", false)) field("Cancel", "requested");
  const auto cleanup = job.find("cleanup");
  if (cleanup != job.end() && cleanup->is_object()) {
    auto yes = [&](const char* k) { return cleanup->value(k, false) ? "yes" : "no"; };
    field("Cleanup",
          std::string("logs archived: ") + yes("logsArchived") + ", released: " + yes("released"));
  }
  field("Created", TimeAndAge(job, "createdAt", now_ms));
  field("Started", TimeAndAge(job, "startedAt", now_ms));
  field("Finished", TimeAndAge(job, "finishedAt", now_ms));

  const auto spec = job.find("spec");
  if (spec != job.end() && spec->is_object()) {
    out += "Spec:\n";
    auto sfield = [&out](const std::string& name, const std::string& value) {
      std::string label = "  " + name + ":";
      label.resize(std::max<size_t>(label.size() + 1, 16), ' ');
      out += label + value + "\n";
    };
    sfield("Image", OrNone(Str(*spec, "image")));
    std::string entrypoint;
    const auto ep = spec->find("entrypoint");
    if (ep != spec->end() && ep->is_array()) {
      for (const json& w : *ep) {
        if (!entrypoint.empty()) entrypoint += " ";
        entrypoint += DisplayWord(w.is_string() ? w.get<std::string>() : w.dump());
      }
    }
    sfield("Entrypoint", OrNone(entrypoint));
    const std::string recipe = Str(*spec, "recipe");
    if (!recipe.empty() && recipe != "none") sfield("Recipe", recipe);
    const auto env = spec->find("env");
    if (env != spec->end() && env->is_object() && !env->empty()) {
      std::string names;
      for (const auto& [k, v] : env->items())
        names += (names.empty() ? "" : ", ") + k;
      sfield("Env", names);
    }
    const auto deadlines = spec->find("deadlines");
    if (deadlines != spec->end() && deadlines->is_object()) {
      const int64_t pre = deadlines->value("preRunningSeconds", int64_t{0});
      const int64_t run = deadlines->value("runningSeconds", int64_t{0});
      const int64_t queue = deadlines->value("queueSeconds", int64_t{0});
      sfield("Deadlines", "pre-running " + std::to_string(pre) + "s, running " +
                              (run > 0 ? std::to_string(run) + "s" : std::string("none")) +
                              (queue > 0 ? ", in the queue " + std::to_string(queue) + "s" : ""));
    }
    const auto pools = spec->find("pools");
    if (pools != spec->end() && pools->is_array()) {
      out += "  Pools:\n";
      std::vector<std::vector<std::string>> rows;
      for (const json& p : *pools) {
        if (!p.is_object()) continue;
        rows.push_back({OrNone(Str(p, "name")), Cell(p.value("machines", json(nullptr))),
                        Cell(p.value("gpusPerMachine", json(nullptr))), OrNone(Str(p, "gpuSeries")),
                        OrNone(Str(p, "cpusPerMachine")), OrNone(Str(p, "memoryPerMachine"))});
      }
      out += Indent(RenderTable({"NAME", "MACHINES", "GPUS", "GPU SERIES", "CPUS", "MEMORY"}, rows),
                    4);
    }
  }

  const auto timeline = job.find("timeline");
  if (timeline != job.end() && timeline->is_array()) {
    std::vector<std::vector<std::string>> rows;
    for (const json& t : *timeline) {
      if (!t.is_object()) continue;
      rows.push_back({AgeOf(t, "at", now_ms), OrNone(Str(t, "from")), OrNone(Str(t, "to")),
                      OrNone(Str(t, "reason")), OrNone(Str(t, "cause")),
                      OrNone(Str(t, "message"))});
    }
    out += "Timeline:\n";
    out +=
        rows.empty()
            ? "  <none>\n"
            : Indent(RenderTable({"AGE", "FROM", "TO", "REASON", "CAUSE", "MESSAGE"}, rows, color),
                     2);
  }

  std::vector<std::vector<std::string>> rows;
  const auto items = events.is_object() ? events.find("items") : events.end();
  if (events.is_object() && items != events.end() && items->is_array()) {
    for (const json& e : *items) {
      if (!e.is_object()) continue;
      std::string age = AgeOf(e, "lastAt", now_ms);
      const int64_t count = e.value("count", int64_t{1});
      if (count > 1) {
        age += " (x" + std::to_string(count) + " over " + AgeOf(e, "firstAt", now_ms) + ")";
      }
      rows.push_back({age, OrNone(Str(e, "type")), OrNone(Str(e, "reason")),
                      OrNone(Str(e, "source")), OrNone(Str(e, "message"))});
    }
  }
  out +=
      rows.empty()
          ? "Events:       <none>\n"
          : "Events:\n" +
                Indent(RenderTable({"AGE", "TYPE", "REASON", "FROM", "MESSAGE"}, rows, color), 2);
  return out;
}

std::string CapacityTable(const json& capacity) {
  const auto fleets = capacity.is_object() ? capacity.find("fleets") : capacity.end();
  if (!capacity.is_object() || fleets == capacity.end() || !fleets->is_array() || fleets->empty())
    return "No fleets.\n";
  std::vector<std::string> keys;  // first-seen order across fleets, "fleet" first
  std::vector<std::map<std::string, json>> flat;
  for (const json& f : *fleets) {
    std::vector<std::pair<std::string, json>> leaves;
    json shown = f;
    if (shown.is_object() && shown.contains("series") && shown["series"].is_array())
      shown.erase("series");  // its own table below
    Flatten(shown, "", &leaves);
    std::map<std::string, json> m;
    for (auto& [k, v] : leaves) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      m[k] = std::move(v);
    }
    flat.push_back(std::move(m));
  }
  const auto fleet_key = std::find(keys.begin(), keys.end(), "fleet");
  if (fleet_key != keys.end()) std::rotate(keys.begin(), fleet_key, fleet_key + 1);
  // "memoryBytes": 25276502016 reads better as MEMORY 23.5 GiB.
  auto is_bytes = [](const std::string& k) { return EndsWith(k, "Bytes") && k.size() > 5; };
  std::vector<std::string> header;
  for (const auto& k : keys)
    header.push_back(Header(is_bytes(k) ? k.substr(0, k.size() - 5) : k));
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : flat) {
    std::vector<std::string> row;
    for (const auto& k : keys) {
      const auto it = m.find(k);
      if (it == m.end()) {
        row.push_back("-");
      } else if (it->second.is_array() && !it->second.empty() && it->second[0].is_object()) {
        row.push_back(std::to_string(it->second.size()));  // a list of things: how many
      } else if (is_bytes(k) && it->second.is_number_unsigned()) {
        row.push_back(capsule::FormatBytes(it->second.get<uint64_t>()));
      } else {
        row.push_back(Cell(it->second));
      }
    }
    rows.push_back(std::move(row));
  }
  std::string out = RenderTable(header, rows);
  // A fleet's card series (kuberay): one row each, the numbers GET /api/v1/capacity gives.
  for (const json& f : *fleets) {
    const json& series = f.is_object() && f.contains("series") ? f["series"] : json();
    if (!series.is_array() || series.empty()) continue;
    std::vector<std::vector<std::string>> srows;
    for (const json& s : series) {
      const json& g = s.contains("gpus") ? s["gpus"] : json::object();
      std::vector<std::string> why;
      for (const json& n : s.value("nodeDetail", json::array())) {
        const json blocked = n.value("blocked", json::array());
        if (!blocked.is_array() || blocked.empty()) continue;
        std::string reasons;
        for (const json& b : blocked)
          reasons +=
              (reasons.empty() ? "" : ", ") + (b.is_string() ? b.get<std::string>() : b.dump());
        why.push_back(n.value("name", "?") + ": " + reasons);
      }
      std::string blocked = Cell(s.value("blockedNodes", json(0)));
      if (!why.empty()) {
        blocked += " (";
        for (size_t i = 0; i < why.size(); ++i)
          blocked += (i ? "; " : "") + why[i];
        blocked += ")";
      }
      srows.push_back({s.value("series", std::string()).empty() ? "<unlabelled>"
                                                                : s.value("series", std::string()),
                       Cell(s.value("nodes", json(0))), Cell(g.value("capacity", json(0))),
                       Cell(g.value("allocatable", json(0))), Cell(g.value("requested", json(0))),
                       Cell(g.value("free", json(0))), blocked});
    }
    out +=
        "\n" + f.value("fleet", std::string("fleet")) + " GPUs by card series" +
        (f.contains("gpuNodeLabel") ? " (node label " + Cell(f["gpuNodeLabel"]) + ")" : "") +
        ":\n" +
        RenderTable({"SERIES", "NODES", "GPUS", "ALLOCATABLE", "IN USE", "FREE", "BLOCKED NODES"},
                    srows);
  }
  return out;
}

size_t TailStart(std::string_view text, int64_t n) {
  if (n <= 0) return text.size();
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int64_t i = 0; i < n; ++i) {
    if (pos == 0) return 0;
    const size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string_view::npos) return 0;
    pos = nl;
  }
  return pos + 1;
}

}  // namespace starforge::cli
