"""ensemble-env benchmark's stored runs: keyed by the cache's content, counted once, and read back only through the
one checked reader (a corrupt run is refused, naming the file, the field and the value, and redone: never scored).

Fast: tiny synthetic caches and registered fake algorithms, no learner.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from ensemble_env.cache import load_cache, save_cache
from ensemble_env.cache.digest import cache_digest
from ensemble_env.synthetic import make_cache
from ensemble_mappo import benchmark
from ensemble_mappo.benchmark import store


def tiny_cache(seed: int = 1, n_questions: int = 120):
    """Two tasks, three models, train/validation/test."""
    cache = make_cache(n_models=3, n_questions=n_questions, n_tasks=2, accuracy=[0.5, 0.6, 0.8], seed=seed)
    split = np.asarray(cache.split).copy()
    split[np.flatnonzero(split == 0)[::4]] = 2
    return dataclasses.replace(cache, split=split)


#: calls of the fake algorithm: (seed, the cache's content digest)
CALLS: list[tuple[int, str]] = []


@benchmark.register_algorithm("best_model_on_train", config={"version": 1})
def best_model_on_train(cache, seed, alpha, out_dir):
    """The model most accurate on train answers every test question alone."""
    CALLS.append((seed, cache_digest(cache)))
    train, test = cache.select("train"), cache.select("test")
    model = int(np.argmax(cache.correct[train].mean(axis=0)))
    teams = np.zeros((test.size, cache.n_models), dtype=bool)
    teams[:, model] = True
    return benchmark.Answers(test, cache.preds[test, model], teams)


@pytest.fixture(autouse=True)
def _fresh_calls():
    CALLS.clear()


def run(caches, out, names=("best_model_on_train",), seeds=(0,), **options):
    return benchmark.benchmark(list(names), list(seeds), [str(c) for c in caches], out, progress=False, plot=False,
                               **options)  # fmt: skip


def stored(out: Path) -> list[Path]:
    return sorted((out / "runs").glob("*/*/result.json"))


def test_a_cache_rebuilt_at_the_same_path_is_run_again(tmp_path: Path):
    path, out = tmp_path / "pool.h5", tmp_path / "bench"
    first, second = tiny_cache(1), tiny_cache(2, n_questions=160)
    save_cache(path, first)
    before = run([path], out)
    assert run([path], out)["reused_runs"] == 1 and len(CALLS) == 1  # the same cache: read back
    save_cache(path, second)  # rebuilt in place: same path, other answers
    after = run([path], out)
    assert after["reused_runs"] == 0 and CALLS[-1] == (0, cache_digest(second))  # redone on the new cache
    assert len(stored(out)) == 2 and len({p.parent.parent.name for p in stored(out)}) == 2
    expected = run([path], tmp_path / "fresh")  # scored against the new cache, as a fresh benchmark scores it
    assert after["caches"] == expected["caches"] != before["caches"]
    assert after["cache_digests"] == {str(path): cache_digest(second)}


def test_caches_of_one_name_in_two_folders_keep_their_own_runs_and_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    pytest.importorskip("matplotlib")
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "pool.h5", tmp_path / "b" / "pool.h5"
    save_cache(a, tiny_cache(1))
    save_cache(b, tiny_cache(2))
    out = tmp_path / "bench"
    results = benchmark.benchmark(["best_model_on_train"], [0], [str(a), str(b)], out, progress=False)
    assert len(CALLS) == 2 and results["reused_runs"] == 0
    assert len({p.parent.parent.name for p in stored(out)}) == 2
    plots = sorted(path.name for path in out.glob("frontier*.png"))
    digests = [cache_digest(tiny_cache(seed))[:12] for seed in (1, 2)]
    assert plots == sorted(f"frontier_pool-{digest}.png" for digest in digests)
    # relative paths: ./pool.h5 from each folder, one output folder
    monkeypatch.chdir(tmp_path / "a")
    run(["pool.h5"], out)
    monkeypatch.chdir(tmp_path / "b")
    again = run(["pool.h5"], out)
    assert len(CALLS) == 2 and again["reused_runs"] == 1  # each folder's pool.h5 found its own run


def test_an_algorithm_or_a_cache_named_twice_runs_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = tmp_path / "pool.h5"
    save_cache(path, tiny_cache())
    os.symlink(path, tmp_path / "link.h5")
    names = ["best_model_on_train", "stacking", "best_model_on_train", "stacking(per_task)"]
    caches = [path, tmp_path / "link.h5", tmp_path / "." / "pool.h5"]
    results = run(caches, tmp_path / "bench", names=names, seeds=(0, 1))
    assert len(CALLS) == 2  # seeds 0 and 1, once each
    assert list(results["caches"]) == [str(path)]
    assert list(results["caches"][str(path)]) == ["best_model_on_train", "stacking"]
    assert [run["seed"] for run in results["caches"][str(path)]["stacking"]["runs"]] == [0, 1]
    err = capsys.readouterr().err
    assert "'best_model_on_train' is 'best_model_on_train' again" in err
    assert "'stacking(per_task)' is 'stacking' again" in err
    assert f"{tmp_path / 'link.h5'} holds the same cache as {path}" in err


# -- corrupt runs ------------------------------------------------------------------------------------------


def _set(field, value):
    def change(record):
        record[field] = value
        return json.dumps(record)

    return change


def _entry(field, index, value):
    def change(record):
        record[field][index] = value
        return json.dumps(record)

    return change


def _reversed(field):
    def change(record):
        record[field] = record[field][::-1]
        return json.dumps(record)

    return change


def _team(value):
    def change(record):
        record["teams"][3] = [value, *record["teams"][3][1:]]
        return json.dumps(record)

    return change


#: corruption -> (what it does to the stored record's text, the field the refusal names, the value it shows)
CORRUPTIONS = {
    "truncated": (lambda record: json.dumps(record)[:-40], None, "not valid JSON"),
    "deep nesting": (lambda record: "[" * 100_000 + "]" * 100_000, None, "nested too deeply"),
    "nesting under the limit of Python": (lambda record: "[" * 500 + "]" * 500, None, "nested more than 32 levels"),
    "a list, not an object": (lambda record: json.dumps([record]), None, "a run is a JSON object"),
    "a missing key": (lambda record: json.dumps({k: v for k, v in record.items() if k != "info"}), None, "missing"),
    "an extra key": (lambda record: json.dumps({**record, "scores": 1.0}), None, "extra ['scores']"),
    "another key": (lambda record: json.dumps({**record, "key": {**record["key"], "alpha": 0.5}}), "key", "0.5"),
    "an infinite prediction": (_entry("predictions", 2, "__INF__"), "predictions", "entry 2 is Infinity"),
    "a 1e400 prediction": (_entry("predictions", 2, "__BIG__"), "predictions", "entry 2 is 1e400"),
    "NaN in info": (_set("info", {"loss": "__NAN__"}), "info", "NaN"),
    # past the float range without an exponent, and past the digit limit: numbers json's own decoder would read as
    # inf or as a huge int
    "a prediction of 1e309 in 312 digits": (_entry("predictions", 2, "__HUGE__"), "predictions", "312 characters"),
    "a prediction of 401 digits": (_entry("predictions", 2, "__LONG__"), "predictions", "401 characters"),
    "a prediction out of range": (_entry("predictions", 0, 99), "predictions", "99"),
    "a boolean prediction": (_entry("predictions", 1, True), "predictions", "True"),
    "a float prediction": (_entry("predictions", 1, 1.0), "predictions", "1.0"),
    "a team of 256": (_team(256), "teams", "256"),
    "a team of -1": (_team(-1), "teams", "-1"),
    "a boolean team": (_team(True), "teams", "True"),
    "an empty team": (_entry("teams", 4, [0, 0, 0]), "teams", "no member"),
    "a short team row": (_entry("teams", 4, [1, 0]), "teams", "[1, 0]"),
    "questions reordered": (_reversed("questions"), "questions", "the test question there"),
    "info not a mapping": (_set("info", [1, 2]), "info", "list [1, 2]"),
}


def _write_corrupt(path: Path, corruption) -> None:
    text = corruption(json.loads(path.read_text(encoding="utf-8")))
    numbers = {"__BIG__": "1e400", "__INF__": "Infinity", "__NAN__": "NaN", "__HUGE__": "1" + "0" * 309 + ".0"}
    numbers["__LONG__"] = "7" * 401
    for placeholder, number in numbers.items():
        text = text.replace(f'"{placeholder}"', number)  # numbers Python's json does not write
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(("corruption", "field", "shown"), list(CORRUPTIONS.values()), ids=list(CORRUPTIONS))
def test_a_corrupt_run_is_refused_naming_it_and_redone_never_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], corruption, field, shown
):
    path, out = tmp_path / "pool.h5", tmp_path / "bench"
    save_cache(path, tiny_cache())
    clean = run([path], out)
    (result,) = stored(out)
    original = result.read_bytes()
    _write_corrupt(result, corruption)
    capsys.readouterr()
    redone = run([path], out)
    err = capsys.readouterr().err
    assert len(CALLS) == 2 and redone["reused_runs"] == 0  # redone
    assert f"refused the stored run {result}" in err and "the run is redone" in err
    assert (f"field '{field}'" in err) if field else True
    assert shown in err, err
    assert result.read_bytes() == original  # rewritten whole
    assert redone["caches"] == clean["caches"]  # the corrupt values were never scored


def test_the_reader_names_file_field_and_value(tmp_path: Path):
    cache = tiny_cache()
    key = store.run_key("x", 0, cache_digest(cache), 1.0, {})
    test = cache.select("test")
    record = {"key": key, "questions": test.tolist(), "predictions": [0] * test.size,
              "teams": [[1, 0, 0]] * test.size, "info": {}}  # fmt: skip
    folder = tmp_path / "runs" / "c" / "x"
    folder.mkdir(parents=True)
    path = folder / "result.json"
    store.write_run(path, record, cache, [], "x")
    assert store.read_run(path, key, cache, tmp_path / "runs") == record
    record["predictions"][5] = -2
    path.write_text(json.dumps(record))
    with pytest.raises(store.RunError, match=rf"{path}: field 'predictions': entry 5 is -2, expected an integer in -1"):
        store.read_run(path, key, cache, tmp_path / "runs")
    path.unlink()
    assert store.read_run(path, key, cache, tmp_path / "runs") is None  # no file: not an error, the run is due
    os.mkfifo(path)  # never blocks the reader
    with pytest.raises(store.RunError, match="FIFO"):
        store.read_run(path, key, cache, tmp_path / "runs")
    path.unlink()
    os.symlink("/dev/zero", path)
    with pytest.raises(store.RunError, match="symbolic link leading out"):
        store.read_run(path, key, cache, tmp_path / "runs")
    path.unlink()
    path.write_text(" " * (store.MAX_EXTRA_BYTES + store.BYTES_PER_NUMBER * test.size * 5 + 1))
    with pytest.raises(store.RunError, match="bytes"):
        store.read_run(path, key, cache, tmp_path / "runs")


def test_answers_that_cannot_be_read_back_are_refused_when_written(tmp_path: Path):
    path = tmp_path / "pool.h5"
    save_cache(path, tiny_cache())

    def answering(predictions_of, info):
        def algorithm(cache, seed, alpha, out_dir):
            test = cache.select("test")
            return benchmark.Answers(test, predictions_of(test), np.ones((test.size, cache.n_models), bool), info)

        return algorithm

    cases = {
        "nan_info": (lambda test: np.zeros(test.size, np.int64), {"loss": float("nan")}, "without NaN"),
        "array_info": (lambda test: np.zeros(test.size, np.int64), {"w": np.ones(2)}, "JSON-ready"),
        "list_info": (lambda test: np.zeros(test.size, np.int64), [1], "field 'info'"),
        "wide_prediction": (lambda test: np.full(test.size, 7), {}, r"answers.predictions\[0\] = 7 is outside"),
        "float_prediction": (lambda test: np.zeros(test.size), {}, "answers.predictions must be"),
    }
    for name, (predictions_of, info, message) in cases.items():
        benchmark.register_algorithm(name)(answering(predictions_of, info))
        with pytest.raises(ValueError, match=message):
            run([path], tmp_path / "bench", names=[name])
        assert not list((tmp_path / "bench" / "runs").glob(f"*/{name}-*/result.json"))


def test_the_cache_digest_follows_the_contents_not_the_file(tmp_path: Path):
    cache = tiny_cache()
    save_cache(tmp_path / "a.h5", cache)
    save_cache(tmp_path / "b.h5", cache)
    digests = {cache_digest(cache), *(cache_digest(load_cache(tmp_path / name)) for name in ("a.h5", "b.h5"))}
    assert len(digests) == 1
    split = np.asarray(cache.split).copy()
    split[0] = 1 if split[0] != 1 else 0
    labels = np.asarray(cache.labels).copy()
    labels[0] = (labels[0] + 1) % 2
    for changed in (
        dataclasses.replace(cache, split=split),
        dataclasses.replace(cache, labels=labels),
        dataclasses.replace(cache, models=("x", "y", "z")),
        dataclasses.replace(cache, costs=np.ones(3)),
        dataclasses.replace(cache, task_names=("t0", "t1")),
    ):
        assert cache_digest(changed) not in digests
