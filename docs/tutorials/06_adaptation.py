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
# # Lesson 6: adapting to a task never seen
#
# In lessons 1 to 5 the agents know which task a question comes from, and the best they can do is a table: per
# task, the team that did best on that task's training questions. Nothing is left to learn while they play. Here
# the task is **new**: the agents were trained on other tasks, the task's identity is hidden, and all they can go
# on is what the episode reveals as it goes (after each answer, every model's correctness on that question). That
# is the problem both seed papers are about, and it is the one where a policy's memory and its two agents'
# coordination can show. This lesson plays the scenario `ensemble_env/EnsembleUnseen-v1`, looks at what the
# agents observe (the task's record), and measures the simple policies a learner must beat: the training tasks'
# best team, follow-the-leader (each question, the team with the best record on this task so far), and the best
# team in hindsight (which reads the task's labels: a reference).
#
# Run it as a script (`python docs/tutorials/06_adaptation.py`, about 3 s of CPU) or as a notebook
# (`06_adaptation.ipynb`). Needs `pip install -e ".[plot]"`.

# %%
import course
import numpy as np

import ensemble_env
from ensemble_env import datasets
from ensemble_env.baselines import unseen
from ensemble_env.game.config import unseen_game

plt = course.pyplot()

# %% [markdown]
# ## The scenario: one task per episode, its record in the observation
#
# Every episode plays all the questions of one task, in order, from an empty history. The decider's observation
# carries the task's record: a count feature n / (n + 16) of the questions answered so far and each model's and
# each team's correct rate on them; the fusion agent's, its team members' rates. There is no task one-hot.

# %%
cache = datasets.load("bbh5")
print("options:", unseen_game(cache.n_models))
venv = ensemble_env.unseen_vector_env(1, cache, split="test")
record = venv.layout.decider["task_record"]
obs, infos = venv.reset(seed=0)
print("decider observation:", obs["decider"].shape[1], "values; its task record:", record)
for step in range(5):
    actions = {"decider": np.ones((1, cache.n_models), dtype=np.int8), "fusion": np.zeros(1, dtype=np.int64)}
    obs, rewards, terminations, truncations, infos = venv.step(actions)
    count, rates = obs["decider"][0, record][0], obs["decider"][0, record][1:]
    print(f"after {step + 1} answers: count feature {count:.3f} (n / (n + 16)), correct rates {np.round(rates, 2)}")

# %% [markdown]
# ## The opponents, each task held out in turn
#
# `unseen.leave_one_task_out` trains on every question of 15 tasks and streams every question of the 16th from an
# empty history, for each task in turn. `global_team` plays the training tasks' best team everywhere; `ftl_team`
# follows the leader on the task's record; `hindsight_team` is the best fixed team of the task, chosen with its
# labels (a reference, not a competitor).
#
# Timing matters. The decider commits the team of the next question in the same step as the current one is
# answered, before that answer is scored, so it always chooses one outcome behind. `ftl_team` waits the same way
# (it reads exactly what the decider's observation holds); `ftl_team(no_delay)` also reads the outcome of the
# question just answered, which this game never gives its decider.

# %%
names = ["global_team", "ftl_single", "ftl_team", "ftl_team(no_delay)", "ucb_team", "hindsight_team"]
results = unseen.leave_one_task_out(cache, names=names)
summary = unseen.summarize(cache, results)
for name in names:
    print(f"{name:18s} reward per question {summary[name]['reward']:+.4f}  accuracy {summary[name]['accuracy']:.4f}")

# %% [markdown]
# ## What the record is worth, task by task
#
# Per held-out task, follow-the-leader's reward minus the global team's: the leader starts at the global team (an
# empty record) and switches as the record accumulates evidence; where the global team is already the task's best,
# switching can only lose a little.

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4))
gains = [
    ftl.rewards(cache).mean() - glob.rewards(cache).mean()
    for ftl, glob in zip(results["ftl_team"], results["global_team"], strict=True)
]
axes[0].barh(np.arange(cache.n_tasks), gains, color="tab:blue")
axes[0].set_yticks(np.arange(cache.n_tasks), [name[:22] for name in cache.task_names], fontsize=7)
axes[0].axvline(0.0, color="grey", lw=0.8)
axes[0].set_xlabel("ftl_team minus global_team: reward per question")
axes[0].set_title("what the record is worth, per held-out task")
for name in names:
    axes[1].bar(name, summary[name]["reward"], color="lightgrey" if name == "hindsight_team" else "tab:blue",
                hatch="//" if name == "hindsight_team" else None)  # fmt: skip
axes[1].set_ylabel("reward per question")
axes[1].set_title("the simple opponents (hatched: reads the task's labels)")
axes[1].tick_params(axis="x", rotation=30, labelsize=8)
figure.tight_layout()
course.save_figure(figure, "06_adaptation.png")

# %% [markdown]
# ## What a learned policy adds
#
# `ensemble-env benchmark --protocol unseen-tasks` trains MAPPO across the training tasks' streams and scores it on
# the held-out ones (docs/benchmark.md). Its decider starts by following the leader, written into its network
# exactly (the record's mean reward per team is linear in the observation); PPO can then learn when to trust a
# short record, which teams to try first, and how the fusion agent should weigh members whose record is short.
# On bbh5 (docs/benchmark.md has the numbers) the safe rule has not yet found a trained policy better than that
# start: beating follow-the-leader is the open problem this scenario poses.
#
# ## Exercises
#
# 1. Hold out one task with `unseen.leave_one_task_out(cache, names=["ftl_team"], questions=...)` restricted to its
#    first 20 questions: how far below its whole-task reward is follow-the-leader, and why?
# 2. Follow the leader over single models (`ftl_single`) against over teams (`ftl_team`): which wins here, and what
#    does the hindsight team (a single model on most tasks) say about it?
# 3. Two kinds of missing information: UCB sees only the played team's reward, and `ftl_team` waits for one outcome
#    that `ftl_team(no_delay)` already reads. What does each cost against follow-the-leader with no delay?
#
# <details><summary>Answers</summary>
#
# 1. Early on the record is short and the leader switches on noise; the reward of the first questions is close to
#    the global team's, and the gain comes from the later ones.
# 2. Nearly level on bbh5 (-0.026 and -0.029): the best fixed team in hindsight is a single model on 14 of 16
#    tasks, so teams add little but the chance to switch on noise.
# 3. Bandit feedback costs about 0.05 reward per question: UCB must spend questions exploring teams it has no
#    record of, while the full information of the logged outputs gives every team's record for free. The one
#    outcome costs about 0.002 (-0.0287 against -0.0265): the leader rarely changes between two questions. The
#    decider would have it if each question took a whole round (the fusion agent answers, the outcome is revealed,
#    then the decider picks the next team); the game's step does both at once (docs/environment-spec.md, "Step
#    order"), so the decider's action at step t is made before $q_t$ is scored.
#
# </details>
