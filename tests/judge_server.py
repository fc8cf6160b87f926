"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for the judge tests and benchmarks (no network).

It plays an LLM judge with deterministic verdicts: it reads the reference and the candidate out of the prompt's
delimiters and answers with the offline reference judge's verdict, in JSON when asked for JSON mode, else with a
verdict line. Faults are injected per request by a ``plan(question, attempt) -> fault | None`` callable, where
``attempt`` counts the requests already made for that question (tests give every item its own question):

- a status code (``429``, ``500``, ``503``, ``401``, ...): that status with an OpenAI-style error body (429 carries
  ``Retry-After: 0``);
- ``timeout``: the reply comes after ``slow_s`` seconds (longer than the client's timeout);
- ``truncated_json``: a 200 whose verdict JSON is cut off (``{"verdict": "corr``);
- ``truncated_body``: a 200 whose HTTP body is cut off mid-JSON;
- ``chatty``: a long reasoning reply that ends with the verdict line;
- ``garbage``: a reply with no verdict at all.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from chartrl.judge import Verdict
from chartrl.judge.base import JudgeUsage
from chartrl.judge.reference import answers_equivalent

Plan = Callable[[str, int], "str | None"]
_BLOCK = r"<{tag}>\n(.*?)\n</{tag}>"


def block(prompt: str, tag: str) -> str:
    match = re.search(_BLOCK.format(tag=tag), prompt, re.DOTALL)
    assert match, f"no <{tag}> block in the prompt"
    return match.group(1)


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default listen backlog (5) drops connections when many arrive at once


class FakeJudgeServer:
    def __init__(
        self, plan: Plan | None = None, latency_s: float = 0.0, json_supported: bool = True, slow_s: float = 1.0
    ):
        self.plan = plan or (lambda question, attempt: None)
        self.latency_s, self.json_supported, self.slow_s = latency_s, json_supported, slow_s
        self.requests = 0
        self.attempts: Counter[str] = Counter()
        self.prompts: list[str] = []
        self.images: list[str] = []
        self.authorization: set[str] = set()
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def __enter__(self) -> FakeJudgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reply_for(self, prompt: str, json_mode: bool, chatty: bool) -> str:
        same = answers_equivalent(block(prompt, "candidate_answer"), block(prompt, "reference_answer"))
        word = "correct" if same else "incorrect"
        if json_mode:
            return json.dumps({"verdict": word})
        if chatty:
            return (
                "Let me think about this carefully. The reference answer is given, and the candidate states an "
                "answer that I compare with it, considering units and rounding.\n\nVerdict: correct or incorrect? "
                f"Having compared them, I conclude.\n**VERDICT: {word.upper()}**"
            )
        return f"VERDICT: {word.upper()}"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers: a connection per request would dominate
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): fine
                    pass

            def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
                self._send(status, json.dumps({"error": {"message": message, "code": status}}).encode(), headers)

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                content = request["messages"][-1]["content"]
                images = []
                if isinstance(content, list):  # a multimodal message: image_url parts and text parts
                    images = [part["image_url"]["url"] for part in content if part.get("type") == "image_url"]
                    content = "\n".join(part["text"] for part in content if part.get("type") == "text")
                prompt = content
                question = block(prompt, "question")
                with server._lock:
                    server.requests += 1
                    server.images.extend(images)
                    attempt = server.attempts[question]
                    server.attempts[question] += 1
                    server.prompts.append(prompt)
                    server.authorization.add(self.headers.get("Authorization", ""))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._answer(request, prompt, question, attempt)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, request, prompt, question, attempt):
                if server.latency_s:
                    time.sleep(server.latency_s)
                fault = server.plan(question, attempt)
                json_mode = request.get("response_format", {}).get("type") == "json_object"
                if fault is not None and fault.isdigit():
                    return self._error(int(fault), "injected fault", {"Retry-After": "0"} if fault == "429" else None)
                if json_mode and not server.json_supported:
                    return self._error(400, "response_format is not supported by this model")
                if fault == "timeout":
                    time.sleep(server.slow_s)
                content = server.reply_for(prompt, json_mode, chatty=fault == "chatty")
                if fault == "truncated_json":
                    content = '{"verdict": "corr'
                if fault == "garbage":
                    content = "I am not able to decide this one."
                body = json.dumps(
                    {
                        "id": f"chatcmpl-{server.requests}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": request["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": len(prompt.split()),
                            "completion_tokens": len(content.split()),
                            "total_tokens": len(prompt.split()) + len(content.split()),
                        },
                    }
                ).encode()
                if fault == "truncated_body":
                    body = body[: len(body) // 2]
                self._send(200, body)

        return Handler


class FakeScorerServer(FakeJudgeServer):
    """The same server playing a process reward model: it scores the candidate response in [0, 1], high when the
    answer in it matches ``truths[question]`` (the truth the test knows; the request never carries it), as a
    ``{"score": p}`` object in JSON mode, else a final ``SCORE: p`` line (after some reasoning when ``chatty``)."""

    def __init__(self, truths: dict[str, str], plan: Plan | None = None, **kwargs):
        super().__init__(plan, **kwargs)
        self.truths = truths

    def score_for(self, prompt: str) -> float:
        from chartrl.answers import extract_answer

        answer = extract_answer(block(prompt, "candidate_response"))
        truth = self.truths[block(prompt, "question")]
        return 0.9 if answer is not None and answers_equivalent(answer, truth) else 0.2

    def reply_for(self, prompt: str, json_mode: bool, chatty: bool) -> str:
        score = self.score_for(prompt)
        if json_mode:
            return json.dumps({"score": score})
        if chatty:
            return f"The response reads the chart and answers. Weighing its steps, I rate it.\n**SCORE: {score}**"
        return f"SCORE: {score}"


class FailingJudge:
    """A judge double that never reaches a verdict (what the client returns after unreadable replies)."""

    name, kind = "failing", "test double"

    def __init__(self):
        self.usage = JudgeUsage()

    async def judge_many(self, items):
        return [Verdict(None, "failure", "unreadable") for _ in items]

    def describe(self):
        return {"name": self.name, "kind": self.kind}
