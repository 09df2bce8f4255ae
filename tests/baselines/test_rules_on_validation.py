"""The partial-feedback rules and bayes_team choosing their constants on validation tasks (``choose_on="validation"``,
the generated-task protocol's mode): what they read, what they choose on, and the refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ensemble_env.baselines import bayes, comparison, partial
from ensemble_env.baselines import registry as baselines
from ensemble_env.baselines.online import stream_means
from ensemble_env.baselines.outcomes import team_outcomes
from ensemble_env.cache import synthetic

#: the constants each rule reports in its info
CONSTANTS = ("pseudo_count", "explore", "exploration", "scale", "prior_scale", "shrinkage")


def split_by_task():
    """A cache of 10 tasks: 6 train tasks, 2 validation tasks, 2 held-out (test) tasks, each task whole."""
    cache = synthetic.make_cache(n_models=3, n_questions=1200, n_tasks=10, accuracy=[0.5, 0.6, 0.7], seed=0)
    names = np.asarray(cache.task_names)[cache.tasks]
    parts = [np.flatnonzero(np.isin(names, cache.task_names[a:b])) for a, b in ((0, 6), (6, 8), (8, 10))]
    return cache, *parts


def rules():
    return {**partial.rules(0), "bayes_team": bayes.bayes_team}


def chosen(info):
    return {key: info[key] for key in (*CONSTANTS, "grid_scores", "validation_reward") if key in info}


@pytest.mark.parametrize("name", list(rules()))
def test_the_choice_on_validation_reads_no_test_label(name: str) -> None:
    cache, train, validation, test = split_by_task()
    rule = rules()[name]
    result = rule(cache, train, test, validation=validation, choose_on="validation")
    assert result.info["fitted_on"] == "validation tasks' streams, with the train tasks as the prior"
    assert set(result.info["training_tasks"]) == set(cache.task_names[:6])  # the prior: the train tasks alone
    labels = np.array(cache.labels)
    labels[test] = (labels[test] + 1) % np.asarray(cache.n_choices)[test]  # every test label wrong now
    changed = dataclasses.replace(cache, labels=labels)
    flipped = rule(changed, train, test, validation=validation, choose_on="validation")
    assert chosen(flipped.info) == chosen(result.info)
    assert "validation_reward" in result.info


def test_each_setting_is_scored_as_a_held_out_play_of_the_validation_tasks_with_the_train_prior() -> None:
    """greedy_team's score of n0 on validation is its own play of the validation tasks as held-out tasks, the train
    tasks its prior, with n0 alone in the grid; the chosen n0 then plays test with the same prior."""
    cache, train, validation, test = split_by_task()
    result = partial.greedy_team(cache, train, test, validation=validation, choose_on="validation")
    out = team_outcomes(cache, validation)
    tasks = np.asarray(cache.tasks)[validation]
    for label, score in result.info["grid_scores"].items():
        n0 = float(label.split("=")[1])
        play = partial.greedy_team(cache, train, validation, pseudo_counts=[n0])
        codes = 1 << np.arange(cache.n_models)
        row_of = {int(code): row for row, code in enumerate(out.teams @ codes)}
        teams = np.array([row_of[int(code)] for code in play.teams @ codes])  # each question's team row
        assert np.array_equal(out.teams[teams], play.teams)
        streams = [out.rewards[:, tasks == task] for task in np.unique(tasks)]
        picks = [teams[tasks == task] for task in np.unique(tasks)]
        assert stream_means(streams, picks) == pytest.approx(score, abs=1e-12)
    alone = partial.greedy_team(cache, train, test, pseudo_counts=[result.info["pseudo_count"]])
    assert np.array_equal(alone.teams, result.teams)


def test_the_mode_goes_through_the_registry_and_compare() -> None:
    cache, _, validation, test = split_by_task()
    split = np.zeros(cache.n_questions, dtype=np.int64)
    split[validation], split[test] = 2, 1
    posed = dataclasses.replace(cache, split=split)
    for choose_on, where in (("validation", "validation tasks'"), ("training", "training tasks'")):
        (result,) = comparison.compare(posed, names=["etc_team"], choose_on=choose_on)
        assert result.info["fitted_on"].startswith(where)
    (fixed,) = comparison.compare(posed, names=["global_team"], choose_on="validation")  # a rule choosing nothing
    assert fixed.info["fitted_on"].startswith("training tasks")
    assert baselines.lookup("thompson_team").seeded and baselines.lookup("random_team").seeded
    assert not baselines.lookup("bayes_team").seeded and not baselines.lookup("greedy_team").seeded


def test_the_mode_is_refused_without_validation_tasks_or_by_another_name() -> None:
    cache, train, validation, test = split_by_task()
    with pytest.raises(ValueError, match=r"choose_on='validation'.*give validation questions"):
        partial.etc_team(cache, train, test, choose_on="validation")
    with pytest.raises(ValueError, match="choose_on must be one of training, validation, got 'test'"):
        bayes.bayes_team(cache, train, test, validation=validation, choose_on="test")
    one = np.flatnonzero(np.asarray(cache.tasks) == 0)
    with pytest.raises(ValueError, match="at least two train tasks, got 1"):
        bayes.bayes_team(cache, one, test, validation=validation, choose_on="validation")
