// `forge playground start|list|describe|logs|extend|stop|chat`: a vLLM server for a while,
// through the REST API (docs/playground.md). `chat` streams the answers of the model server's
// OpenAI-compatible API, which forge serve forwards through the Kubernetes API proxy.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "command.h"
#include "starforge/cli/client_output.h"
#include "starforge/cli/forge.h"
#include "starforge/playground/spec.h"

namespace starforge::cli {

namespace {

using nlohmann::json;

std::string PlaygroundPath(const std::string& id) {
  return "/api/v1/playgrounds/" + UrlEncode(id);
}

std::string Remaining(const json& p) {
  const int64_t s = p.value("ttlRemainingSeconds", int64_t{0});
  const std::string state = p.value("state", "");
  if (state == "Stopped" || state == "Expired" || state == "Failed") return "-";
  return FormatAge(s * 1000);
}

std::vector<std::string> Row(const json& p) {
  const json& spec = p.contains("spec") ? p["spec"] : json::object();
  std::string reason = p.value("reason", "");
  return {p.value("id", ""),
          p.value("state", ""),
          spec.value("model", ""),
          spec.value("series", "") + (spec.value("gpus", int64_t{0}) > 0
                                          ? " × " + std::to_string(spec.value("gpus", int64_t{0}))
                                          : ""),
          Remaining(p),
          reason};
}

struct StartOptions {
  std::string model, series, ttl = "1h", image, fleet, name, cpus, memory, output;
  int64_t gpus = 1;
  std::vector<std::string> args;
  bool wait = false;
};

int Start(Context& c, const std::string& server, const StartOptions& o) {
  int exit = 0;
  auto client = ConnectClient(c, server, &exit);
  if (!client) return exit;
  const std::optional<int64_t> ttl = playground::ParseDuration(o.ttl);
  if (!ttl) {
    c.err << "forge playground start: --ttl: expected a duration such as 90s, 30m, 2h, got \""
          << o.ttl << "\"\n";
    return kExitUsage;
  }
  json body = {{"model", o.model}, {"gpus", o.gpus}, {"ttlSeconds", *ttl}};
  if (!o.series.empty()) body["series"] = o.series;
  if (!o.image.empty()) body["image"] = o.image;
  if (!o.fleet.empty()) body["fleet"] = o.fleet;
  if (!o.name.empty()) body["servedModelName"] = o.name;
  if (!o.cpus.empty()) body["cpus"] = o.cpus;
  if (!o.memory.empty()) body["memory"] = o.memory;
  if (!o.args.empty()) body["args"] = o.args;
  json p;
  if (ApiError e = client->PostJson("/api/v1/playgrounds", body, &p); !e.ok())
    return ReportApiError(c, e);
  const std::string id = p.value("id", "");
  if (o.wait) {
    std::string last;
    for (;;) {
      const std::string state = p.value("state", "");
      const std::string line =
          state + (p.value("reason", "").empty()
                       ? ""
                       : " " + p.value("reason", "") + ": " + p.value("message", ""));
      if (line != last) c.err << "playground/" << id << ": " << line << "\n";
      last = line;
      if (state == "Ready") break;
      if (state == "Stopped" || state == "Expired" || state == "Failed") {
        c.out << (o.output.empty() ? "playground/" + id + "\n" : Format(p, o.output));
        return kExitInvalid;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (ApiError e = client->GetJson(PlaygroundPath(id), &p); !e.ok())
        return ReportApiError(c, e);
    }
  }
  if (o.output == "json" || o.output == "yaml") {
    c.out << Format(p, o.output);
  } else {
    c.out << "playground/" << id << "\n";
  }
  return kExitOk;
}

int List(Context& c, const std::string& server, const std::string& output) {
  int exit = 0;
  auto client = ConnectClient(c, server, &exit);
  if (!client) return exit;
  json list;
  if (ApiError e = client->GetJson("/api/v1/playgrounds", &list); !e.ok())
    return ReportApiError(c, e);
  if (output == "json" || output == "yaml") {
    c.out << Format(list, output);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const json& p : list.value("items", json::array()))
    rows.push_back(Row(p));
  if (rows.empty()) {
    c.err << "No playgrounds.\n";
    return kExitOk;
  }
  c.out << RenderTable({"ID", "STATE", "MODEL", "GPUS", "EXPIRES IN", "REASON"}, rows);
  return kExitOk;
}

int Describe(Context& c, const std::string& server, const std::string& id,
             const std::string& output) {
  int exit = 0;
  auto client = ConnectClient(c, server, &exit);
  if (!client) return exit;
  json p, events;
  if (ApiError e = client->GetJson(PlaygroundPath(id), &p); !e.ok()) return ReportApiError(c, e);
  if (ApiError e = client->GetJson(PlaygroundPath(id) + "/events", &events); !e.ok())
    return ReportApiError(c, e);
  if (output == "json" || output == "yaml") {
    p["events"] = events.value("items", json::array());
    c.out << Format(p, output);
    return kExitOk;
  }
  const json& spec = p["spec"];
  c.out << "Name:         playground/" << p.value("id", "") << "\n"
        << "Owner:        " << p.value("owner", "") << "\n"
        << "Fleet:        " << p.value("fleet", "") << "\n"
        << "State:        " << p.value("state", "") << "\n";
  if (!p.value("reason", "").empty()) c.out << "Reason:       " << p.value("reason", "") << "\n";
  if (!p.value("message", "").empty()) c.out << "Message:      " << p.value("message", "") << "\n";
  c.out << "Model:        " << spec.value("model", "") << " (served as "
        << spec.value("servedModelName", "") << ")\n"
        << "Image:        " << spec.value("image", "") << "\n"
        << "GPUs:         " << spec.value("gpus", int64_t{0}) << " of "
        << (spec.value("series", "").empty() ? "any series" : spec.value("series", "")) << "\n"
        << "Created:      " << Cell(p["createdAt"]) << "\n"
        << "Ready:        " << Cell(p["readyAt"]) << "\n"
        << "Expires:      " << Cell(p["expiresAt"]) << " (in " << Remaining(p) << ")\n"
        << "OpenAI URL:   " << client->server() << p.value("openaiBaseUrl", "") << "\n";
  const json items = events.value("items", json::array());
  if (!items.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const json& e : items)
      rows.push_back({e.value("type", ""), e.value("reason", ""), e.value("object", ""),
                      e.value("message", "")});
    c.out << "Events:\n" << RenderTable({"TYPE", "REASON", "OBJECT", "MESSAGE"}, rows);
  }
  return kExitOk;
}

int Logs(Context& c, const std::string& server, const std::string& id, int64_t tail) {
  int exit = 0;
  auto client = ConnectClient(c, server, &exit);
  if (!client) return exit;
  std::string text;
  std::string path = PlaygroundPath(id) + "/logs";
  if (tail >= 0) path += "?tailLines=" + std::to_string(tail);
  if (ApiError e = client->GetText(path, &text); !e.ok()) return ReportApiError(c, e);
  c.out << text;
  return kExitOk;
}

int Extend(Context& c, const std::string& server, const std::string& id, const std::string& by) {
  int exit = 0;
  auto client = ConnectClient(c, server, &exit);
  if (!client) return exit;
  const std::optional<int64_t> seconds = playground::ParseDuration(by);
  if (!seconds || *seconds <= 0) {
    c.err << "forge playground extend: --by: expected a duration such as 30m or 1h, got \"" << by
          << "\"\n";
    return kExitUsage;
  }
  json p;
  if (ApiError e = client->PostJson(PlaygroundPath(id) + "/extend", {{"seconds", *seconds}}, &p);
      !e.ok())
    return ReportApiError(c, e);
  c.out << "playground/" << id << " expires at " << Cell(p["expiresAt"]) << " (in " << Remaining(p)
        << ")\n";
  return kExitOk;
}

int StopCmd(Context& c, const std::string& server, const std::string& id) {
  int exit = 0;
  auto client = ConnectClient(c, server, &exit);
  if (!client) return exit;
  json p;
  if (ApiError e = client->DeleteJson(PlaygroundPath(id), &p); !e.ok()) return ReportApiError(c, e);
  c.out << "playground/" << id << " " << p.value("state", "") << "\n";
  return kExitOk;
}

// One turn: sends the history and prints the answer as its pieces arrive; returns the answer.
int Turn(Context& c, ApiClient& client, const std::string& id, const std::string& model,
         json& messages, int64_t max_tokens) {
  json body = {{"model", model}, {"messages", messages}, {"stream", true}};
  if (max_tokens > 0) body["max_tokens"] = max_tokens;
  std::string answer;
  const ApiError e = client.PostStream(
      PlaygroundPath(id) + "/openai/v1/chat/completions", body, [&](const SseEvent& ev) {
        if (ev.data == "[DONE]") return false;
        const json chunk = json::parse(ev.data, nullptr, false);
        if (!chunk.is_object()) return true;
        for (const json& choice : chunk.value("choices", json::array())) {
          const json delta = choice.value("delta", json::object());
          const std::string piece = delta.value("content", "");
          answer += piece;
          c.out << piece << std::flush;
        }
        return true;
      });
  c.out << "\n";
  if (!e.ok()) return ReportApiError(c, e);
  messages.push_back({{"role", "assistant"}, {"content", answer}});
  return kExitOk;
}

int Chat(Context& c, const std::string& server, const std::string& id,
         const std::vector<std::string>& once, const std::string& system, int64_t max_tokens) {
  int exit = 0;
  auto client = ConnectClient(c, server, &exit);
  if (!client) return exit;
  json p;
  if (ApiError e = client->GetJson(PlaygroundPath(id), &p); !e.ok()) return ReportApiError(c, e);
  if (p.value("state", "") != "Ready") {
    c.err << "forge: playground " << id << " is " << p.value("state", "")
          << (p.value("message", "").empty() ? "" : " (" + p.value("message", "") + ")")
          << "; chat once it is Ready\n";
    return kExitInvalid;
  }
  const std::string model = p["spec"].value("servedModelName", "");
  json messages = json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  if (!once.empty()) {
    for (const auto& text : once) {
      messages.push_back({{"role", "user"}, {"content", text}});
      if (int rc = Turn(c, *client, id, model, messages, max_tokens); rc != kExitOk) return rc;
    }
    return kExitOk;
  }
  const bool tty = &c.in == &std::cin && ::isatty(0);
  if (tty) c.err << "chatting with " << model << " (playground/" << id << "); Ctrl-D ends\n";
  std::string line;
  for (;;) {
    if (tty) c.err << "> " << std::flush;
    if (!std::getline(c.in, line)) break;
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    if (int rc = Turn(c, *client, id, model, messages, max_tokens); rc != kExitOk) return rc;
  }
  return kExitOk;
}

}  // namespace

void RegisterPlaygroundCommands(Registry& registry) {
  struct Options {
    std::string server, id, output, by = "30m", system;
    StartOptions start;
    int64_t tail = -1;
    int64_t max_tokens = 0;
    std::vector<std::string> messages;
  };
  auto o = std::make_shared<Options>();
  CLI::App* pg = registry.app().add_subcommand(
      "playground", "A vLLM server for a model, for a while (docs/playground.md)");
  pg->alias("playgrounds");
  pg->require_subcommand(1);

  CLI::App* start =
      registry.Add(pg, "start", "Start a vLLM server for a model; prints playground/<id>",
                   [o](Context& c) { return Start(c, o->server, o->start); });
  start
      ->add_option("--model", o->start.model,
                   "A directory of one of your jobs (jobs/<job id>/…, relative to the storage "
                   "root) or a model name the image can load")
      ->required();
  start->add_option("--series", o->start.series, "Card series (e.g. h200)");
  start->add_option("--gpus", o->start.gpus, "GPUs (default 1)")->check(CLI::NonNegativeNumber);
  start->add_option("--ttl", o->start.ttl, "How long it lives: 90s, 30m, 2h (default 1h)");
  start->add_option("--image", o->start.image, "vLLM image (default FORGE_IMAGE_VLLM)");
  start->add_option("--fleet", o->start.fleet, "kuberay or local (default: the server's)");
  start->add_option("--name", o->start.name,
                    "The model name clients send (default: the model's last path segment)");
  start->add_option("--cpus", o->start.cpus, "CPUs (a Kubernetes quantity)");
  start->add_option("--memory", o->start.memory, "Memory (a Kubernetes quantity, e.g. 64Gi)");
  start->add_option("--arg", o->start.args, "One more `vllm serve` argument (repeatable)")
      ->allow_extra_args(false);
  start->add_flag("--wait", o->start.wait, "Wait until it is Ready (exit 1 if it ends first)");
  start->add_option("-o,--output", o->start.output, "json or yaml (default: playground/<id>)")
      ->check(CLI::IsMember({"json", "yaml"}));
  AddServer(start, &o->server);

  CLI::App* list = registry.Add(pg, "list", "Your playgrounds, newest first",
                                [o](Context& c) { return List(c, o->server, o->output); });
  list->alias("ls");
  list->add_option("-o,--output", o->output, "json or yaml (default: a table)")
      ->check(CLI::IsMember({"json", "yaml"}));
  AddServer(list, &o->server);

  CLI::App* describe =
      registry.Add(pg, "describe", "A playground's state, why, its TTL and events",
                   [o](Context& c) { return Describe(c, o->server, o->id, o->output); });
  describe->add_option("ID", o->id, "Playground id")->required();
  describe->add_option("-o,--output", o->output, "json or yaml")
      ->check(CLI::IsMember({"json", "yaml"}));
  AddServer(describe, &o->server);

  CLI::App* logs = registry.Add(pg, "logs", "The vLLM server's log",
                                [o](Context& c) { return Logs(c, o->server, o->id, o->tail); });
  logs->add_option("ID", o->id, "Playground id")->required();
  logs->add_option("--tail", o->tail, "Only the last N lines")->check(CLI::NonNegativeNumber);
  AddServer(logs, &o->server);

  CLI::App* extend = registry.Add(pg, "extend", "Move a playground's end later",
                                  [o](Context& c) { return Extend(c, o->server, o->id, o->by); });
  extend->add_option("ID", o->id, "Playground id")->required();
  extend->add_option("--by", o->by, "How much later: 30m, 1h (default 30m)");
  AddServer(extend, &o->server);

  CLI::App* stop = registry.Add(pg, "stop", "Stop a playground now (its GPUs are freed)",
                                [o](Context& c) { return StopCmd(c, o->server, o->id); });
  stop->add_option("ID", o->id, "Playground id")->required();
  AddServer(stop, &o->server);

  CLI::App* chat = registry.Add(
      pg, "chat", "Talk to the model: each line you type is sent, the answer streams back",
      [o](Context& c) { return Chat(c, o->server, o->id, o->messages, o->system, o->max_tokens); });
  chat->add_option("ID", o->id, "Playground id")->required();
  chat->add_option("-m,--message", o->messages,
                   "Send this (repeatable, in order) instead of reading lines from the terminal");
  chat->add_option("--system", o->system, "A system prompt");
  chat->add_option("--max-tokens", o->max_tokens, "Longest answer, in tokens")
      ->check(CLI::PositiveNumber);
  AddServer(chat, &o->server);
}

}  // namespace starforge::cli
