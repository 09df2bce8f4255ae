"""A content digest of a logit cache: what its answers and splits are, whatever file or path it came from.

Two caches with the same digest hold the same questions, models, answers, labels, tasks and splits, so anything
computed from one (a benchmark's run, a fitted baseline) holds for the other; a cache rebuilt at the same path
with other contents has another digest. The path, the source text, the question texts and ids are left out.

>>> import numpy as np
>>> from ensemble_env.cache.logit_cache import LogitCache
>>> cache = LogitCache(scores=np.array([[[2.0, 0.0]]]), labels=np.array([0]), models=("a",), score_kind="logit")
>>> digest = cache_digest(cache)
>>> len(digest), digest == cache_digest(LogitCache(scores=cache.scores, labels=[0], models=("a",), score_kind="logit"))
(64, True)
>>> digest == cache_digest(LogitCache(scores=cache.scores, labels=[1], models=("a",), score_kind="logit"))
False
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache

__all__ = ["DIGEST_FIELDS", "cache_digest"]

#: the fields of :class:`~ensemble_env.cache.logit_cache.LogitCache` the digest covers, in this order: the
#: scores with their kind (the probabilities are computed from them), the names, the per-question arrays, and the
#: optional costs and features (with their names) when present
DIGEST_FIELDS = (
    "score_kind",
    "scores",
    "models",
    "task_names",
    "tasks",
    "split",
    "labels",
    "n_choices",
    "costs",
    "features",
    "feature_names",
    "feature_kind",
)
_VERSION = b"ensemble-cache-digest 1\n"


def cache_digest(cache: LogitCache) -> str:
    """The SHA-256 (64 hex digits) of the cache's contents: :data:`DIGEST_FIELDS`, each written with its name,
    its type and shape (arrays as little-endian bytes in C order, names as JSON), so that no two different
    caches write the same bytes. The scores are hashed as stored rather than the probabilities computed from
    them, so the digest is the same on every platform."""
    digest = hashlib.sha256(_VERSION)
    for name in DIGEST_FIELDS:
        value = getattr(cache, name)
        if value is None:
            digest.update(f"{name} none\n".encode())
        elif isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
            digest.update(f"{name} {array.dtype.str} {array.shape} {array.nbytes}\n".encode())
            digest.update(array.data)
        else:
            text = json.dumps(value if isinstance(value, str) else list(value), ensure_ascii=False).encode()
            digest.update(f"{name} json {len(text)}\n".encode())
            digest.update(text)
    return digest.hexdigest()
