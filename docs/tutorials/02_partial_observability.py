# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lesson 2: partial observability
#
# In a Dec-POMDP each agent acts on its own observation of a state it never sees whole. Here the state
# includes the next question and its label; the decider, by default, observes only the recent history of
# its team (window statistics). This lesson measures what the decider can **infer** from that history,
# what a decider acting on history alone achieves, and what changes when it is given a **lookahead**: the
# task or the text features of $q_{t+1}$, the question the team it commits now will answer
# (`decider_extras=("task",)` / `("features",)`).
#
# No learning here: every decider below is a few lines of numpy reading its observation, fitted on the
# train split, tuned on validation and scored on test. About 8 s of CPU as a script; needs `.[plot]`.

# %%
import course
import numpy as np

import ensemble_env
from ensemble_env import baselines, datasets
from ensemble_env.baselines import routing
from ensemble_env.views.policies import MeanVote

plt = course.pyplot()
cache = datasets.load("bbh5")
train, validation, test = (cache.select(split=split) for split in ("train", "validation", "test"))
N, TASKS = cache.n_models, cache.n_tasks
SEEDS = course.budget(default=[0, 1, 2, 3, 4], quick=[0, 1])
WINDOWS = course.budget(default=[10, 25, 50, 100, 500], quick=[10, 500])


def play_stream(make_decider, split: str, order: str, seed: int, **options):
    """One episode over ``split`` with the fusion agent's mean vote; per step: the decider's observation,
    right or wrong, reward, team size. ``make_decider(layout)`` returns obs -> team mask."""
    venv = ensemble_env.vector_env(1, cache, split=split, order=order, **options)
    obs, _ = venv.reset(seed=seed)
    decide, fuse = make_decider(venv.layout.decider), MeanVote.from_env(venv)
    log = {"obs": [], "correct": [], "reward": [], "team_size": []}
    for _ in range(venv.episode_length):
        log["obs"].append(obs["decider"][0].copy())
        actions = {"decider": decide(obs["decider"][0])[None], "fusion": fuse(obs["fusion"])}
        obs, rewards, _, _, infos = venv.step(actions)
        log["correct"].append(infos["fusion"]["correct"][0])
        log["reward"].append(rewards["fusion"][0])
        log["team_size"].append(infos["fusion"]["team_size"][0])
    return {key: np.array(values) for key, values in log.items()}


# %% [markdown]
# ## What the window can tell about the next question
#
# The streams are played in the cache's order, where each task is a block of consecutive questions (50 per
# task on test), or shuffled (`order="shuffled"`). Turn on `decider_extras=("model_accuracy", "task")`: the
# first adds each model's accuracy over the window (still history), the second the task of $q_{t+1}$, used
# here **only as the answer key** of a probe. The probe is a nearest-centroid classifier from the history
# part of the observation (the two team statistics and the five model accuracies) to that task, fitted on
# the train stream and scored on the test stream. Chance is 1/16.


# %%
def every_model(layout):
    return lambda obs: np.ones(N, dtype=np.int8)


def probe_accuracy(window: int, order: str) -> float:
    data = {}
    for split in ("train", "test"):
        run = play_stream(every_model, split, order, 0, window=window, decider_extras=("model_accuracy", "task"))
        layout = ensemble_env.vector_env(1, cache, window=window, decider_extras=("model_accuracy", "task")).layout
        history = run["obs"][:, np.r_[layout.decider["statistics"], layout.decider["model_accuracy"]]]
        data[split] = history, run["obs"][:, layout.decider["task"]].argmax(axis=1)
    x, y = data["train"]
    centroids = np.array([x[y == task].mean(axis=0) for task in range(TASKS)])
    x_test, y_test = data["test"]
    predicted = np.argmin(((x_test[:, None, :] - centroids[None]) ** 2).sum(axis=2), axis=1)
    return float(np.mean(predicted == y_test))


probe = {order: [probe_accuracy(window, order) for window in WINDOWS] for order in ("sequential", "shuffled")}
for order, values in probe.items():
    print(f"{order:<10}", "  ".join(f"T={w}: {v:.2f}" for w, v in zip(WINDOWS, values, strict=True)))

# %% [markdown]
# In the task-blocked stream a short window names the task far above chance: the last few questions are
# almost all from the current block, and each task leaves its own fingerprint on the models' accuracies.
# A long window mixes many blocks and forgets. In the shuffled stream the history says nothing about the
# next question: the probe is at chance for every T. What the decider can infer depends on the stream, not
# only on its observation: memory is worth something only when the world has structure over time.
#
# ## Deciders that act on what they observe
#
# Four deciders, each reading only its own observation:
#
# - **fixed**: the best single model on the train split, whatever it observes;
# - **history**: "follow the leader": the model with the best accuracy over the window (`model_accuracy`),
#   with the window T chosen on the **validation** stream;
# - **task lookahead**: the team with the best train reward for the task of $q_{t+1}$ (the `static_team`
#   baseline's table, read through the one-hot in the observation);
# - **feature lookahead**: the per-question router of `ensemble_env.baselines.routing`: for each of the 31 teams a
#   logistic regression (fitted on train, penalty chosen on validation) predicts from the 64 text features
#   of $q_{t+1}$ whether the team's vote will be right; the decider takes the team with the best expected
#   reward.

# %%
best_model = cache.models.index(baselines.best_single(cache, train, test).info["model"])


def fixed(layout):
    team = np.zeros(N, dtype=np.int8)
    team[best_model] = 1
    return lambda obs: team


def follow_the_leader(layout):
    def decide(obs):
        team = np.zeros(N, dtype=np.int8)
        team[int(np.argmax(obs[layout["model_accuracy"]]))] = 1
        return team

    return decide


static = routing.static_team(cache, train, test)  # chooses on train only; test is just where it is scored
task_teams = np.zeros((TASKS, N), dtype=np.int8)
for task, members in static.info["teams"].items():
    task_teams[cache.task_names.index(task), [cache.models.index(model) for model in members]] = 1


def task_lookahead(layout):
    return lambda obs: task_teams[int(np.argmax(obs[layout["task"]]))]


# the penalty is chosen on validation among ROUTER_L2_GRID (the quick budget tries one value)
L2_GRID = course.budget(default=routing.ROUTER_L2_GRID, quick=(1e-2,))
router = routing.fit_router(cache, train, inputs="features", validation=validation, l2_grid=L2_GRID)
teams = router.teams.astype(np.int8)
team_share = teams.sum(axis=1) / N


def feature_lookahead(layout, alpha: float = 1.0):
    def decide(obs):
        x = (obs[layout["features"]] - router.center) / router.scale
        p_right = 1.0 / (1.0 + np.exp(-(router.weights[:, 0] + router.weights[:, 1:] @ x)))
        expected = p_right * 1.0 + (1.0 - p_right) * (-1.0 - alpha * team_share)  # the environment's reward
        return teams[int(np.argmax(expected))]

    return decide


validation_scores = {}
for window in WINDOWS:
    run = play_stream(
        follow_the_leader, "validation", "sequential", 0, window=window, decider_extras=("model_accuracy",)
    )
    validation_scores[window] = float(run["reward"].mean())
best_window = max(validation_scores, key=validation_scores.get)
print("follow the leader, mean validation reward by window:", {w: round(v, 3) for w, v in validation_scores.items()})
print("chosen window T =", best_window)

deciders = {
    "fixed best single": (fixed, {}),
    f"history (T={best_window})": (follow_the_leader, {"window": best_window, "decider_extras": ("model_accuracy",)}),
    "task lookahead": (task_lookahead, {"decider_extras": ("task",)}),
    "feature lookahead": (feature_lookahead, {"decider_extras": ("features",)}),
}
scores = {}
print(f"\n{'decider':<22} {'stream':<10}  accuracy (95% CI)   mean reward (95% CI)  team")
for name, (make, options) in deciders.items():
    for order in ("sequential", "shuffled"):
        runs = [play_stream(make, "test", order, seed, **options) for seed in (SEEDS if order == "shuffled" else [0])]
        accuracy = course.mean_ci([run["correct"].mean() for run in runs])
        reward = course.mean_ci([run["reward"].mean() for run in runs])
        size = np.mean([run["team_size"].mean() for run in runs])
        scores[name, order] = accuracy, reward
        print(
            f"{name:<22} {order:<10}  {accuracy[0]:.3f} +- {accuracy[1]:.3f}    {reward[0]:+.3f} +- {reward[1]:.3f}"
            f"      {size:.2f}"
        )
oracle = cache.correct[test].any(axis=1).mean()
print(f"oracle (any model right): {oracle:.3f}")

# %% [markdown]
# (The sequential stream is one fixed episode, so it has no interval; shuffled streams are averaged over
# seeds. Every decider's first question is answered by the initial team, every model: the decider commits
# only from the second question on.)
#
# What changes with the observation:
#
# - **History** beats the fixed model only on the task-blocked stream; on shuffled streams it does no
#   better (slightly worse on average), the window's leader being a noisy estimate of the best model
#   overall.
# - **The task of $q_{t+1}$** is the most valuable thing to add: the same accuracy and reward in both orders
#   (it no longer depends on the stream's structure), with teams of 1.3 models on average.
# - **The 64 text features** name the question more precisely than its task, yet do worse than the task
#   alone: with 160 train questions per task, 31 regressions on 64 features generalise less well than a
#   16-row table. More information in the observation helps only if the policy can learn to use it from the
#   data it has.
# - All are far from the oracle (0.83): knowing the task is not knowing which model will be right on this
#   question.

# %%
figure, (ax_probe, ax_bars) = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"width_ratios": [1, 1.5]})
for order, marker in (("sequential", "o"), ("shuffled", "s")):
    ax_probe.plot(WINDOWS, probe[order], marker=marker, label=f"{order} stream")
ax_probe.axhline(1 / TASKS, color="gray", linestyle=":", label="chance (1/16)")
ax_probe.set(xscale="log", xlabel="window T (questions)", ylabel="probe accuracy", ylim=(0, 1))
ax_probe.set_title("Can the history name the next question's task?")
ax_probe.legend()
names = list(deciders)
x = np.arange(len(names))
for k, (order, color) in enumerate((("sequential", "tab:blue"), ("shuffled", "tab:orange"))):
    means = [scores[name, order][1][0] for name in names]
    errors = [scores[name, order][1][1] for name in names]
    ax_bars.bar(x + (k - 0.5) * 0.38, means, width=0.38, yerr=errors, color=color, label=f"{order} stream", capsize=3)
ax_bars.axhline(0, color="black", linewidth=0.8)
ax_bars.set_xticks(x, [name.replace(" (", "\n(") for name in names])
ax_bars.set(ylabel="mean reward per question (alpha = 1), test")
ax_bars.set_title("What each observation is worth (mean vote as the fusion agent)")
for k, name in enumerate(names):
    ax_bars.text(
        k,
        -0.2,
        f"accuracy\n{scores[name, 'sequential'][0][0]:.3f} / {scores[name, 'shuffled'][0][0]:.3f}",
        ha="center",
        fontsize=8,
    )
ax_bars.set_ylim(-0.24, 0.12)
ax_bars.legend(loc="upper left")
figure.tight_layout()
course.save_figure(figure, "02_partial_observability.png")

# %% [markdown]
# ## Exercises
#
# 1. Can the **features** identify the task? Run the nearest-centroid probe on `obs[layout["features"]]`
#    (with `decider_extras=("features", "task")`) instead of the history. What does the answer say about the
#    feature lookahead's weaker score?
# 2. Combine history and lookahead: within the task named by the observation, follow the model with the best
#    window accuracy *on that task*. You will need your own memory (a dict of per-task counts updated from
#    `infos`), because the window's statistics mix tasks. Choose the memory length on validation.
# 3. The fusion agent has its own observation extras: `fusion_extras=("task",)`. Which fusion rule could use
#    the task, and what would it learn? (Lesson 4 trains one.)
#
# <details><summary>Answers</summary>
#
# 1. Yes: the probe names the task of every test question (accuracy 1.00). The text features (hashed
#    n-grams, TF-IDF, SVD of the question text) separate the 16 tasks, whose wording differs a lot. So the
#    router *could* recover the task table, but it has to learn it through 31 regressions with 64 inputs
#    each from 2,560 questions, and its penalty (chosen on validation) trades that against overfitting
#    per-question noise. Giving the task explicitly is a shortcut the learner does not have to discover.
# 2. Keep, per task, the correctness of each model on the last m answered questions of that task (after
#    each step `infos["fusion"]["question"]` names the question just answered; `cache.correct` of a past
#    question is history, as the window statistics are) and pick the model with the most right answers.
#    With m = 20 (validation) it reaches about 0.50 on the sequential test stream and 0.52 on shuffled
#    ones (three seeds): no better than the fixed best model, far below the task lookahead's table. Within
#    one stream each task has only 50 questions to learn from; the table was fitted on 160 per task.
#    Memory inside an episode is no substitute for training data.
# 3. A per-task weighting of the members: trust Mixtral on `navigate`, phi-2 on `logical_deduction`, and so
#    on. The reference learner's fusion actor is exactly that, a conditional-logit model gated by the task
#    one-hot (docs/mappo.md), and the `stacking(per_task)` baseline is its supervised twin (0.609 on test
#    with every model).
#
# </details>
