"""The cost-accuracy frontier: every baseline of the registry over a sweep of the size penalty ``alpha``.

- :func:`frontier` runs the baselines as :func:`~ensemble_env.baselines.comparison.compare` does at each ``alpha``
  (those that choose their teams by the reward move along it, :func:`sweeps`; the others stay put), as
  points (:class:`FrontierPoint`); :data:`DEFAULT_ALPHAS`, the penalties it sweeps by default;
- :func:`format_frontier`: its points as a plain-text table (``ensemble-env baselines --frontier``).

:func:`ensemble_env.baselines.frontier_plot.plot_frontier` draws the points.

>>> from ensemble_env import datasets
>>> points = frontier(datasets.load("toy8"), (0.0, 1.0), names=["best_single", "static_team"], progress=False)
>>> [(point.name, point.alpha) for point in points]  # doctest: +NORMALIZE_WHITESPACE
[('best_single', 0.0), ('static_team', 0.0), ('best_single', 1.0), ('static_team', 1.0)]
>>> sweeps("static_team"), sweeps("best_single"), sweeps("mappo")
(True, False, False)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from ensemble_env.baselines import routing
from ensemble_env.baselines.comparison import baseline_names, compare, fit_routers
from ensemble_env.baselines.registry import BASELINES, baseline_of
from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.reward import DEFAULT_REWARD, RewardSettings, check_alpha
from ensemble_env.text import align_table

__all__ = ["DEFAULT_ALPHAS", "FrontierPoint", "format_frontier", "frontier", "sweeps"]

#: the size penalties :func:`frontier` sweeps by default
DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


@dataclasses.dataclass(frozen=True)
class FrontierPoint:
    """One baseline (or algorithm) at one size penalty: macro accuracy, mean reward at ``alpha``, mean team size and
    cost.

    ``uses_test_labels``: it chooses with the labels of the questions it is scored on (an oracle), a reference that
    :func:`~ensemble_env.baselines.frontier_plot.plot_frontier` draws hollow and grey, labelled "(uses test labels)",
    never as a competitor. The intervals, (low, high) each, where the result carries them (the benchmark's 95%
    intervals), are drawn as error bars: ``accuracy_interval`` vertical, ``team_size_interval`` or ``cost_interval``
    horizontal.
    """

    name: str
    alpha: float
    accuracy: float
    reward: float
    team_size: float
    cost: float | None
    uses_test_labels: bool = False
    accuracy_interval: tuple[float, float] | None = None
    team_size_interval: tuple[float, float] | None = None
    cost_interval: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        for field in ("accuracy_interval", "team_size_interval", "cost_interval"):
            interval = getattr(self, field)
            if interval is not None and not (len(interval) == 2 and float(interval[0]) <= float(interval[1])):
                raise ValueError(f"FrontierPoint {self.name!r}: {field} must be (low, high) with low <= high")


def _progress(total: int, enabled: bool) -> Any:
    """A tqdm bar (shown after 2 s) when tqdm is installed and ``enabled``, else None."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="frontier", unit="step", delay=2.0, leave=False)


def frontier(
    cache: LogitCache,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    *,
    split: str = "test",
    train_split: str = "train",
    reward: RewardSettings = DEFAULT_REWARD,
    k: int = 3,
    seed: int | None = 0,
    names: Iterable[str] | None = None,
    routers: dict[str, routing.RouterFit] | None = None,
    progress: bool = True,
) -> list[FrontierPoint]:
    """The baselines ``names`` at every size penalty of ``alphas`` (each >= 0), as
    :func:`~ensemble_env.baselines.comparison.compare` runs them with ``reward`` at that alpha.

    The routers are fitted once (their fit does not depend on alpha; ``routers`` may hold them already, as
    :func:`~ensemble_env.baselines.comparison.fit_routers` returns them); the baselines of the registry that depend on
    alpha (:attr:`~ensemble_env.baselines.registry.Baseline.alpha_dependent`) choose their teams anew at each alpha, the
    others are run once and only their reward is recomputed. Points come alpha by alpha, in the order of
    :data:`~ensemble_env.baselines.registry.BASELINES`. A progress bar (tqdm, when installed and ``progress``) shows
    after two seconds.
    """
    values = [check_alpha(alpha) for alpha in alphas]
    if not values:
        raise ValueError("alphas is empty: give at least one size penalty to sweep")
    chosen = baseline_names(cache, names)
    moving = [name for name in chosen if BASELINES[name].alpha_dependent]
    fitted = dict(routers or {})
    fitting = [name for name in moving if BASELINES[name].fit is not None and name not in fitted]
    bar = _progress(len(fitting) + 1 + len(values), progress)
    common: dict[str, Any] = {"split": split, "train_split": train_split, "k": k, "seed": seed}
    for name in fitting:
        fitted.update(fit_routers(cache, split=split, train_split=train_split, names=[name]))
        if bar is not None:
            bar.update()
    fixed = [name for name in chosen if name not in moving]
    still = compare(cache, **common, names=fixed) if fixed else []
    if bar is not None:
        bar.update()
    points = []
    for alpha in values:
        at_alpha = dataclasses.replace(reward, alpha=alpha)
        moved = compare(cache, **common, reward=at_alpha, names=moving, routers=fitted) if moving else []
        by_name = {result.name: result for result in [*still, *moved]}
        for result in sorted(by_name.values(), key=lambda result: _order(result.name)):
            score = result.scores(cache, at_alpha)
            reference = _uses_test_labels(result.name)
            points.append(
                FrontierPoint(
                    result.name, alpha, score["accuracy"], score["reward"], score["team_size"], score["cost"], reference
                )
            )
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return points


def _order(name: str) -> int:
    """Position of a result name in :data:`~ensemble_env.baselines.registry.BASELINES` (after them: no baseline)."""
    entry = baseline_of(name)
    return len(BASELINES) if entry is None else list(BASELINES).index(entry.name)


def _uses_test_labels(name: str) -> bool:
    """Whether the result ``name`` is a baseline of the registry that reads the test labels (an oracle)."""
    entry = baseline_of(name)
    return entry is not None and entry.uses_test_labels


def sweeps(name: str) -> bool:
    """Whether the result ``name`` is a baseline that chooses its teams by the reward at alpha, so that the frontier
    sweeps it (a learned policy's points, drawn beside them, are not)."""
    entry = baseline_of(name)
    return entry is not None and entry.alpha_dependent


def format_frontier(points: Sequence[FrontierPoint], cost_format: str = "{:.2f}") -> str:
    """A plain-text table of :func:`frontier`'s points: a row per alpha for the baselines of
    the registry that depend on alpha (:attr:`~ensemble_env.baselines.registry.Baseline.alpha_dependent`), then one row
    for each other baseline (alpha ``any``: its answers do not depend on it; reward ``-``: that does). ``cost_format``
    formats the costs (``baselines.cost_format(cache)``)."""

    rows, seen = [], set()
    for point in sorted(points, key=lambda point: (not sweeps(point.name), _order(point.name))):
        moving = sweeps(point.name)
        if not moving and point.name in seen:
            continue
        seen.add(point.name)
        rows.append(
            [
                point.name,
                f"{point.alpha:g}" if moving else "any",
                f"{point.accuracy:.4f}",
                f"{point.reward:.4f}" if moving else "-",
                f"{point.team_size:.2f}",
                "-" if point.cost is None else cost_format.format(point.cost),
            ]
        )
    return "\n".join(align_table(["baseline", "alpha", "accuracy", "reward", "team", "cost"], rows))
