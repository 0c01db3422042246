"""A minimal RFC 6455 WebSocket (text frames, ping/pong, close) for the log tail endpoint.

Ray's dashboard serves ``GET /api/jobs/{id}/logs/tail`` as a WebSocket that sends the
driver log in TEXT messages and closes with code 1000 when the job is done. The server
side here works inside ``http.server`` handlers; the client side is used by our
``ray job logs --follow``/``ray job submit``.
"""

import base64
import hashlib
import os
import socket
import struct
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
CLOSE_NORMAL = 1000


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def is_upgrade_request(headers) -> bool:
    return (headers.get("Upgrade", "").lower() == "websocket"
            and "upgrade" in headers.get("Connection", "").lower()
            and bool(headers.get("Sec-WebSocket-Key")))


def encode_frame(opcode: int, payload: bytes, mask: bool) -> bytes:
    head = bytes([0x80 | opcode])
    n = len(payload)
    mask_bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([mask_bit | n])
    elif n < 65536:
        head += bytes([mask_bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mask_bit | 127]) + struct.pack("!Q", n)
    if mask:
        key = os.urandom(4)
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        head += key
    return head + payload


def _read_exact(rfile, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = rfile.read(n - len(buf))
        if not chunk:
            raise ConnectionError("WebSocket connection closed")
        buf += chunk
    return buf


def read_frame(rfile):
    """Returns (fin, opcode, payload)."""
    b1, b2 = _read_exact(rfile, 2)
    fin, opcode = bool(b1 & 0x80), b1 & 0x0F
    masked, n = bool(b2 & 0x80), b2 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", _read_exact(rfile, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", _read_exact(rfile, 8))
    key = _read_exact(rfile, 4) if masked else None
    payload = _read_exact(rfile, n) if n else b""
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return fin, opcode, payload


class ServerSocket:
    """Server end, created after ``handshake`` on an http.server handler."""

    def __init__(self, handler):
        self.h = handler

    @staticmethod
    def handshake(handler) -> "ServerSocket":
        handler.send_response(101, "Switching Protocols")
        handler.send_header("Upgrade", "websocket")
        handler.send_header("Connection", "Upgrade")
        handler.send_header("Sec-WebSocket-Accept", accept_key(handler.headers["Sec-WebSocket-Key"]))
        handler.end_headers()
        handler.wfile.flush()
        handler.close_connection = True
        return ServerSocket(handler)

    def send_text(self, text: str):
        self.h.wfile.write(encode_frame(OP_TEXT, text.encode(), mask=False))
        self.h.wfile.flush()

    def close(self, code: int = CLOSE_NORMAL):
        try:
            self.h.wfile.write(encode_frame(OP_CLOSE, struct.pack("!H", code), mask=False))
            self.h.wfile.flush()
            # Wait briefly for the client's close frame, as the closing handshake asks.
            self.h.connection.settimeout(2)
            while True:
                _, op, _ = read_frame(self.h.rfile)
                if op == OP_CLOSE:
                    break
        except (OSError, ConnectionError):
            pass


class ClientSocket:
    """Client end: ``for text in ClientSocket.connect(url): ...``; close_code after the loop."""

    def __init__(self, sock, rfile):
        self.sock = sock
        self.rfile = rfile
        self.close_code = None

    @staticmethod
    def connect(url: str, headers=None, timeout: float = 30.0) -> "ClientSocket":
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "ws"):
            raise ValueError("only plain http:// dashboards are supported, got %s" % url)
        host, port = parts.hostname, parts.port or 80
        sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        path = parts.path + ("?" + parts.query if parts.query else "")
        lines = [
            "GET %s HTTP/1.1" % path,
            "Host: %s:%d" % (host, port),
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: " + key,
            "Sec-WebSocket-Version: 13",
        ]
        for k, v in (headers or {}).items():
            lines.append("%s: %s" % (k, v))
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        rfile = sock.makefile("rb")
        status_line = rfile.readline().decode("latin-1").strip()
        resp_headers = {}
        while True:
            line = rfile.readline().decode("latin-1")
            if line in ("\r\n", "\n", ""):
                break
            k, _, v = line.partition(":")
            resp_headers[k.strip().lower()] = v.strip()
        parts_status = status_line.split(" ", 2)
        code = int(parts_status[1]) if len(parts_status) > 1 and parts_status[1].isdigit() else 0
        if code != 101:
            body = b""
            n = int(resp_headers.get("content-length", "0") or 0)
            if n:
                body = rfile.read(n)
            sock.close()
            raise HandshakeError(code, body.decode(errors="replace"))
        if resp_headers.get("sec-websocket-accept") != accept_key(key):
            sock.close()
            raise HandshakeError(code, "bad Sec-WebSocket-Accept")
        sock.settimeout(None)
        return ClientSocket(sock, rfile)

    def __iter__(self):
        parts = []
        try:
            while True:
                fin, op, payload = read_frame(self.rfile)
                if op in (OP_TEXT, OP_BINARY, OP_CONT):
                    parts.append(payload)
                    if fin:
                        yield b"".join(parts).decode(errors="replace")
                        parts = []
                elif op == OP_PING:
                    self.sock.sendall(encode_frame(OP_PONG, payload, mask=True))
                elif op == OP_CLOSE:
                    self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                    try:
                        self.sock.sendall(encode_frame(OP_CLOSE, payload[:2], mask=True))
                    except OSError:
                        pass
                    return
        except ConnectionError:
            self.close_code = 1006  # abnormal closure
        finally:
            try:
                self.sock.close()
            except OSError:
                pass


class HandshakeError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__("%d, message='Invalid response status'" % status)
        self.status = status
        self.body = body
