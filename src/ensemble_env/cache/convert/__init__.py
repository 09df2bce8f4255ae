"""Converters into logit caches: lm-evaluation-harness samples files and plain arrays.

One module per source format, the public names re-exported here (``from ensemble_env.cache.convert import ...``):

=================  ===========================================================================================
module             what it does
=================  ===========================================================================================
``lm_eval``        :func:`from_lm_eval` turns the per-sample logs of lm-evaluation-harness (``--log_samples``;
                   also the Open LLM Leaderboard "details" datasets, which use the same files) into a
                   :class:`~ensemble_env.cache.LogitCache`: one folder of samples files per model, questions
                   aligned across models by ``doc_id``; :data:`NORMALIZATIONS` of the log-likelihoods.
``samples``        :func:`read_samples` reads one samples file into :class:`Sample` records, in either layout
                   lm-eval has written (>= 0.4.3 ``samples_<task>_<date>.jsonl`` JSON Lines, 0.4.0-0.4.2
                   ``<model_args>_<task>.jsonl`` JSON array), streaming the JSON record by record; the
                   question text of each record (:data:`DOC_TEXT_FIELDS` of its ``doc``, else its context).
``discovery``      :func:`find_model_folders`, :func:`find_task_files` (task of each file, with hints from the
                   run's results ``*.json``) and :func:`strip_task_prefix` (the task names stored in a cache).
``arrays``         :func:`from_arrays` / :func:`from_array_files` build a cache from numpy arrays, ``.npz``/
                   ``.npy`` files or CSV tables (scores of shape (Q, N, C) or (Q, N*C)); :data:`ARRAY_FIELDS`.
``splits``         :func:`split_by_task` assigns the train/validation/test split per task (the last fraction is
                   test, the last fraction of the rest validation, or a seeded random choice); the ``cache
                   split`` command uses it too; :func:`describe_split` says the rule in words.
``common``         :class:`ConversionError` and what both formats share: messages naming the place of a
                   problem, the parsing of numbers written as JSON numbers or ASCII decimal text
                   (:func:`parse_float`, :func:`number_problem`), and :func:`read_input`, how every file
                   is read: regular files only (no FIFO, no device), at most :data:`MAX_FILE_BYTES`,
                   never through a symbolic link leading out of the folder given.
=================  ===========================================================================================

Every problem in an input raises :class:`ConversionError` (a ValueError) whose message names the file, the
line and the field; inputs are only read. Writing the result is :func:`ensemble_env.cache.save_cache`'s job
(atomic: temporary file, then rename); :func:`lm_eval_inputs` lists what an output must not be
(:func:`ensemble_env.files.check_output`). Nothing is loaded through pickle.
"""

from __future__ import annotations

from ensemble_env.cache.convert.arrays import ARRAY_FIELDS, from_array_files, from_arrays
from ensemble_env.cache.convert.common import (
    MAX_FILE_BYTES,
    ConversionError,
    number_problem,
    parse_float,
    read_input,
)
from ensemble_env.cache.convert.discovery import find_model_folders, find_task_files, strip_task_prefix
from ensemble_env.cache.convert.lm_eval import NORMALIZATIONS, from_lm_eval, lm_eval_inputs
from ensemble_env.cache.convert.samples import DOC_TEXT_FIELDS, Sample, read_samples
from ensemble_env.cache.convert.splits import describe_split, split_by_task

__all__ = [
    "ARRAY_FIELDS",
    "DOC_TEXT_FIELDS",
    "MAX_FILE_BYTES",
    "NORMALIZATIONS",
    "ConversionError",
    "Sample",
    "describe_split",
    "find_model_folders",
    "find_task_files",
    "from_array_files",
    "from_arrays",
    "from_lm_eval",
    "lm_eval_inputs",
    "number_problem",
    "parse_float",
    "read_input",
    "read_samples",
    "split_by_task",
    "strip_task_prefix",
]
