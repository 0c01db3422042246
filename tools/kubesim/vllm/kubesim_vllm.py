"""kubesim's vLLM emulator: NOT vLLM. It answers the paths StarForge's playgrounds use, in the
shapes `vllm serve` (v0.11, the OpenAI-compatible server) uses, with a deterministic "model" that
echoes the last user message word by word. No GPU, no weights. See docs/kubesim.md,
"vLLM emulator".

    vllm serve MODEL [--host H] [--port P] [--served-model-name NAME] [other flags, ignored]

Behaviour held to vLLM's:
  * start-up: the port is not open until the "model" is loaded (KUBESIM_VLLM_STARTUP_S, default
    1 s), as vLLM binds only after loading weights;
  * a MODEL that is a path (starts with / or .) must be an existing directory, else the process
    exits 1 with an error on stderr, as vLLM fails to load it; any other MODEL is taken for a
    Hugging Face name and "loaded";
  * GET /health → 200, empty body; GET /v1/models → {"object": "list", "data": [{"id": NAME,
    "object": "model", "owned_by": "vllm", "root": MODEL, "max_model_len": …}]};
  * POST /v1/chat/completions and /v1/completions, with and without "stream": chat.completion /
    text_completion objects, or Server-Sent Events of *.chunk objects ending with `data: [DONE]`;
  * errors as vLLM's ErrorResponse: {"error": {"message", "type", "param", "code"}}, 404
    NotFoundError for an unknown model, 400 BadRequestError for a malformed request.
"""

import json
import os
import sys
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_MODEL_LEN = 4096


def parse_args(argv):
    if not argv or argv[0] != "serve":
        sys.stderr.write("usage: vllm serve MODEL [--host H] [--port P] [--served-model-name N]\n"
                         "(kubesim's vLLM emulator: only `serve` exists)\n")
        sys.exit(2)
    args = {"host": "0.0.0.0", "port": 8000, "served": None, "model": None}
    i = 1
    while i < len(argv):
        a = argv[i]
        key, _, inline = a.partition("=")
        value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else None)
        step = 1 if inline else 2
        if key == "--host":
            args["host"] = value
        elif key == "--port":
            args["port"] = int(value)
        elif key == "--served-model-name":
            args["served"] = value
        elif key.startswith("--"):
            # Other flags are accepted and ignored; a following value (not a flag) is theirs.
            step = 1 if inline or value is None or value.startswith("--") else 2
        elif args["model"] is None:
            args["model"] = a
            step = 1
        else:
            step = 1
        i += step
    if args["model"] is None:
        sys.stderr.write("vllm serve: error: the following arguments are required: model_tag\n")
        sys.exit(2)
    args["served"] = args["served"] or args["model"]
    return args


def answer_words(messages_or_prompt):
    if isinstance(messages_or_prompt, list):
        last = ""
        for m in messages_or_prompt:
            if isinstance(m, dict) and m.get("role") == "user":
                content = m.get("content")
                if isinstance(content, list):  # content parts
                    content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
                last = content or ""
        text = "You said: " + last
    else:
        text = "… " + str(messages_or_prompt)
    words = text.split(" ")
    return [w if i == 0 else " " + w for i, w in enumerate(words)]


def make_handler(args):
    served = args["served"]
    created = int(time.time())
    token_delay = float(os.environ.get("KUBESIM_VLLM_TOKEN_DELAY_MS", "20")) / 1000.0

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"  # what vLLM's server says

        def log_message(self, fmt, *a):
            sys.stdout.write("INFO:     %s - \"%s\" %s\n" % (self.client_address[0],
                                                          self.requestline, a[1] if len(a) > 1 else ""))
            sys.stdout.flush()

        def send_json(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def error(self, status, kind, message, param=None):
            self.send_json(status, {"error": {"message": message, "type": kind,
                                              "param": param, "code": status}})

        def do_GET(self):
            path = self.path.split("?")[0]
            if path == "/health":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif path == "/v1/models":
                self.send_json(200, {"object": "list", "data": [{
                    "id": served, "object": "model", "created": created, "owned_by": "vllm",
                    "root": args["model"], "parent": None, "max_model_len": MAX_MODEL_LEN}]})
            else:
                self.send_json(404, {"detail": "Not Found"})  # FastAPI's own 404

        def do_POST(self):
            path = self.path.split("?")[0]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if path not in ("/v1/chat/completions", "/v1/completions"):
                self.send_json(404, {"detail": "Not Found"})
                return
            try:
                req = json.loads(raw or b"null")
            except ValueError as e:
                self.error(400, "BadRequestError", "JSON decode error: %s" % e)
                return
            if not isinstance(req, dict):
                self.error(400, "BadRequestError", "the request body must be a JSON object")
                return
            chat = path == "/v1/chat/completions"
            if req.get("model") not in (None, served):
                self.error(404, "NotFoundError",
                           "The model `%s` does not exist." % req.get("model"), "model")
                return
            source = req.get("messages") if chat else req.get("prompt")
            if source is None or (chat and not isinstance(source, list)):
                self.error(400, "BadRequestError",
                           "Field required: %s" % ("messages" if chat else "prompt"))
                return
            words = answer_words(source)
            max_tokens = req.get("max_tokens") or req.get("max_completion_tokens")
            finish = "stop"
            if isinstance(max_tokens, int) and 0 < max_tokens < len(words):
                words, finish = words[:max_tokens], "length"
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
            usage = {"prompt_tokens": len(json.dumps(source).split()),
                     "completion_tokens": len(words)}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            if not req.get("stream"):
                text = "".join(words)
                if chat:
                    choice = {"index": 0, "message": {"role": "assistant", "content": text,
                                                      "tool_calls": []},
                              "logprobs": None, "finish_reason": finish, "stop_reason": None}
                    obj = "chat.completion"
                else:
                    choice = {"index": 0, "text": text, "logprobs": None,
                              "finish_reason": finish, "stop_reason": None}
                    obj = "text_completion"
                self.send_json(200, {"id": rid, "object": obj, "created": int(time.time()),
                                     "model": served, "choices": [choice], "usage": usage})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            obj = "chat.completion.chunk" if chat else "text_completion"

            def event(payload):
                data = ("data: " + payload + "\n\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def chunk(choice):
                return json.dumps({"id": rid, "object": obj, "created": int(time.time()),
                                   "model": served, "choices": [choice]})

            if chat:
                event(chunk({"index": 0, "delta": {"role": "assistant", "content": ""},
                             "logprobs": None, "finish_reason": None}))
            for i, w in enumerate(words):
                last = i == len(words) - 1
                if chat:
                    c = {"index": 0, "delta": {"content": w}, "logprobs": None,
                         "finish_reason": finish if last else None}
                else:
                    c = {"index": 0, "text": w, "logprobs": None,
                         "finish_reason": finish if last else None}
                event(chunk(c))
                time.sleep(token_delay)
            event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


def main(argv):
    args = parse_args(argv)
    model = args["model"]
    sys.stdout.write("INFO kubesim vLLM emulator (not vLLM): serving %s as %s\n"
                     % (model, args["served"]))
    sys.stdout.flush()
    if model.startswith("/") or model.startswith("."):
        if not os.path.isdir(model):
            sys.stderr.write("OSError: Can't load the configuration of '%s'. The path does not "
                             "exist or is not a directory.\n" % model)
            return 1
    time.sleep(float(os.environ.get("KUBESIM_VLLM_STARTUP_S", "1")))
    host = args["host"]
    # Without network namespaces every kubesim pod shares the host's; each has its own loopback
    # address (KUBESIM_POD_IP), and "all addresses" would take port 8000 from every other pod.
    if host in ("0.0.0.0", "::") and os.environ.get("KUBESIM_POD_IP"):
        host = os.environ["KUBESIM_POD_IP"]
    server = ThreadingHTTPServer((host, args["port"]), make_handler(args))
    server.daemon_threads = True
    sys.stdout.write("INFO:     Uvicorn running on http://%s:%d (Press CTRL+C to quit)\n"
                     % (host, args["port"]))
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
