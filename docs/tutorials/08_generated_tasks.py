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
# # Lesson 8: generated tasks: what a benchmark of few tasks rewards
#
# Lessons 6 and 7 held each of bbh5's 16 tasks out in turn and scored the rules on it. Two things go wrong with a
# benchmark of 16 fixed tasks. A policy trained on them can score well by **memorising** them: a table of the best
# team per task needs no reading of the task at hand, and it has nothing to say about a task it has not met. And 16
# tasks are **too few to tell policies apart**: a policy's reward varies from one task to the next far more than two
# good policies differ, so their difference, measured on 16 tasks, sits inside its own noise.
#
# SMAC's fixed scenarios met the same problem and SMACv2 (arXiv 2212.07489) answered it by generating the
# scenarios: train and score on fresh draws from one distribution, and only a policy that reads the situation
# wins. This lesson measures both problems on bbh5, fits a task generator to its tasks
# ([generated-tasks.md](../generated-tasks.md)), checks real tasks it never saw against the tasks it draws, and
# measures on a few hundred generated tasks what only a closed-loop policy (one that reads the task's record) wins.
#
# Run it as a script (`python docs/tutorials/08_generated_tasks.py`, about 33 s of CPU) or as a notebook
# (`08_generated_tasks.ipynb`). Needs `pip install -e ".[plot]"`.

# %%
import course
import numpy as np

import ensemble_env
from ensemble_env import datasets
from ensemble_env.baselines import bayes, fidelity, online, partial, routing
from ensemble_env.baselines.outcomes import team_outcomes
from ensemble_env.baselines.simple import task_ids
from ensemble_env.game.reward import RewardSettings
from ensemble_env.text import align_table
from ensemble_env.views.policies import MeanVote

plt = course.pyplot()
cache = datasets.load("bbh5")
REWARD = RewardSettings(alpha=1.0)  # the default reward: +1 when right, else -1 - alpha |E| / N
tasks = task_ids(cache)
test_rows = cache.select("test")
rng = np.random.default_rng(0)


def bootstrap(values: np.ndarray, draws: int = 2000) -> tuple[float, float]:
    """The mean of per-task values and the half-width of its 95% interval, resampling the tasks (a percentile
    bootstrap: each draw takes len(values) tasks with replacement)."""
    means = rng.choice(values, size=(draws, values.size)).mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float((high - low) / 2)


def per_task(result, cache) -> np.ndarray:
    """A result's mean reward per question on each task it answered, in task order."""
    rewards, answered = result.rewards(cache, REWARD), task_ids(cache)[result.questions]
    return np.array([rewards[answered == t].mean() for t in np.unique(answered)])


# %% [markdown]
# ## A lookup table memorises
#
# `routing.static_team` is the lookup table: for each task, the team with the best mean reward on the task's
# `train` questions, played on its `test` questions. It knows which task a question comes from (lessons 1 to 5 gave
# the agents that identity). On a task it was not fitted on it has no row: the best it can do is the team that did
# best over the tasks it knows, the training tasks' global team (`online.global_team`, lesson 6). Both are scored
# here on the same questions, each task's `test` questions, the global team fitted on the other 15 tasks; the best
# team in hindsight (chosen with the test labels) is the ceiling of any fixed team.

# %%
table = routing.static_team(cache, cache.select("train"), test_rows, reward=REWARD)
held_out, hindsight = [], []
for task in range(cache.n_tasks):
    others, rows = np.flatnonzero(tasks != task), test_rows[tasks[test_rows] == task]
    held_out.append(per_task(online.global_team(cache, others, rows, reward=REWARD), cache)[0])
    hindsight.append(per_task(online.hindsight_team(cache, others, rows, reward=REWARD), cache)[0])
fitted, held_out, hindsight = per_task(table, cache), np.array(held_out), np.array(hindsight)
print(f"the table on the tasks it was fitted on:      {fitted.mean():+.4f} reward per question")
print(f"the same tasks held out (the global team):    {held_out.mean():+.4f}")
print(f"the best fixed team in hindsight (labels):    {hindsight.mean():+.4f}")
print(f"distinct teams in the table: {len(set(table.info['teams'].values()))} for {cache.n_tasks} tasks")

# %% [markdown]
# The table earns +0.064 per question on its own tasks and the same tasks, held out, -0.125: about 0.19 per question
# was the table knowing which task it was on (8 different teams for 16 tasks), and none of it transfers. (The best
# fixed team in hindsight, +0.105, is chosen on the very questions it is scored on: a ceiling no policy reaches.) That
# is what a learner trained on a dozen real tasks can settle for, and a benchmark scored on the tasks it trained on
# cannot tell it from a policy that reads the task.
#
# ## Sixteen tasks are too few
#
# Held out, a task is scored by a policy that reads its record (lessons 6 and 7). How precisely do 16 of them
# measure a policy, or the difference of two? Take lesson 7's two rules of partial feedback with fixed constants,
# greedy (n0 = 1) and explore-then-commit (the first k = 5 questions to the whole pool, then greedy), each task held
# out in turn with the other 15 as its prior, and resample the tasks (a bootstrap over tasks: the questions of a
# task are not independent draws, the tasks are).

# %%
N0, K = (1.0,), (5,)  # the two rules' constants, fixed (a grid of one value each: nothing is chosen)
real = {"greedy": [], "etc(k=5)": []}
for task in range(cache.n_tasks):
    others, rows = np.flatnonzero(tasks != task), np.flatnonzero(tasks == task)
    real["greedy"].append(per_task(partial.greedy_team(cache, others, rows, pseudo_counts=N0, reward=REWARD), cache)[0])
    result = partial.etc_team(cache, others, rows, explores=K, pseudo_counts=N0, reward=REWARD)
    real["etc(k=5)"].append(per_task(result, cache)[0])
real = {name: np.array(values) for name, values in real.items()}
for name, values in real.items():
    mean, half = bootstrap(values)
    print(f"{name:9s} {mean:+.4f} +- {half:.4f}  (tasks from {values.min():+.3f} to {values.max():+.3f})")
real_difference = real["etc(k=5)"] - real["greedy"]
real_mean, real_half = bootstrap(real_difference)
print(f"etc(k=5) - greedy, paired: {real_mean:+.4f} +- {real_half:.4f} over {real_difference.size} tasks")

# %% [markdown]
# One rule's reward per question ranges from about -0.98 to +0.75 from one task to another, and its interval over 16
# tasks is about +-0.22. Pairing the two rules on the same tasks removes most of that (a hard task is hard for both),
# and the paired difference still carries +-0.043, six times the difference itself (+0.007), and more than most
# differences between the rules of lesson 7. Ranking rules, or a learner against them, on bbh5's tasks alone is
# ranking noise.
#
# ## A task generator, and real tasks it never saw
#
# `ensemble_env.fit_generator(cache, tasks=[...])` fits a small generative model to each task (each model's skill
# and position bias, a difficulty the models share on a question, correlated wrong answers, calibration:
# [generated-tasks.md](../generated-tasks.md) has the model) and `TaskGenerator.sample(n, seed)` draws new tasks,
# each a fitted task's parameters jittered by half their spread across tasks, as a `LogitCache`. Hold 4 real tasks
# out of the fit (`fidelity.held_out_tasks`), fit on the other 12, and place each held-out real task among the
# generated ones by its quantile (`fidelity.held_out`, a short version of the fidelity report of
# generated-tasks.md): a quantile near 0 or 1 is a real task the generator does not produce.

# %%
held = fidelity.held_out_tasks(cache.task_names, 4, seed=0)
training = [name for name in cache.task_names if name not in held]
placed, _ = fidelity.held_out(cache, held, tasks=training + list(held), n_tasks=course.budget(200, 60), seed=0)
keys = ("best_single", "best_team_reward", "global_team_reward", "hindsight_gap")
rows = [["generated: 5% / 50% / 95%", *(" / ".join(f"{v:+.2f}" for v in placed[0].generated[k]) for k in keys)]]
rows += [[p.name, *(f"{getattr(p.real, k):+.3f} ({p.quantile[k]:.2f})" for k in keys)] for p in placed]
print("\n".join(align_table(["held-out real task: value (quantile)", *keys], rows)))

# %% [markdown]
# The real tasks fall inside the generated tasks' 5%-95% range on these statistics but one: the best single model's
# accuracy, the hindsight team's reward, the global team's (the training tasks' best team) and the hindsight gap, what
# routing per task can gain over one global team. The exception is `sports_understanding`'s hindsight gap, at the 0.96
# quantile (four of its five models are much better than phi-2, the global team). The generated tasks are a little
# easier than bbh5's hard tasks (the held-out hard tasks sit in their lower fifth); generated-tasks.md has the whole
# report, with the in-sample fit of every task's 31 team accuracies.
#
# Now draw tasks from the generator fitted on the 12 training tasks, one stream cut in three disjoint parts: tasks
# whose record is the prior (what the training tasks were), validation tasks on which a rule chooses its constants,
# and test tasks, each a task no rule has met. Then the same two rules with the same constants, on up to a few hundred
# test tasks.

# %%
generator = ensemble_env.fit_generator(cache, tasks=training)
N_PRIOR, N_VALIDATION, N_TEST = course.budget((200, 100, 400), (60, 30, 120))
generated = generator.sample(N_PRIOR + N_VALIDATION + N_TEST, seed=0)
part = task_ids(generated)
prior = np.flatnonzero(part < N_PRIOR)
validation = np.flatnonzero((part >= N_PRIOR) & (part < N_PRIOR + N_VALIDATION))
test = np.flatnonzero(part >= N_PRIOR + N_VALIDATION)
outcomes = team_outcomes(generated, None, REWARD)  # every team's reward on every question, computed once
print(f"{generated.n_tasks} generated tasks, {generated.n_questions} questions: {N_PRIOR} prior, {N_VALIDATION} "
      f"validation, {N_TEST} test tasks")  # fmt: skip

fixed = {
    "greedy": partial.greedy_team(generated, prior, test, pseudo_counts=N0, reward=REWARD, outcomes=outcomes),
    "etc(k=5)": partial.etc_team(
        generated, prior, test, explores=K, pseudo_counts=N0, reward=REWARD, outcomes=outcomes
    ),
}
difference = per_task(fixed["etc(k=5)"], generated) - per_task(fixed["greedy"], generated)
counts = [n for n in (16, 25, 50, 100, 200, 400) if n <= difference.size]
halves = [bootstrap(difference[:n])[1] for n in counts]
for n, half in zip(counts, halves, strict=True):
    print(f"etc(k=5) - greedy on the first {n:3d} test tasks: {difference[:n].mean():+.4f} +- {half:.4f}")
print(f"on bbh5's 16 real tasks:                      {real_mean:+.4f} +- {real_half:.4f}")

# %% [markdown]
# The interval shrinks as one over the square root of the number of tasks: +-0.069 on 16 generated tasks (their
# rewards spread a little more than bbh5's), +-0.014 on 400, five times narrower for 25 times the tasks; 2,000 test
# tasks, as the benchmark draws, would give about +-0.006. The generator makes tasks plentiful, and with them a
# difference of 0.01 between two policies becomes measurable. It does not make the real tasks more numerous: what a
# generated benchmark measures holds for the generator's distribution, and real held-out tasks stay the test of
# whether it transfers.
#
# ## What only a closed-loop policy wins
#
# On generated tasks a lookup table has nothing to look up: every test task is new, so a fixed policy can at best
# play the team that is best on average, the global team of the prior tasks. A rule that reads the task's record
# under partial feedback (lesson 7) can do better on each task. Here the rules choose their constants as the
# benchmark's generated protocol has them (`choose_on="validation"`): by streaming the validation tasks with the prior
# tasks' record as their prior, then playing the test tasks with that prior. `bayes_team` (lesson 7's Bayesian rule:
# a correlated Gaussian prior over the 31 teams' means, so one team's record moves the teams that share its members)
# tries a smaller grid of its constants in the quick budget. `ftl_team` reads every model's output (full feedback)
# and `hindsight_team` the test labels: references no policy of this game can play.

# %%
chosen = {"validation": validation, "choose_on": "validation", "outcomes": outcomes, "reward": REWARD}
bayes_grid = course.budget({}, {"scales": (0.5, 2.0), "shrinkages": (0.0, 1.0)})
played = {
    "global_team": online.global_team(generated, prior, test, reward=REWARD, outcomes=outcomes),
    "greedy_team": partial.greedy_team(generated, prior, test, **chosen),
    "etc_team": partial.etc_team(generated, prior, test, **chosen),
    "bayes_team": bayes.bayes_team(generated, prior, test, **chosen, **bayes_grid),
    "ftl_team": online.ftl_team(generated, prior, test, reward=REWARD, outcomes=outcomes),
    "hindsight_team": online.hindsight_team(generated, prior, test, reward=REWARD, outcomes=outcomes),
}
scores = {name: per_task(result, generated) for name, result in played.items()}
rows = []
for name, values in scores.items():
    mean, half = bootstrap(values)
    gain, gain_half = bootstrap(values - scores["global_team"])
    constants = {key: played[name].info[key] for key in ("pseudo_count", "explore", "prior_scale", "shrinkage")
                 if key in played[name].info}  # fmt: skip
    note = {"ftl_team": " (full feedback)", "hindsight_team": " (test labels)"}.get(name, "")
    rows.append([name + note, f"{mean:+.4f} +- {half:.4f}", f"{gain:+.4f} +- {gain_half:.4f}", str(constants or "")])
print("\n".join(align_table(["rule", "reward per question", "minus global_team", "constants chosen"], rows)))

# %% [markdown]
# On the 400 generated test tasks the three rules that read the record beat the global team by +0.084 (greedy and
# explore-then-commit) and +0.087 (`bayes_team`) reward per question, each paired interval about +-0.02 and far from
# 0, while among themselves they are level. What they win is what a fixed policy, a table included, cannot: the
# task's own best team, found while playing it. Full-feedback follow-the-leader (+0.164 over the global team) and the
# hindsight team (+0.219) show how much is still left: about 0.08 per question is the price of partial feedback, the
# room a learned decider has to read the record better than the rules.
#
# ## The figure

# %%
figure, axes = plt.subplots(1, 3, figsize=(17, 4.6))
order = np.argsort(fitted)
positions = np.arange(cache.n_tasks)
axes[0].barh(positions - 0.2, fitted[order], height=0.4, color="tab:blue", label="lookup table, its own task")
axes[0].barh(positions + 0.2, held_out[order], height=0.4, color="tab:orange", label="the task held out: global team")
axes[0].scatter(hindsight[order], positions, marker="|", s=90, color="black", label="best fixed team in hindsight")
axes[0].set_yticks(positions, [cache.task_names[t][:32] for t in order], fontsize=7)
axes[0].axvline(0.0, color="grey", lw=0.8)
axes[0].set_xlabel("reward per question on the task's test questions")
axes[0].set_title("bbh5: a lookup table memorises its tasks", fontsize=10)
axes[0].legend(fontsize=7, loc="lower right")

axes[1].loglog(counts, halves, marker="o", color="tab:blue", label="etc(k=5) - greedy, generated tasks")
reference = halves[-1] * np.sqrt(counts[-1] / np.array(counts, dtype=float))
axes[1].loglog(counts, reference, color="grey", linestyle="--", label="1 / sqrt(tasks)")
axes[1].scatter([16], [real_half], marker="*", s=160, color="tab:red", zorder=3, label="the same, bbh5's 16 real tasks")
axes[1].set_xticks(counts, [str(n) for n in counts])
axes[1].minorticks_off()
axes[1].set_yticks([0.01, 0.02, 0.03, 0.05, 0.07], ["0.01", "0.02", "0.03", "0.05", "0.07"])
axes[1].set_xlabel("test tasks")
axes[1].set_ylabel("half-width of the 95% interval (bootstrap over tasks)")
axes[1].set_title("a paired difference: its interval shrinks with the tasks", fontsize=10)
axes[1].legend(fontsize=7)

names = [name for name in scores if name != "global_team"]
gains = [bootstrap(scores[name] - scores["global_team"]) for name in names]
colors = ["tab:blue", "tab:orange", "tab:green", "white", "white"]
axes[2].bar(names, [m for m, _ in gains], yerr=[h for _, h in gains], capsize=4, color=colors, edgecolor="black",
            hatch=[None, None, None, "//", "xx"])  # fmt: skip
axes[2].axhline(0.0, color="grey", lw=0.8)
axes[2].set_ylabel("minus global_team, reward per question (95% interval)")
axes[2].set_title(f"{N_TEST} generated test tasks, partial feedback: reading the record\n"
                  "minus the best fixed team (hatched: full feedback, test labels)", fontsize=10)  # fmt: skip
axes[2].tick_params(axis="x", rotation=30, labelsize=8)
figure.tight_layout()
course.save_figure(figure, "08_generated_tasks.png")

# %% [markdown]
# ## The scenario: every episode a freshly generated task
#
# `ensemble_env/EnsembleGen-v0` (`ensemble_env.gen_parallel_env`, `gen_env`, `gen_vector_env`:
# [the environment](../environment.md)) plays lesson 7's game, partial feedback by default, over generated tasks:
# the factory draws a deck of `deck_size` tasks of a generator's stream (`task_seed`), and from a seeded reset the
# episodes deal them one by one, each task played whole and never met twice while the deck lasts. `first=
# ensemble_env.HELD_OUT_FIRST` draws from further down the same stream: held-out tasks, disjoint from every
# training deck. Three episodes, the decider committing the prior tasks' global team throughout and the fusion agent
# taking its mean vote (`MeanVote`, lesson 1):

# %%
env = ensemble_env.gen_parallel_env(generator, deck_size=3, first=ensemble_env.HELD_OUT_FIRST)
fuse = MeanVote.from_env(env)  # the fusion agent: the team's mean-probability vote
global_mask = np.zeros(generated.n_models, dtype=np.int8)
global_mask[played["global_team"].teams[0]] = 1
print("the global team:", played["global_team"].info["team"])
for episode in range(3):
    obs, infos = env.reset(seed=0) if episode == 0 else env.reset()  # a reset without a seed deals the next task
    total, steps = 0.0, 0
    while env.agents:
        actions = {"decider": global_mask, "fusion": int(fuse(obs["fusion"])[0])}
        obs, rewards, terminations, truncations, infos = env.step(actions)
        task = int(infos["decider"]["task"]) if steps == 0 else task
        total, steps = total + rewards["decider"], steps + 1
    print(f"episode {episode}: task {env.cache.task_names[task]}, {steps} questions, {total / steps:+.3f} per question")

# %% [markdown]
# A policy trained on this scenario cannot learn a table of tasks: there is no task it will meet again. To win it
# has to do what the rules above do, read the record of the task at hand, and do it better.
#
# ## The benchmark on generated tasks
#
# `ensemble-env benchmark --protocol generated --feedback team` runs the whole comparison per fold of bbh5's tasks:
# a generator fitted on the fold's training tasks only, learners and rules trained and chosen on generated tasks,
# every one scored on 2,000 generated test tasks and on the fold's real held-out tasks, with paired differences
# between them ([docs/benchmark.md, "Generated tasks"](../benchmark.md#generated-tasks---protocol-generated) has the
# protocol and its results). Its question is this lesson's: does a learned decider read the record better than the
# rules above?
#
# ## Exercises
#
# 1. Memorising under another reward: set `REWARD = RewardSettings(alpha=0.25)` in the first cell and run the
#    lookup-table cell again. How much of the table's reward is still memorised, and why does it change?
# 2. How many generated tasks make the paired difference of etc(k=5) and greedy measurable? Extrapolate from the
#    intervals printed (they shrink as 1 / sqrt(tasks)), then check with `N_TEST = 1600`.
# 3. Transfer: play the rules of the last table, with the constants they chose on generated validation tasks, on the
#    4 real held-out tasks (`held`), with the real training tasks as the prior (`partial.greedy_team(cache,
#    train_rows, held_rows, pseudo_counts=(n0,))` and so on). Do they still beat the global team there, and can 4
#    tasks say so?
#
# <details><summary>Answers</summary>
#
# 1. The table earns +0.137 on its own tasks (its teams grow from 1.31 to 1.56 models on average: a bigger team's
#    errors cost less), the same tasks held out -0.139: what it memorised grows from 0.19 to 0.28 per question. With
#    cheaper teams the best team differs more from one task to the next, and only knowing the task buys it.
# 2. At 400 tasks the difference is +0.004 +- 0.014: an interval 3.5 times the difference, so about 3.5^2 = 12 times
#    the tasks, some 5,000, to tell it from 0. With `N_TEST = 1600` the first 400 tasks are the same and the
#    difference over all 1,600 is +0.007 +- 0.006: measurable at last, and small. On 16 real tasks no number of runs
#    would have told it from 0; a generated benchmark measures it, and says how small it is.
# 3. With the real training tasks' prior and the constants of the default run (greedy n0 = 4, explore-then-commit
#    m = 10 and n0 = 16, `bayes_team` s = 0.5 and lambda = 0.25) the rules beat the global team on the 4 real tasks
#    by +0.175 +- 0.275, +0.148 +- 0.300 and +0.187 +- 0.265: positive, and inside the noise of 4 tasks.
#    `sports_understanding` carries most of it (+0.60 to +0.64 each: the global team is its worst model); on the
#    two tasks where the global team is already the best fixed team the rules lose 0.04 to 0.16. The benchmark scores
#    every real task once, fold by fold, beside the 2,000 generated ones, for that reason.
#
# </details>
