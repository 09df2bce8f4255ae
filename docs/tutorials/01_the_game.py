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
# # Lesson 1: the game
#
# Two agents answer a stream of multiple-choice questions together. The **decider** picks a team of
# language models for each question; the **fusion** agent reads the team's probabilities for each answer
# choice and answers. They share one reward. Neither sees the one thing that decides the reward: the
# label. This lesson shows what each agent observes, lets you play either role, runs scripted policies
# over the whole test stream, and measures how far they stay from the oracle, and why.
#
# Run it as a script (`python docs/tutorials/01_the_game.py`, about 2 s of CPU) or as a notebook
# (`01_the_game.ipynb`, beside the script and made from it). Figures go to the output folder described in
# [the course README](README.md). Needs `pip install -e ".[plot]"`.

# %%
import course
import numpy as np

import ensemble_env
from ensemble_env import baselines, datasets
from ensemble_env.views.play import play
from ensemble_env.views.policies import FixedTeam, MeanVote, PluralityVote

plt = course.pyplot()

# %% [markdown]
# ## The data: a logit cache
#
# The game replays what a pool of models answered on a benchmark. The built-in cache `bbh5` holds five
# open LLMs on 16 BIG-Bench-Hard tasks: for every question, every model's probability of every answer
# choice, the gold label, the task and the text of the question.

# %%
cache = datasets.load("bbh5")
print(cache.n_questions, "questions,", cache.n_models, "models,", cache.n_tasks, "tasks")
for i, model in enumerate(cache.models):
    print(f"  model {i}: {model}")
test = cache.select(split="test")
print("test questions:", test.size, "| train:", cache.select(split="train").size)
q = int(test[0])
print(f"\nquestion {q} ({cache.task_names[cache.tasks[q]]}, {cache.n_choices[q]} choices, gold {cache.labels[q]}):")
print(" ", cache.question_text[q][:300])
print("each model's probability of each choice:\n", np.round(cache.probs[q, :, : cache.n_choices[q]], 2))

# %% [markdown]
# ## What each agent sees
#
# `parallel_env` is a PettingZoo environment. Each observation is one flat `float32` vector; the
# environment's layout names its parts.

# %%
env = ensemble_env.parallel_env(split="test", render_mode="ansi")
obs, infos = env.reset(seed=0)
layout = env.engine.layout
for agent in env.possible_agents:
    print(f"{agent}: observation {env.observation_space(agent).shape}, action {env.action_space(agent)}")
    parts = layout.decider if agent == "decider" else layout.fusion
    for name, part in parts.items():
        print(f"    {name:<12} {part.stop - part.start:>3} numbers: {np.round(obs[agent][part][:8], 3)}")

# %% [markdown]
# - The **decider** sees the team it has committed (a mask), its size, and two statistics of that team over
#   the last T answered questions: *focal diversity* (do its members fail on different questions?) and the
#   accuracy of their plurality vote. Nothing about the question coming next (lesson 2 adds that).
# - The **fusion** agent sees the probabilities of the team's members for the current question (zeros for
#   models outside the team: 5 models x 19 choices, the largest choice count), the team mask, its last 8
#   rewards and which choices are valid.
# - Neither sees the **label**. It is in `infos` (for logging and scoring), never in an observation. An agent
#   that read `infos["fusion"]["label"]` would be cheating.
#
# `env.state()` is what a centralized critic may see during training (lesson 4): both observations side by
# side, still without the label.

# %%
state = env.state()
print("state:", state.shape, "= decider", layout.decider_size, "+ fusion", layout.fusion_size)
assert np.array_equal(state, np.concatenate([obs["decider"], obs["fusion"]]))

# %% [markdown]
# ## One step, in order
#
# At step t the fusion agent answers question $q_t$ with the team $E_t$ the decider committed one step
# earlier ($E_0$, the initial team, is every model), and at the same time the decider commits $E_{t+1}$ for
# the next question. Both receive $r_t = +1$ if the answer is right, else $r_t = -1 - \alpha \lvert E_t \rvert / N$. The
# decider's action therefore pays off one step later (lesson 3).

# %%
fuse = MeanVote.from_env(env)
print(env.render())
for team in ([1, 0, 1, 0, 1], [0, 0, 0, 0, 1]):
    actions = {"decider": np.array(team, dtype=np.int8), "fusion": int(fuse(obs["fusion"])[0])}
    obs, rewards, terminations, truncations, infos = env.step(actions)
    print(env.render())
print("after the step, infos (not observations) report the label of the question answered:", infos["fusion"]["label"])

# %% [markdown]
# ## Play it yourself
#
# In a terminal, `ensemble-env play` makes you the fusion agent (the decider commits every model) and
# `ensemble-env play --role decider` makes you the decider (the fusion agent takes the team's mean vote).
# You see exactly your agent's observation; `--show-text` adds the question's text, which no agent sees.
# Here the same game is played from a list of answers instead of the keyboard:

# %%
result = play("fusion", questions=2, seed=3, team="2,4", inputs=["0", "1"], echo=True)

# %% [markdown]
# ## Scripted policies over the whole test stream
#
# Each pair below is a decider (a fixed or random team) and a fusion rule (the mean of the members'
# probabilities, or one vote per member). Both read only their observations. The **oracle** is right
# whenever any model of the pool is right: an upper bound no agent can reach without the labels.

# %%
rng = np.random.default_rng(0)
best = baselines.best_single(cache, cache.select(split="train"), test)  # chosen on train
best_model = best.info["model"]


def random_pair(k: int):
    def decide(decider_obs: np.ndarray) -> np.ndarray:
        team = np.zeros(cache.n_models, dtype=np.int8)
        team[rng.choice(cache.n_models, size=k, replace=False)] = 1
        return team

    return decide


def play_stream(decide, fusion_rule, render: bool = False) -> dict[str, np.ndarray]:
    """One episode over the test stream; per step: right or wrong, reward, team size, running accuracy."""
    game = ensemble_env.parallel_env(split="test", render_mode="rgb_array" if render else None)
    obs, _ = game.reset(seed=0)
    fusion = fusion_rule.from_env(game)
    log: dict[str, list[float]] = {"correct": [], "reward": [], "team_size": [], "accuracy": []}
    while game.agents:
        actions = {"decider": np.asarray(decide(obs["decider"])).reshape(-1), "fusion": int(fusion(obs["fusion"])[0])}
        obs, _, _, _, infos = game.step(actions)
        for key in log:
            log[key].append(infos["fusion"][key])
    out = {key: np.array(values) for key, values in log.items()}
    if render:
        out["frame"] = game.render()
    return out


every = FixedTeam.from_env(env)
policies = {
    "every model + mean vote": (lambda o: every(o)[0], MeanVote),
    "every model + plurality": (lambda o: every(o)[0], PluralityVote),
    f"best single ({best_model.split('__')[-1]})": (lambda o: FixedTeam.from_env(env, [best_model])(o)[0], MeanVote),
    "random team of 2 + mean vote": (random_pair(2), MeanVote),
}
runs = {
    name: play_stream(decide, rule, render=(name == "random team of 2 + mean vote"))
    for name, (decide, rule) in policies.items()
}
oracle = cache.correct[test].any(axis=1)
print(f"{'policy':<42} accuracy  mean reward  team size")
for name, run in runs.items():
    print(f"{name:<42} {run['correct'].mean():8.3f}  {run['reward'].mean():+11.3f}  {run['team_size'].mean():9.2f}")
print(f"{'oracle (needs the labels)':<42} {oracle.mean():8.3f}")

# %% [markdown]
# ## Why no agent reaches the oracle
#
# The oracle is right on 83% of the test questions, the best pair above on about half. Split the questions
# by how many of the five models are right on them, and look at how often the mean vote of all five is
# right in each group:

# %%
n_right = cache.correct[test].sum(axis=1)
vote_right = runs["every model + mean vote"]["correct"].astype(bool)
groups = np.arange(cache.n_models + 1)
share_right = np.array([vote_right[n_right == k].mean() if np.any(n_right == k) else np.nan for k in groups])
counts = np.bincount(n_right, minlength=cache.n_models + 1)
for k in groups:
    print(f"{k} of 5 models right: {counts[k]:>3} questions, the vote is right on {share_right[k]:.2f} of them")

# %% [markdown]
# When four or five models are right the vote always is, with three usually (81%); when nobody is right
# nobody can be. The
# whole gap to the oracle is in the questions only one or two models get right: the fusion agent then sees
# five sets of probabilities and must guess which minority to trust, without the label. A decider that
# knew *in advance* which model will be right would close the gap, but it commits the team before seeing
# the question (its observation is the history of the stream). That is partial observability, the
# subject of lesson 2.

# %%
figure = plt.figure(figsize=(13, 9.5))
grid = figure.add_gridspec(2, 2, height_ratios=[1, 1.15])
ax_play, ax_gap, ax_frame = (
    figure.add_subplot(grid[0, 0]),
    figure.add_subplot(grid[0, 1]),
    figure.add_subplot(grid[1, :]),
)
for name, run in runs.items():
    ax_play.plot(run["accuracy"], label=name)
steps = np.arange(1, test.size + 1)
ax_play.plot(np.cumsum(oracle) / steps, color="black", linestyle="--", label="oracle (any model right)")
ax_play.set(xlabel="question of the test stream", ylabel="running accuracy", ylim=(0, 1), title="Scripted play")
ax_play.legend(fontsize=8, loc="lower right")
ax_gap.bar(groups, share_right, color="tab:blue")
for k in groups:
    ax_gap.text(k, 0.02, f"n={counts[k]}", ha="center", fontsize=8, color="white" if share_right[k] > 0.1 else "k")
ax_gap.set(xlabel="models of 5 right on the question", ylabel="share the mean vote gets right", ylim=(0, 1.05))
ax_gap.set_title("Where the gap to the oracle is (every model + mean vote)")
ax_frame.imshow(runs["random team of 2 + mean vote"]["frame"], interpolation="nearest")
ax_frame.set_axis_off()
ax_frame.set_title('The end of the random-team episode, drawn by render_mode="rgb_array"')
figure.tight_layout()
course.save_figure(figure, "01_the_game.png")

# %% [markdown]
# ## Exercises
#
# 1. Write a fusion rule that answers with the choice of the single most confident member (the largest
#    probability anywhere in the team's rows) and compare it with the mean vote over the test stream.
# 2. Which fixed team of two models has the best mean reward on the **train** split at alpha = 1? Does it
#    keep its rank on the test split?
# 3. Play `ensemble-env play --questions 10` twice: once looking at the numbers only, once with
#    `--show-text`. Did the text help you beat the team's mean vote?
#
# <details><summary>Answers</summary>
#
# 1. ```python
#    def most_confident(fusion_obs):
#        probs = fusion_obs[layout.fusion["probs"]].reshape(cache.n_models, cache.max_choices)
#        return int(np.argmax(probs.max(axis=0)))   # zero rows (models outside the team) never win
#    ```
#    Plug it in place of `fusion(obs["fusion"])` in `play_stream`. With every model on the bbh5 test
#    stream it scores 0.515, against 0.512 for the mean vote: no better. The most confident model is often
#    a confidently wrong one (calibration differs a lot between these models); telling which confident
#    member to trust needs more than one number per model (lesson 4's fusion actor learns weights per task).
# 2. Enumerate the ten pairs with `FixedTeam.from_env(env, [i, j])` on `parallel_env(split="train")` and
#    keep the best mean reward; then play that pair on `split="test"`. Choosing on train and reporting on
#    test is the rule for every comparison in this course (settings are chosen on the validation split,
#    never on test). `ensemble-env baselines bbh5` prints the per-task version of this choice
#    (`static_team`).
# 3. It depends on you; the point is that the text is information neither agent has. The fusion agent's
#    only evidence is the five probability vectors.
#
# </details>
