"""Tests of ensemble_env.datasets: the built-in caches (toy8, bbh5) and resolve().

The bbh5 checks read only the shipped file; those that compare it with ../shared/data/bbh-leaderboard skip
without that folder, and the rebuild from it is marked slow.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from testing.conversions import BBH_MODEL_ORDER

from ensemble_env import datasets
from ensemble_env.cache import SPLITS, LogitCache, default_cache_path, load_cache, load_default_cache, save_cache

BBH_TASKS = (
    "boolean_expressions", "disambiguation_qa", "formal_fallacies", "geometric_shapes",
    "logical_deduction_seven_objects", "logical_deduction_three_objects", "movie_recommendation", "navigate",
    "object_counting", "reasoning_about_colored_objects", "salient_translation_error_detection",
    "sports_understanding", "temporal_sequences", "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_three_objects", "web_of_lies",
)  # fmt: skip


# -- the registry ------------------------------------------------------------------------------------


def test_names_descriptions_and_files() -> None:
    assert datasets.available() == ("toy8", "bbh5")
    assert datasets.DEFAULT in datasets.available()
    for name in datasets.available():
        assert datasets.describe(name) and "\n" not in datasets.describe(name)
        assert datasets.path(name).name == f"{name}.h5" and datasets.path(name).is_file()
    assert "BIG-Bench-Hard" in datasets.describe("bbh5") and "scikit-learn" in datasets.describe("toy8")


@pytest.mark.parametrize("function", [datasets.describe, datasets.path, datasets.load])
def test_unknown_names_list_the_built_in_caches(function: object) -> None:
    with pytest.raises(ValueError, match=r"unknown built-in cache 'bbh6'; the built-in caches are toy8, bbh5"):
        function("bbh6")  # type: ignore[operator]


def test_load_is_shared_and_the_default_cache_is_the_default_name() -> None:
    assert datasets.load("toy8") is datasets.load("toy8")
    assert datasets.load("toy8").n_models == 8 and datasets.load("toy8").n_questions == 3136
    assert default_cache_path() == datasets.path(datasets.DEFAULT)
    assert load_default_cache() is datasets.load(datasets.DEFAULT)


# -- resolve -----------------------------------------------------------------------------------------


def test_resolve_none_cache_name_and_paths(tiny_cache: LogitCache, tmp_path: Path) -> None:
    assert datasets.resolve(None) is datasets.load(datasets.DEFAULT)
    assert datasets.resolve(tiny_cache) is tiny_cache
    assert datasets.resolve("bbh5") is datasets.load("bbh5")
    saved = save_cache(tmp_path / "mine.h5", tiny_cache)
    for given in (saved, str(saved)):
        resolved = datasets.resolve(given)
        assert resolved.path == str(saved) and resolved.models == tiny_cache.models
    with pytest.raises(TypeError, match="cache must be a built-in name, a path, a LogitCache or None, got int"):
        datasets.resolve(5)  # type: ignore[arg-type]


def test_resolve_refuses_a_name_that_is_also_a_path(
    tiny_cache: LogitCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_cache(tmp_path / "bbh5", tiny_cache)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=re.escape("'bbh5' is both a built-in cache and a path")) as error:
        datasets.resolve("bbh5")
    assert "./bbh5" in str(error.value)
    assert datasets.resolve("./bbh5").models == tiny_cache.models  # the file
    assert datasets.resolve(Path("bbh5")).models == tiny_cache.models  # a Path is always a path


def test_resolve_unknown_string_lists_the_built_in_names(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"bbh6: no such cache file, and not a built-in cache \(.*toy8, bbh5"):
        datasets.resolve("bbh6")
    with pytest.raises(FileNotFoundError, match="no such cache file"):
        datasets.resolve(tmp_path / "absent.h5")


def test_missing_built_in_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(datasets.BUILTINS, "gone", ("gone.h5", "a cache whose file was never built"))
    with pytest.raises(FileNotFoundError, match="the built-in cache 'gone' is missing from the package"):
        datasets.load("gone")


def test_save_builtin_refuses_a_file_too_large(tiny_cache: LogitCache, tmp_path: Path) -> None:
    target = tmp_path / "built.h5"
    size = datasets.save_builtin(target, tiny_cache, max_bytes=10**6)
    assert size == target.stat().st_size and load_cache(target).models == tiny_cache.models
    before = target.read_bytes()
    with pytest.raises(ValueError, match=f"{re.escape(str(target))}: {size} bytes, a built-in cache must stay under"):
        datasets.save_builtin(target, tiny_cache, max_bytes=size)
    assert target.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["built.h5"]


# -- bbh5 (the shipped file) -------------------------------------------------------------------------


def test_bbh5_contents() -> None:
    cache = datasets.load("bbh5")
    assert sorted(cache.models) == sorted(BBH_MODEL_ORDER) and cache.task_names == BBH_TASKS
    assert cache.n_questions == 4000 and cache.score_kind == "loglik" and cache.scores.dtype == np.float32
    assert {name: int((cache.split == code).sum()) for name, code in SPLITS.items()} == {
        "train": 2560, "test": 800, "validation": 640,
    }  # fmt: skip
    for task in range(cache.n_tasks):  # per task, in doc_id order: 160 train, 40 validation, 50 test
        assert cache.split[cache.tasks == task].tolist() == [0] * 160 + [2] * 40 + [1] * 50
    assert cache.question_text is not None and len(cache.question_text) == 4000
    assert all(text.strip() for text in cache.question_text)
    assert cache.question_text[0] == "not ( True ) and ( True ) is"  # boolean_expressions, doc_id 0
    assert cache.features is not None and cache.features.shape == (4000, 64)
    assert cache.features.dtype == np.float32 and np.isfinite(cache.features).all()
    assert cache.feature_kind == "text-tfidf-svd" and cache.feature_names == tuple(f"text_svd_{i}" for i in range(64))
    train = cache.split == SPLITS["train"]
    np.testing.assert_allclose(cache.features[train].mean(axis=0), 0.0, atol=1e-4)  # standardised on train
    assert (cache.features[~train].std(axis=0) > 0.1).all()  # not constant on the other questions
    for words in ("Open LLM Leaderboard v2", "BIG-Bench-Hard", "MIT", "meta-llama/Llama-2-70b-chat-hf"):
        assert words in cache.source
    # costs: active parameters (billions) x the prompt's characters ("Q: <question>\nA:") / 1000
    active = {"google__gemma-7b": 8.5, "meta-llama__Llama-2-70b-chat-hf": 70.0, "microsoft__phi-2": 2.7}
    active |= {"mistralai__Mistral-7B-v0.1": 7.2, "mistralai__Mixtral-8x7B-Instruct-v0.1": 12.9}
    assert cache.costs is not None and cache.costs.shape == (4000, 5)
    characters = np.array([len(f"Q: {text}\nA:") for text in cache.question_text])
    expected = characters[:, None] / 1000 * np.array([active[model] for model in cache.models])[None, :]
    np.testing.assert_allclose(cache.costs, expected, rtol=1e-12)
    assert "12.9B" in cache.source and "thousand prompt characters" in cache.source


def test_bbh5_ships_with_its_licence_and_readme() -> None:
    folder = datasets.path("bbh5").parent
    assert (folder / "BBH-LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "scripts/build_bbh5.py" in readme and "BBH-LICENSE" in readme
    assert datasets.path("bbh5").stat().st_size < 4 * 1024 * 1024


def test_bbh5_accuracies_equal_the_reference(bbh_data: Path) -> None:
    reference = json.loads((bbh_data / "reference_accuracy.json").read_text(encoding="utf-8"))
    cache = datasets.load("bbh5")
    columns = [cache.models.index(model) for model in BBH_MODEL_ORDER]
    assert sorted(reference) == list(cache.task_names)
    for task, expected in reference.items():
        questions = cache.select("all", [task])
        assert questions.size == expected["n"] and int(cache.n_choices[questions].max()) == expected["C"]
        assert int((cache.split[questions] != SPLITS["test"]).sum()) == expected["n_train"]  # train + validation
        assert cache.model_accuracy(questions)[columns].tolist() == expected["acc"], task


@pytest.mark.slow
def test_bbh5_rebuilds_identically_from_the_samples(bbh5_build: LogitCache, tmp_path: Path) -> None:
    rebuilt = load_cache(save_cache(tmp_path / "bbh5.h5", bbh5_build))  # scripts/build_bbh5.py's build()
    shipped = datasets.load("bbh5")
    for name in ("scores", "labels", "n_choices", "tasks", "split", "costs"):
        np.testing.assert_array_equal(getattr(rebuilt, name), getattr(shipped, name), err_msg=name)
    # the text features come out of a TF-IDF + SVD whose BLAS summation order differs between machines: equal to
    # float32 rounding (CI saw 2 of 256,000 values differ by 3e-11), not bit for bit
    np.testing.assert_allclose(rebuilt.features, shipped.features, rtol=1e-5, atol=1e-8, err_msg="features")
    for name in ("models", "task_names", "question_ids", "question_text", "feature_names", "feature_kind", "source"):
        assert getattr(rebuilt, name) == getattr(shipped, name), name
