"""Build the toy logit cache shipped inside the package: the built-in ``toy8`` (``src/ensemble_env/data/toy8.h5``).

A pool of 8 deliberately different scikit-learn classifiers is scored OUT-OF-FOLD (5-fold stratified
cross-validation, ``cross_val_predict(method="predict_proba")``) on five datasets that ship with
scikit-learn (nothing is downloaded):

- ``iris`` (3 classes), ``wine`` (3), ``breast_cancer`` (2), ``digits`` (10);
- ``diabetes``: the regression target cut at its tertiles into 3 classes (a hard task; raw, unscaled
  features via ``load_diabetes(scaled=False)``).

No model sees a whole dataset. Like LLMs that know different things, each model has a fixed, restricted
*view* of each task: a seeded random subset of its features, sometimes at a coarser resolution (features
cut into 2 or 3 equal-width bins; digits blurred to a 4x4 image). Two families share their views, so their
errors are correlated: ``logreg`` and ``lda`` (linear), ``svm_rbf`` and ``mlp`` (kernel / neural). The view
sizes (``VIEW_SIZES``) are chosen so that every model is mediocre to good, the models are good at different
tasks, and the best single model is far below the oracle (see ``docs/default-cache.md``).

Every question's score of a choice is the log of the model's out-of-fold probability, clipped at 1e-6
(``score_kind="logprob"``, float32); entries beyond a task's class count are 0.0 and ignored by the reader.
Each dataset is shuffled once with the seed; the last 20% of each task (in that order) is the test split.
Tasks are contiguous blocks in the order iris, wine, breast_cancer, digits, diabetes.

Usage (from anywhere; paths are relative to the repository root)::

    .venv/bin/python scripts/build_default_cache.py [--out PATH] [--seed 0]

The build is deterministic (single-threaded BLAS, fixed random states, views drawn from the seed) and
takes well under a minute on two cores. After writing, the file is read back with
``ensemble_env.cache.load_cache`` and the tables documented in ``docs/default-cache.md`` are printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
from sklearn import datasets
from sklearn.calibration import CalibratedClassifierCV
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier
from threadpoolctl import threadpool_limits

REPO_ROOT = Path(__file__).resolve().parent.parent
PROG = "build_default_cache.py"
DEFAULT_OUT = REPO_ROOT / "src" / "ensemble_env" / "data" / "toy8.h5"
TASK_NAMES = ("iris", "wine", "breast_cancer", "digits", "diabetes")
MAX_CHOICES = 10  # digits has 10 classes, the most of any task
N_FOLDS = 5
TEST_FRACTION = 0.2
PROB_FLOOR = 1e-6  # probabilities are clipped here before the log (log(1e-6) ~ -13.8)
MAX_FILE_BYTES = 2 * 1024 * 1024


# -- datasets ----------------------------------------------------------------------------------------


def _diabetes_tertiles() -> tuple[np.ndarray, np.ndarray]:
    """The diabetes regression task as 3 classes: target below / between / above its tertiles."""
    features, target = datasets.load_diabetes(return_X_y=True, scaled=False)
    cuts = np.quantile(target, [1 / 3, 2 / 3])
    return features, np.digitize(target, cuts).astype(np.int64)


LOADERS: dict[str, Callable[[], tuple[np.ndarray, np.ndarray]]] = {
    "iris": lambda: datasets.load_iris(return_X_y=True),
    "wine": lambda: datasets.load_wine(return_X_y=True),
    "breast_cancer": lambda: datasets.load_breast_cancer(return_X_y=True),
    "digits": lambda: datasets.load_digits(return_X_y=True),
    "diabetes": _diabetes_tertiles,
}


# -- the model pool ----------------------------------------------------------------------------------


def make_models(seed: int) -> dict[str, Any]:
    """The 8 classifiers, fresh and unfitted, in the cache's model order.

    They differ on purpose: linear vs. local vs. axis-aligned vs. generative, scaled vs. raw features
    (k-NN on raw features suffers where feature scales differ, a tree cannot average over many weak
    pixels, naive Bayes is overconfident on correlated features, ...).
    """
    return {
        "logreg": make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
        "naive_bayes": GaussianNB(),
        "knn_raw": KNeighborsClassifier(n_neighbors=15),
        "tree_d6": DecisionTreeClassifier(max_depth=6, min_samples_leaf=5, random_state=seed),
        "forest": RandomForestClassifier(n_estimators=50, max_depth=6, random_state=seed, n_jobs=1),
        # SVC(probability=True) is deprecated since scikit-learn 1.9; this is its documented equivalent
        # (Platt scaling fitted on inner cross-validated decision values, one SVC refitted on all rows).
        "svm_rbf": make_pipeline(
            StandardScaler(), CalibratedClassifierCV(SVC(kernel="rbf"), method="sigmoid", ensemble=False)
        ),
        # alpha=1.0 keeps the small net from memorising the tiny tasks and lets adam converge well
        # before max_iter (no ConvergenceWarning).
        "mlp": make_pipeline(
            StandardScaler(), MLPClassifier(hidden_layer_sizes=(32,), alpha=1.0, max_iter=3000, random_state=seed)
        ),
        "lda": LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto"),
    }


MODEL_NAMES = tuple(make_models(0))


# -- the views ---------------------------------------------------------------------------------------

# Models in one view family see exactly the same features of every task (so their errors correlate);
# the order fixes each family's random draw (``np.random.default_rng([seed, task, family_index])``).
VIEW_FAMILIES: dict[str, tuple[str, ...]] = {
    "linear": ("logreg", "lda"),
    "kernel": ("svm_rbf", "mlp"),
    "tree": ("tree_d6",),
    "forest": ("forest",),
    "bayes": ("naive_bayes",),
    "knn": ("knn_raw",),
}
FAMILY_OF = {model: family for family, members in VIEW_FAMILIES.items() for model in members}

# Each family's view of each task: (how many features, at which resolution). Resolutions:
# - "full": the raw feature values;
# - "coarse2" / "coarse3": each feature cut into 2 / 3 equal-width bins over its range (bin index 0, 1, 2);
# - "blurred" (digits only): the 8x8 image averaged over 2x2 blocks into 4x4; the features are its 16 cells.
# The features are a random subset (drawn once per seed) of the task's features at that resolution.
# Every family is "expert" on one task or two (the largest views) and weak elsewhere.
VIEW_SIZES: dict[str, dict[str, tuple[int, str]]] = {
    # 4 features: iris is easy from any petal feature at full resolution
    "iris": {
        "linear": (2, "coarse2"),
        "kernel": (2, "coarse2"),
        "tree": (1, "coarse3"),
        "forest": (2, "coarse2"),
        "bayes": (1, "full"),
        "knn": (2, "full"),
    },
    # 13 features
    "wine": {
        "linear": (2, "full"),
        "kernel": (3, "full"),
        "tree": (3, "full"),
        "forest": (4, "full"),
        "bayes": (3, "full"),
        "knn": (2, "full"),
    },
    # 30 strongly redundant features (10 measurements x mean / standard error / worst): 5 of them
    # already give >90%, so the views are small
    "breast_cancer": {
        "linear": (3, "full"),
        "kernel": (2, "full"),
        "tree": (1, "full"),
        "forest": (1, "full"),
        "bayes": (2, "full"),
        "knn": (1, "full"),
    },
    # 64 pixels: the kernel family sees 17 sharp pixels, everyone else 4 cells of the blurred 4x4 image
    "digits": {
        "linear": (4, "blurred"),
        "kernel": (17, "full"),
        "tree": (4, "blurred"),
        "forest": (4, "blurred"),
        "bayes": (4, "blurred"),
        "knn": (4, "blurred"),
    },
    # 10 features, all weak
    "diabetes": {family: (3, "full") for family in VIEW_FAMILIES},
}


def _coarse(columns: np.ndarray, levels: int) -> np.ndarray:
    """Each column cut into ``levels`` equal-width bins over its range; the bin index as a float."""
    low, high = columns.min(axis=0), columns.max(axis=0)
    width = np.where(high > low, high - low, 1.0)
    return np.clip(np.floor((columns - low) / width * levels), 0, levels - 1)


def view_columns(task: int, family: str, n_features: int, seed: int) -> np.ndarray:
    """The (sorted) feature indices, at the view's resolution, that ``family`` sees of ``task``."""
    size, _ = VIEW_SIZES[TASK_NAMES[task]][family]
    rng = np.random.default_rng([seed, task, list(VIEW_FAMILIES).index(family)])
    return np.sort(rng.choice(n_features, size=size, replace=False))


def view_features(task: int, family: str, features: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(the features ``family`` sees of ``task``, their column indices at the view's resolution)."""
    _, resolution = VIEW_SIZES[TASK_NAMES[task]][family]
    if resolution == "blurred":
        features = features.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4)).reshape(-1, 16)
    columns = view_columns(task, family, features.shape[1], seed)
    seen = features[:, columns]
    if resolution.startswith("coarse"):
        seen = _coarse(seen, int(resolution.removeprefix("coarse")))
    return seen, columns


# -- building ----------------------------------------------------------------------------------------


def score_task(task: int, seed: int) -> dict[str, Any]:
    """Shuffle one dataset with the seed and score every model on its view of it, out-of-fold."""
    name = TASK_NAMES[task]
    features, target = LOADERS[name]()
    order = np.random.default_rng([seed, task]).permutation(len(target))
    features, target = features[order], target[order].astype(np.int64)
    n_classes = int(target.max()) + 1
    folds = StratifiedKFold(n_splits=N_FOLDS, shuffle=True, random_state=seed)
    scores = np.zeros((len(target), len(MODEL_NAMES), MAX_CHOICES), dtype=np.float32)
    for m, (model_name, model) in enumerate(make_models(seed).items()):
        seen, _ = view_features(task, FAMILY_OF[model_name], features, seed)
        probs = cross_val_predict(model, seen, target, cv=folds, method="predict_proba")
        scores[:, m, :n_classes] = np.log(np.clip(probs, PROB_FLOOR, 1.0))
    n_test = round(TEST_FRACTION * len(target))
    split = np.zeros(len(target), dtype=np.int64)
    split[len(target) - n_test :] = 1
    return {
        "scores": scores,
        "labels": target,
        "n_choices": np.full(len(target), n_classes, dtype=np.int64),
        "tasks": np.full(len(target), task, dtype=np.int64),
        "split": split,
        "question_ids": [f"{name}/{row}" for row in order],
    }


def build_cache(seed: int) -> Any:
    """Score every task and assemble the :class:`ensemble_env.cache.LogitCache`."""
    from ensemble_env.cache import LogitCache

    parts = []
    with threadpool_limits(limits=1):  # single-threaded BLAS: bit-identical results on any machine
        for task, name in enumerate(TASK_NAMES):
            start = time.perf_counter()
            parts.append(score_task(task, seed))
            print(f"scored {name:<14} {len(parts[-1]['labels']):>5} questions in {time.perf_counter() - start:.1f}s")
    joined = {key: np.concatenate([part[key] for part in parts]) for key in parts[0] if key != "question_ids"}
    return LogitCache(
        scores=joined["scores"],
        labels=joined["labels"],
        models=MODEL_NAMES,
        score_kind="logprob",
        n_choices=joined["n_choices"],
        tasks=joined["tasks"],
        task_names=TASK_NAMES,
        split=joined["split"],
        question_ids=tuple(qid for part in parts for qid in part["question_ids"]),
        source=(
            f"8 scikit-learn {sklearn.__version__} classifiers, each on a fixed random view of each task's "
            f"features, scored out-of-fold ({N_FOLDS}-fold) on 5 scikit-learn datasets; log-probabilities "
            f"clipped at {PROB_FLOOR:g}; "
            f"scripts/build_default_cache.py --seed {seed}"
        ),
    )


# -- evaluation --------------------------------------------------------------------------------------


def plurality_vote(preds: np.ndarray, n_choices: int) -> np.ndarray:
    """(Q,) most frequent prediction per row of ``preds`` (Q, N); ties go to the lowest choice index."""
    counts = np.zeros((preds.shape[0], n_choices), dtype=np.int64)
    np.add.at(counts, (np.arange(preds.shape[0])[:, None], preds), 1)
    return counts.argmax(axis=1)


def accuracy_tables(cache: Any) -> dict[str, dict[str, dict[str, float]]]:
    """{split: {row: {task or "overall": accuracy}}} for train, test and all questions.

    Rows: each model; ``plurality vote`` (all 8, ties to the lowest choice); ``mean-prob vote`` (argmax
    of the 8 models' mean probability); ``best single (train)``: the model with the best train accuracy
    over all tasks (per task column: the best on that task's train questions); ``oracle``: some model
    is right.
    """
    correct = {
        **{name: cache.correct[:, m] for m, name in enumerate(cache.models)},
        "plurality vote": plurality_vote(cache.preds, cache.max_choices) == cache.labels,
        "mean-prob vote": cache.probs.mean(axis=1).argmax(axis=1) == cache.labels,
        "oracle": cache.correct.any(axis=1),
    }
    train = cache.split == 0
    columns = {name: cache.tasks == t for t, name in enumerate(cache.task_names)}
    columns["overall"] = np.ones(cache.n_questions, dtype=bool)
    # the train-chosen model for each column (ties go to the first model in pool order)
    chosen = {col: int(np.argmax(cache.correct[train & mask].mean(axis=0))) for col, mask in columns.items()}
    # the per-task choice applied question by question (the decider knows each question's task)
    per_task_pick = np.array([chosen[cache.task_names[t]] for t in cache.tasks])
    per_task_correct = cache.correct[np.arange(cache.n_questions), per_task_pick]

    tables: dict[str, dict[str, dict[str, float]]] = {}
    for split_name, in_split in (("train", train), ("test", cache.split == 1), ("all", np.ones_like(train))):
        rows: dict[str, dict[str, float]] = {}
        for row, hits in correct.items():
            rows[row] = {col: float(hits[in_split & mask].mean()) for col, mask in columns.items()}
        rows["best single (train)"] = {
            col: float(cache.correct[in_split & mask, chosen[col]].mean()) for col, mask in columns.items()
        }
        rows["best per task (train)"] = {
            col: float(per_task_correct[in_split & mask].mean()) for col, mask in columns.items()
        }
        order = [
            *cache.models,
            "plurality vote",
            "mean-prob vote",
            "best single (train)",
            "best per task (train)",
            "oracle",
        ]
        tables[split_name] = {row: rows[row] for row in order}
    tables["chosen"] = {col: {cache.models[m]: 1.0} for col, m in chosen.items()}
    return tables


def markdown_table(rows: dict[str, dict[str, float]], columns: list[str]) -> str:
    """Accuracies (%) as a Markdown table, the best model of each column in bold."""
    lines = [
        "| model | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    models = [row for row in rows if row in MODEL_NAMES]
    best = {col: max(rows[row][col] for row in models) for col in columns}
    for row, values in rows.items():
        cells = []
        for col in columns:
            cell = f"{100 * values[col]:.1f}"
            cells.append(f"**{cell}**" if row in models and values[col] == best[col] else cell)
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _feature_names(task: int) -> list[str]:
    """The names of a task's features at full resolution (digits: ``r<row>c<col>`` pixels)."""
    name = TASK_NAMES[task]
    if name == "digits":
        return [f"r{row}c{col}" for row in range(8) for col in range(8)]
    if name == "diabetes":
        return list(datasets.load_diabetes(scaled=False).feature_names)
    return list(getattr(datasets, f"load_{name}")().feature_names)


def views_table(seed: int) -> str:
    """Which features each view family sees of each task, as a Markdown table."""
    lines = [
        "| family (models) | " + " | ".join(TASK_NAMES) + " |",
        "|---|" + "---|" * len(TASK_NAMES),
    ]
    for family, members in VIEW_FAMILIES.items():
        cells = []
        for task, name in enumerate(TASK_NAMES):
            size, resolution = VIEW_SIZES[name][family]
            names = _feature_names(task)
            if resolution == "blurred":
                names = [f"r{row}c{col}" for row in range(4) for col in range(4)]
            columns = view_columns(task, family, len(names), seed)
            what = {"full": "", "coarse2": "2 bins: ", "coarse3": "3 bins: ", "blurred": "blurred: "}[resolution]
            if size > 6:
                cells.append(f"{size} of {len(names)} pixels")
            else:
                cells.append(what + ", ".join(names[c].removesuffix(" (cm)") for c in columns))
        lines.append(f"| {family} ({', '.join(members)}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def pool_summary(cache: Any) -> str:
    """How often the pool splits, and how the models' errors correlate (all questions)."""
    correct = cache.correct
    lines = ["Questions (all) where the pool splits (some model right, some wrong) / no model is right:"]
    for t, name in enumerate(cache.task_names):
        hits = correct[cache.tasks == t]
        split = np.mean(hits.any(axis=1) & ~hits.all(axis=1))
        lines.append(f"  {name:<14} {100 * split:5.1f}% / {100 * np.mean(~hits.any(axis=1)):4.1f}%")
    overall = np.mean(correct.any(axis=1) & ~correct.all(axis=1))
    lines.append(f"  {'overall':<14} {100 * overall:5.1f}% / {100 * np.mean(~correct.any(axis=1)):4.1f}%")
    errors = np.corrcoef((~correct).T.astype(np.float64))
    same, other = [], []
    for i in range(cache.n_models):
        for j in range(i + 1, cache.n_models):
            pair = f"{cache.models[i]}-{cache.models[j]} {errors[i, j]:.2f}"
            (same if FAMILY_OF[cache.models[i]] == FAMILY_OF[cache.models[j]] else other).append(errors[i, j])
            if FAMILY_OF[cache.models[i]] == FAMILY_OF[cache.models[j]]:
                lines.append(f"Error correlation within a view family: {pair}")
    lines.append(
        f"Error correlation across families: mean {np.mean(other):.2f}, range {min(other):.2f} to {max(other):.2f}"
    )
    return "\n".join(lines)


def report(cache: Any, seed: int) -> str:
    """The tasks and views tables, the accuracy tables (test, all, train) and the pool summary."""
    columns = [*cache.task_names, "overall"]
    lines = ["| task | questions | classes | train | test |", "|---|---:|---:|---:|---:|"]
    for t, name in enumerate(cache.task_names):
        mask = cache.tasks == t
        lines.append(
            f"| {name} | {mask.sum()} | {cache.n_choices[mask][0]} | "
            f"{(mask & (cache.split == 0)).sum()} | {(mask & (cache.split == 1)).sum()} |"
        )
    lines.append(
        f"| total | {cache.n_questions} | 2-{cache.max_choices} | {(cache.split == 0).sum()} | "
        f"{(cache.split == 1).sum()} |"
    )
    tables = accuracy_tables(cache)
    chosen = ", ".join(f"{col}: {next(iter(tables['chosen'][col]))}" for col in columns)
    out = ["Tasks:", "", *lines, "", "Views:", "", views_table(seed), ""]
    out += [f"Best single model chosen on train: {chosen}", ""]
    for split_name in ("test", "all", "train"):
        out += [f"Accuracy (%), {split_name} split:", "", markdown_table(tables[split_name], columns), ""]
    out += [pool_summary(cache), ""]
    return "\n".join(out)


# -- command line ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the cache (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="shuffling, fold and model seed (default: %(default)s)")
    args = parser.parse_args(argv)

    # use this checkout's package, whether or not it is installed
    sys.path.insert(0, str(REPO_ROOT / "src"))
    from ensemble_env.errors import run_command

    return run_command(PROG, lambda: _build(args.out, args.seed))


def _build(out: Path, seed: int) -> int:
    from ensemble_env.cache import load_cache
    from ensemble_env.datasets import save_builtin

    start = time.perf_counter()
    size = save_builtin(out, build_cache(seed), MAX_FILE_BYTES)
    print(f"wrote {out} ({size / 1024:.0f} KiB) in {time.perf_counter() - start:.1f}s")
    loaded = load_cache(out)
    print(f"source: {loaded.source}")
    print()
    print(report(loaded, seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
