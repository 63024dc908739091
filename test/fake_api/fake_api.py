#!/usr/bin/env python3
"""A scripted fake LLM API for tests: Anthropic Messages and OpenAI Responses.

Command line:

    fake_api.py --script SCRIPT.json --log REQUESTS.jsonl --port-file PORT
                [--host 127.0.0.1] [--port 0] [--tls-cert CERT --tls-key KEY]

  --script     a JSON list of turns (below); each model call answers with the
               next one. Past the end the last turn is sent again, so end a
               script with a text turn.
  --log        every request, one JSON line each, appended as it arrives
               (before the answer): {"method", "path", "headers" (names in
               lower case), "body_bytes", "body_sha256", "body" (the JSON
               value or the text; left out above 1 MiB)}.
  --port-file  written (atomically) with the port once the server listens;
               --port 0 (the default) picks a free one. The same port is
               printed on stdout: "fake_api: listening on URL".
  --tls-cert, --tls-key
               serve https with this certificate and key (PEM), e.g. made by
               `openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost
               -addext subjectAltName=IP:127.0.0.1 -keyout k -out c`.

A turn is a JSON object:

  {"text": "done"}                    an assistant message ("text" may be a
                                      list of strings: one delta each)
  {"tool": "Bash", "input": {"command": "echo hi > /work/out"}}
                                      a tool call: Anthropic tool_use with
                                      this input; OpenAI function_call whose
                                      arguments are the input as JSON text
  {"status": 529, "error": "Overloaded"}
                                      an HTTP error in the API's own format
  optional in any turn: "delay": seconds between two streamed events (and
  before a non-streamed answer).

Routes: POST .../messages (Anthropic) and POST .../responses (OpenAI),
streamed as server-sent events when the body has "stream": true, else one
JSON answer; POST .../messages/count_tokens answers {"input_tokens": 10}
without taking a turn; GET and HEAD / answer 200 with an empty body;
anything else 404. HTTP/1.1 with keep-alive; request bodies with
Content-Length or chunked; streamed answers are chunked, one chunk per event.
Python 3 standard library only.
"""

import argparse
import hashlib
import http.server
import json
import os
import socket
import ssl
import sys
import threading
import time

MAX_LOGGED_BODY = 1 << 20


class Script:
    """The turns, handed out in order; thread-safe."""

    def __init__(self, turns):
        if not isinstance(turns, list) or not turns:
            raise ValueError("the script must be a non-empty JSON list of turns")
        self.turns = turns
        self.next = 0
        self.lock = threading.Lock()

    def take(self):
        with self.lock:
            turn = self.turns[min(self.next, len(self.turns) - 1)]
            self.next += 1
            return turn, self.next


class RequestLog:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def write(self, record):
        line = json.dumps(record, sort_keys=True) + "\n"
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()


def sse(event, data):
    return ("event: %s\ndata: %s\n\n" % (event, json.dumps(data))).encode()


def text_parts(turn):
    t = turn.get("text", "")
    return t if isinstance(t, list) else [t]


def anthropic_events(turn, n, model):
    """The Messages stream of one turn, as a list of (event, data)."""
    msg_id = "msg_fake_%d" % n
    usage = {"input_tokens": 10, "output_tokens": 1}
    message = {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": usage}
    events = [("message_start", {"type": "message_start", "message": message})]
    if "tool" in turn:
        block = {"type": "tool_use", "id": "toolu_fake_%d" % n, "name": turn["tool"], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(turn.get("input", {}))}]
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in text_parts(turn)]
        stop = "end_turn"
    events.append(("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}))
    for d in deltas:
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}))
    events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def anthropic_message(turn, n, model):
    if "tool" in turn:
        content = [{"type": "tool_use", "id": "toolu_fake_%d" % n, "name": turn["tool"],
                    "input": turn.get("input", {})}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": "".join(text_parts(turn))}]
        stop = "end_turn"
    return {"id": "msg_fake_%d" % n, "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


def openai_item(turn, n, done):
    status = "completed" if done else "in_progress"
    if "tool" in turn:
        args = json.dumps(turn.get("input", {})) if done else ""
        return {"id": "fc_fake_%d" % n, "type": "function_call", "status": status, "name": turn["tool"],
                "call_id": "call_fake_%d" % n, "arguments": args}
    content = [{"type": "output_text", "text": "".join(text_parts(turn)), "annotations": []}] if done else []
    return {"id": "msg_fake_%d" % n, "type": "message", "status": status, "role": "assistant", "content": content}


def openai_response(turn, n, model, done):
    r = {"id": "resp_fake_%d" % n, "object": "response", "created_at": int(time.time()), "model": model,
         "status": "completed" if done else "in_progress", "output": [openai_item(turn, n, True)] if done else []}
    if done:
        r["usage"] = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    return r


def openai_events(turn, n, model):
    """The Responses stream of one turn, as a list of (event, data)."""
    item = openai_item(turn, n, False)
    ev = [("response.created", {"type": "response.created", "response": openai_response(turn, n, model, False)}),
          ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item})]
    if "tool" in turn:
        args = json.dumps(turn.get("input", {}))
        ev.append(("response.function_call_arguments.delta",
                   {"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": 0,
                    "delta": args}))
        ev.append(("response.function_call_arguments.done",
                   {"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": 0,
                    "arguments": args}))
    else:
        where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        ev.append(("response.content_part.added", dict(where, type="response.content_part.added",
                                                       part={"type": "output_text", "text": "", "annotations": []})))
        for p in text_parts(turn):
            ev.append(("response.output_text.delta", dict(where, type="response.output_text.delta", delta=p)))
        ev.append(("response.output_text.done", dict(where, type="response.output_text.done",
                                                     text="".join(text_parts(turn)))))
    ev.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                             "item": openai_item(turn, n, True)}))
    ev.append(("response.completed", {"type": "response.completed",
                                      "response": openai_response(turn, n, model, True)}))
    for i, (_, data) in enumerate(ev):
        data["sequence_number"] = i
    return ev


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake_api/1"

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def record(self, body):
        rec = {"method": self.command, "path": self.path,
               "headers": {k.lower(): v for k, v in self.headers.items()},
               "body_bytes": len(body), "body_sha256": hashlib.sha256(body).hexdigest()}
        if len(body) <= MAX_LOGGED_BODY:
            try:
                rec["body"] = json.loads(body) if body else ""
            except ValueError:
                rec["body"] = body.decode("utf-8", "replace")
        self.server.request_log.write(rec)

    def answer(self, status, ctype, payload):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
        self.wfile.flush()

    def answer_json(self, status, value):
        self.answer(status, "application/json", json.dumps(value).encode())

    def stream(self, events, delay):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, (event, data) in enumerate(events):
            if i and delay:
                time.sleep(delay)
            chunk = sse(event, data)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.record(b"")
        if self.path == "/":
            self.answer(200, "text/plain", b"")
        else:
            self.answer_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "no route"}})

    def do_POST(self):
        body = self.read_body()
        self.record(body)
        path = self.path.split("?", 1)[0]
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            request = {}
        if not isinstance(request, dict):
            request = {}
        if path.endswith("/messages/count_tokens"):
            return self.answer_json(200, {"input_tokens": 10})
        if path.endswith("/messages"):
            api = "anthropic"
        elif path.endswith("/responses"):
            api = "openai"
        else:
            return self.answer_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                     "message": "no route"}})
        turn, n = self.server.script.take()
        self.respond(api, turn, n, request)

    def respond(self, api, turn, n, request):
        delay = float(turn.get("delay", 0))
        model = str(request.get("model", "fake-model"))
        if "status" in turn:
            time.sleep(delay)
            message = str(turn.get("error", "scripted error"))
            if api == "anthropic":
                err = {"type": "error", "error": {"type": "api_error", "message": message}}
            else:
                err = {"error": {"type": "server_error", "message": message, "code": None, "param": None}}
            return self.answer_json(int(turn["status"]), err)
        if request.get("stream"):
            events = anthropic_events(turn, n, model) if api == "anthropic" else openai_events(turn, n, model)
            return self.stream(events, delay)
        time.sleep(delay)
        if api == "anthropic":
            return self.answer_json(200, anthropic_message(turn, n, model))
        return self.answer_json(200, openai_response(turn, n, model, True))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    tls = None

    def get_request(self):
        conn, addr = super().get_request()
        if self.tls:
            # The handshake runs in the request's thread, so one slow or
            # broken client cannot stall the accept loop.
            conn = self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        return conn, addr

    def handle_error(self, request, client_address):
        # A client that hangs up mid-answer (the tests of disconnects) is
        # expected; anything else is worth a line on stderr.
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, ssl.SSLError, socket.timeout)):
            super().handle_error(request, client_address)


def main():
    p = argparse.ArgumentParser(description="A scripted fake Anthropic/OpenAI API for tests.")
    p.add_argument("--script", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port-file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    a = p.parse_args()
    if bool(a.tls_cert) != bool(a.tls_key):
        p.error("--tls-cert and --tls-key go together")
    with open(a.script, encoding="utf-8") as f:
        script = Script(json.load(f))
    server = Server((a.host, a.port), Handler)
    server.script = script
    server.request_log = RequestLog(a.log)
    scheme = "http"
    if a.tls_cert:
        server.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.tls.load_cert_chain(a.tls_cert, a.tls_key)
        scheme = "https"
    port = server.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("%d\n" % port)
        os.rename(tmp, a.port_file)
    print("fake_api: listening on %s://%s:%d" % (scheme, a.host, port), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
