"""Renderings of the game: the text ``render_mode="ansi"`` returns and ``"human"`` prints, and the picture
``"rgb_array"`` returns.

They read the engine's public accessors only (``info_values``, ``observations``, ``statistic_names``,
``outputs``, ``team``, ``next_questions``, ``last_weights``, ``cache``, ``config``). With
``fusion_action="weights"`` both show the weights the step used. The picture (:func:`draw_frame`) is drawn with numpy
alone (its own 5 x 7 pixel font), so recording episodes needs no plotting library; writing them to a GIF
does (see ``docs/tutorials``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ensemble_env.cache.logit_cache import LogitCache
from ensemble_env.game.engine import EnsembleVectorEnv

__all__ = [
    "FRAME_WIDTH",
    "STRIP_STEPS",
    "TEXT_WIDTH",
    "EpisodeTrace",
    "FrameGeometry",
    "describe_reset",
    "describe_step",
    "draw_frame",
    "draw_text",
    "question_excerpt",
    "short_names",
]


def _team_names(cache: LogitCache, team: np.ndarray) -> str:
    members = [cache.models[i] for i in np.flatnonzero(team)]
    return "{" + ", ".join(members) + "}" if members else "{} (empty)"


def describe_reset(engine: EnsembleVectorEnv, env: int = 0) -> str:
    """Text of a reset: the stream and the initial team."""
    cfg = engine.config
    tasks = "all tasks" if cfg.tasks is None else ", ".join(cfg.tasks)
    return (
        f"episode start: {engine.episode_length} questions ({cfg.split} split, {tasks}, {cfg.order}); "
        f"window T={cfg.window}, alpha={cfg.alpha}\n"
        f"  initial team E_0 {_team_names(engine.cache, engine.team[env])}"
    )


#: characters of a question's text the rendering shows
TEXT_WIDTH = 100


def question_excerpt(cache: LogitCache, question: int, width: int = TEXT_WIDTH) -> str | None:
    """The question's text on one line, shortened to ``width`` characters, or None if the cache has none."""
    if cache.question_text is None:
        return None
    text = " ".join(cache.question_text[question].split())
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def describe_step(engine: EnsembleVectorEnv, used_team: np.ndarray, env: int = 0) -> str:
    """Text of the step just taken by copy ``env``: the question, the team, the answer, the next team."""
    cache, info = engine.cache, engine.info_values(env)
    question, answer, label = int(info["question"]), int(info["answer"]), int(info["label"])
    step = int(info["step"]) - 1
    names = engine.statistic_names
    statistics = engine.outputs.decider[env, engine.layout.decider["statistics"]]
    stats = "  ".join(f"{name} {value:.3f}" for name, value in zip(names, statistics, strict=True))
    gold = cache.probs[question, :, label]
    members = np.flatnonzero(used_team)
    support = " ".join(f"{cache.models[i]}:{gold[i]:.2f}" for i in members) or "-"
    verdict = "right" if info["correct"] else "wrong"
    excerpt = question_excerpt(cache, question)
    text = "" if excerpt is None else f"  text       {excerpt}\n"
    weights = engine.last_weights
    if weights is not None:
        w = weights[env]
        shown = " ".join(f"{cache.models[i]}:{w[i]:.2f}" for i in members) or "-"
        equal = "  (all 0 on the team: equal weights)" if members.size and not w[members].any() else ""
        text += f"  weights    {shown}{equal}\n"
    decider = (
        f"  decider -> E_t+1 {_team_names(cache, engine.team[env])}   {stats}"
        if engine.config.decider
        else f"  no decider: E_t+1 every model   {stats}"
    )
    return (
        f"t={step:<4d} task {cache.task_names[cache.tasks[question]]} | question {question} "
        f"({cache.n_choices[question]} choices, gold {label})\n"
        f"{text}"
        f"  team E_t   {_team_names(cache, used_team)} ({len(members)}/{engine.n_models})  p(gold): {support}\n"
        f"  fusion  -> answer {answer}: {verdict}   reward {info['reward']:+.3f}   "
        f"running accuracy {info['accuracy']:.3f}\n"
        f"{decider}"
    )


# -- rgb_array: a picture of the episode, drawn with numpy alone ----------------------------------------------
#
# A 5 x 7 bitmap font (upper case, digits, a few signs): each glyph is 7 rows of 5 pixels, "#" = ink.
_GLYPHS = {
    " ": "..... ..... ..... ..... ..... ..... .....",
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "####. #...# #...# #...# #...# #...# ####.",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "J": "..### ...#. ...#. ...#. ...#. #..#. .##..",
    "K": "#...# #..#. #.#.. ##... #.#.. #..#. #...#",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #.#.# #...# #...# #...#",
    "N": "#...# #...# ##..# #.#.# #..## #...# #...#",
    "O": ".###. #...# #...# #...# #...# #...# .###.",
    "P": "####. #...# #...# ####. #.... #.... #....",
    "Q": ".###. #...# #...# #...# #.#.# #..#. .##.#",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "S": ".#### #.... #.... .###. ....# ....# ####.",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# #...# #...# .###.",
    "V": "#...# #...# #...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.",
    "X": "#...# #...# .#.#. ..#.. .#.#. #...# #...#",
    "Y": "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..",
    "Z": "##### ....# ...#. ..#.. .#... #.... #####",
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    "3": "##### ...#. ..#.. ...#. ....# #...# .###.",
    "4": "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ....# #...# .###.",
    "6": "..##. .#... #.... ####. #...# #...# .###.",
    "7": "##### ....# ...#. ..#.. .#... .#... .#...",
    "8": ".###. #...# #...# .###. #...# #...# .###.",
    "9": ".###. #...# #...# .#### ....# ...#. .##..",
    ".": "..... ..... ..... ..... ..... .##.. .##..",
    ",": "..... ..... ..... ..... .##.. ..#.. .#...",
    ":": "..... .##.. .##.. ..... .##.. .##.. .....",
    "-": "..... ..... ..... ##### ..... ..... .....",
    "+": "..... ..#.. ..#.. ##### ..#.. ..#.. .....",
    "=": "..... ..... ##### ..... ##### ..... .....",
    "/": "..... ....# ...#. ..#.. .#... #.... .....",
    "%": "##... ##..# ...#. ..#.. .#... #..## ...##",
    "(": "...#. ..#.. .#... .#... .#... ..#.. ...#.",
    ")": ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",
    "_": "..... ..... ..... ..... ..... ..... #####",
    "<": "...#. ..#.. .#... #.... .#... ..#.. ...#.",
    ">": ".#... ..#.. ...#. ....# ...#. ..#.. .#...",
    "|": "..#.. ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "?": ".###. #...# ....# ...#. ..#.. ..... ..#..",
    "'": "..#.. ..#.. .#... ..... ..... ..... .....",
}
_FONT = {
    char: np.array([[pixel == "#" for pixel in row] for row in rows.split()], dtype=bool)
    for char, rows in _GLYPHS.items()
}
_UNKNOWN = _FONT["?"]
#: pixels a character advances (glyph width + 1) and a line of text takes, at scale 1
CHAR_WIDTH, LINE_HEIGHT = 6, 10

#: colours (RGB, Okabe-Ito for right/wrong so that they read in colour-blind vision)
_WHITE = (255, 255, 255)
_INK = (40, 40, 40)
_GRID = (200, 200, 200)
_RIGHT = (0, 114, 178)  # blue
_WRONG = (230, 159, 0)  # orange
_RIGHT_PALE = (196, 222, 238)
_WRONG_PALE = (249, 231, 191)
_PROB = np.array((60, 40, 120), dtype=np.float64)  # the darkest probability cell
_ABSENT = (236, 236, 236)

#: questions the team strip shows (the newest on the right)
STRIP_STEPS = 64
#: width of the picture in pixels (its height grows with the pool: :class:`FrameGeometry`)
FRAME_WIDTH = 720


def draw_text(image: np.ndarray, x: int, y: int, text: str, color: tuple[int, int, int] = _INK, scale: int = 1) -> int:
    """Write ``text`` (upper-cased) into ``image`` with its top-left corner at (x, y); returns the x after it.

    Pixels outside the image are dropped.
    """
    height, width = image.shape[:2]
    for char in text.upper():
        glyph = _FONT.get(char, _UNKNOWN)
        if scale > 1:
            glyph = glyph.repeat(scale, axis=0).repeat(scale, axis=1)
        rows, cols = np.nonzero(glyph)
        rows, cols = rows + y, cols + x
        inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
        image[rows[inside], cols[inside]] = color
        x += CHAR_WIDTH * scale
    return x


def _fill(image: np.ndarray, x: int, y: int, w: int, h: int, color: tuple[int, int, int] | np.ndarray) -> None:
    image[max(y, 0) : max(y + h, 0), max(x, 0) : max(x + w, 0)] = color


def _outline(image: np.ndarray, x: int, y: int, w: int, h: int, color: tuple[int, int, int]) -> None:
    _fill(image, x, y, w, 1, color)
    _fill(image, x, y + h - 1, w, 1, color)
    _fill(image, x, y, 1, h, color)
    _fill(image, x + w - 1, y, 1, h, color)


def short_names(models: tuple[str, ...] | list[str], width: int = 10) -> list[str]:
    """Model names for the picture, at most ``width`` characters: the part after an organisation prefix
    (``org__model``), cut at the end, or, where that makes two names equal, in the middle (``complem~_a``)."""
    names = [model.split("__")[-1] for model in models]
    cut = [name[:width] for name in names]
    return [
        name[: width - 3] + "~" + name[-2:] if len(name) > width and cut.count(short) > 1 else short
        for name, short in zip(names, cut, strict=True)
    ]


class EpisodeTrace:
    """What the picture of an episode needs from the steps taken so far (kept only when rendering rgb_array).

    For each of the last :data:`STRIP_STEPS` steps: the team that answered, which models of the pool were
    right on the question (with ``feedback="team"``, of the team only), whether the answer was right, and the
    running accuracy after it.
    """

    def __init__(self, steps: int = STRIP_STEPS) -> None:
        self.steps = steps
        self.teams: list[np.ndarray] = []
        self.models_right: list[np.ndarray] = []
        self.answers_right: list[bool] = []
        self.accuracy: list[float] = []

    def record(self, engine: EnsembleVectorEnv, used_team: np.ndarray, env: int = 0) -> None:
        """Add the step copy ``env`` of ``engine`` has just taken with team ``used_team``."""
        info = engine.info_values(env)
        self.teams.append(np.asarray(used_team, dtype=bool).copy())
        right = np.asarray(engine.cache.correct[int(info["question"])], dtype=bool)
        if engine.config.feedback == "team":  # only the team's outputs were revealed
            right = right & np.asarray(used_team, dtype=bool)
        self.models_right.append(right)
        self.answers_right.append(bool(info["correct"]))
        self.accuracy.append(float(info["accuracy"]))
        if len(self.teams) > self.steps:
            for items in (self.teams, self.models_right, self.answers_right, self.accuracy):
                del items[0]


@dataclass(frozen=True)
class FrameGeometry:
    """Where :func:`draw_frame` puts things, for a pool of ``n_models`` (the tests read the same positions).

    ``strip_x, strip_y``: the top-left pixel of the team strip (column 0 is the oldest of
    :data:`STRIP_STEPS` steps); ``row``: the height of a model's row; ``next_x``: the "NEXT" column;
    ``panel_x``: the question's probability panel; ``accuracy_y``: the top of the running-accuracy plot.
    """

    n_models: int
    row: int
    width: int = FRAME_WIDTH
    margin: int = 8
    cell_width: int = 5
    accuracy_height: int = 60

    @classmethod
    def of(cls, n_models: int) -> FrameGeometry:
        return cls(n_models, row=int(np.clip(160 // n_models, 5, 16)))

    @property
    def strip_x(self) -> int:
        return self.margin + 11 * CHAR_WIDTH

    @property
    def strip_y(self) -> int:
        return self.margin + 2 * LINE_HEIGHT + 10 + LINE_HEIGHT

    @property
    def strip_width(self) -> int:
        return STRIP_STEPS * self.cell_width

    @property
    def answer_y(self) -> int:
        """Top of the row of the fusion agent's answers (under the models' rows)."""
        return self.strip_y + self.n_models * self.row + max(3, 9 - self.row)

    @property
    def next_x(self) -> int:
        return self.strip_x + self.strip_width + 6

    @property
    def panel_x(self) -> int:
        return self.next_x + 12 + 6 * CHAR_WIDTH

    @property
    def accuracy_y(self) -> int:
        return self.answer_y + self.row + 1 + LINE_HEIGHT + 10 + LINE_HEIGHT

    @property
    def height(self) -> int:
        return self.accuracy_y + self.accuracy_height + 12

    def strip_cell(self, model: int, column: int) -> tuple[int, int]:
        """(x, y) of the top-left pixel of a cell: ``model`` -1 is the answer row; ``column`` counts from the
        left of the strip (``STRIP_STEPS - 1`` is the newest step)."""
        y = self.answer_y if model == -1 else self.strip_y + model * self.row
        return self.strip_x + column * self.cell_width, y

    def next_cell(self, model: int) -> tuple[int, int]:
        """(x, y) of the top-left pixel of ``model``'s cell in the "NEXT" column."""
        return self.next_x, self.strip_y + model * self.row

    @property
    def weight_width(self) -> int:
        """Pixels of a weight of 1 in the weight bars between "NEXT" and the panel."""
        return self.panel_x - self.next_x - 12 - 6

    def weight_cell(self, model: int) -> tuple[int, int]:
        """(x, y) of the top-left pixel of ``model``'s weight bar (its outline; the bar starts one pixel in)."""
        return self.next_x + 14, self.strip_y + model * self.row

    def choice_width(self, n_choices: int) -> int:
        return int(np.clip((self.width - self.margin - self.panel_x) // max(n_choices, 1), 4, 24))

    def choice_cell(self, model: int, choice: int, n_choices: int) -> tuple[int, int]:
        """(x, y) of the top-left pixel of ``model``'s probability of ``choice`` in the question panel."""
        return self.panel_x + choice * self.choice_width(n_choices), self.strip_y + model * self.row


def draw_frame(
    engine: EnsembleVectorEnv, trace: EpisodeTrace, used_team: np.ndarray | None, env: int = 0
) -> np.ndarray:
    """The picture of copy ``env``'s episode so far: an (H, W, 3) uint8 RGB image (``render_mode="rgb_array"``).

    Left, the team strip: one row per model and one column per question of the last :data:`STRIP_STEPS`
    steps (newest on the right); a cell is dark when the model was in the team, pale when it was not, blue when
    the model's own answer was right and orange when it was wrong (pale blue cells outside the team are right
    answers the team did not have). Under it, the fusion agent's answer (blue right, orange wrong) and, in
    the column "NEXT", the team the decider has committed for the next question (with ``feedback="team"`` the
    outputs of models outside the team were never revealed: their cells are grey, not pale). Below, the running
    accuracy over the same steps. Right, the question just answered: each team member's probability of each choice
    (darker = more probable; grey rows: models outside the team), the gold choice and the fusion agent's
    answer. ``used_team`` is None right after a reset (nothing answered yet: the first question and team E_0
    are shown). Pure numpy; the same episode gives the same image. Positions: :class:`FrameGeometry`.
    """
    cache, n = engine.cache, engine.n_models
    geo = FrameGeometry.of(n)
    row, cell_w = geo.row, geo.cell_width
    image = np.full((geo.height, geo.width, 3), 255, dtype=np.uint8)
    info = engine.info_values(env)
    answered = used_team is not None
    question = int(info["question"]) if answered else int(engine.next_questions()[env])
    team = np.asarray(used_team if answered else engine.team[env], dtype=bool)
    step = int(info["step"])

    # header: where we are, and the last step's outcome
    x0, y = geo.margin, geo.margin
    title = f"ENSEMBLE_V1  STEP {step}/{engine.episode_length}  TASK {cache.task_names[cache.tasks[question]]}"
    draw_text(image, x0, y, title)
    y += LINE_HEIGHT + 2
    if answered:
        verdict = "RIGHT" if info["correct"] else "WRONG"
        x = draw_text(image, x0, y, f"ANSWER {int(info['answer'])}  GOLD {int(info['label'])}  ")
        x = draw_text(image, x, y, verdict, _RIGHT if info["correct"] else _WRONG)
        draw_text(
            image,
            x,
            y,
            f"  REWARD {info['reward']:+.2f}  ACCURACY {info['accuracy']:.3f}  RETURN {info['episode_return']:+.1f}"
            f"  TEAM {int(info['team_size'])}/{n}",
        )
    else:
        draw_text(image, x0, y, f"EPISODE START: {engine.episode_length} QUESTIONS, INITIAL TEAM {int(team.sum())}/{n}")

    # the team strip
    draw_text(image, geo.strip_x, geo.strip_y - LINE_HEIGHT, f"TEAM PER QUESTION (LAST {STRIP_STEPS})")
    draw_text(image, geo.next_x - 2, geo.strip_y - LINE_HEIGHT, "NEXT")
    every = -(-(LINE_HEIGHT - 1) // row)  # label every model when rows are tall enough, else every k-th
    labels = short_names(cache.models)
    for model in range(0, n, every):
        draw_text(image, x0, geo.strip_y + model * row + (row - 7) // 2, labels[model])
    draw_text(image, x0, geo.answer_y + max(row - 7, 2) // 2, "ANSWER")
    first = STRIP_STEPS - len(trace.teams)
    hidden = engine.config.feedback == "team"  # outputs outside the answering team were never revealed
    for k, (members, right, answer_right) in enumerate(
        zip(trace.teams, trace.models_right, trace.answers_right, strict=True)
    ):
        for model in range(n):
            if members[model]:
                color = _RIGHT if right[model] else _WRONG
            elif hidden:
                color = _ABSENT
            else:
                color = _RIGHT_PALE if right[model] else _WRONG_PALE
            _fill(image, *geo.strip_cell(model, first + k), cell_w - 1, row - 1, color)
        _fill(image, *geo.strip_cell(-1, first + k), cell_w - 1, row - 1, _RIGHT if answer_right else _WRONG)
    committed = engine.team[env]
    for model in range(n):
        if committed[model]:
            _fill(image, *geo.next_cell(model), 12, row - 1, _INK)
        else:
            _outline(image, *geo.next_cell(model), 12, row - 1, _GRID)
    weights = engine.last_weights if answered else None
    if weights is not None:  # the weights the step used: a bar per model right of NEXT (grey: outside the team)
        for model in range(n):
            x, top = geo.weight_cell(model)
            length = round(float(weights[env, model]) * geo.weight_width)
            _outline(image, x, top, geo.weight_width + 2, row - 1, _GRID)
            _fill(image, x + 1, top, length, row - 1, _PROB.astype(np.uint8) if team[model] else _GRID)
    y = geo.answer_y + row + 3
    draw_text(image, geo.strip_x, y, "<- OLDER", _GRID)
    draw_text(image, geo.strip_x + geo.strip_width - 6 * CHAR_WIDTH, y, "NEWER", _GRID)

    # running accuracy over the strip's steps
    y, plot_h, strip_x, strip_w = geo.accuracy_y, geo.accuracy_height, geo.strip_x, geo.strip_width
    accuracy_text = f"RUNNING ACCURACY {info['accuracy']:.3f}" if answered else "RUNNING ACCURACY -"
    draw_text(image, strip_x, y - LINE_HEIGHT, accuracy_text)
    _outline(image, strip_x - 1, y - 1, strip_w + 2, plot_h + 2, _GRID)
    _fill(image, strip_x, y + plot_h // 2, strip_w, 1, _GRID)
    draw_text(image, strip_x - 4 * CHAR_WIDTH, y - 3, "1.0", _GRID)
    draw_text(image, strip_x - 4 * CHAR_WIDTH, y + plot_h // 2 - 3, "0.5", _GRID)
    draw_text(image, strip_x - 4 * CHAR_WIDTH, y + plot_h - 4, "0.0", _GRID)
    previous = None
    for k, value in enumerate(trace.accuracy):
        x = geo.strip_cell(0, first + k)[0]
        level = y + round((1.0 - value) * (plot_h - 1))
        top, bottom = (level, level) if previous is None else (min(previous, level), max(previous, level))
        _fill(image, x, top, 1, bottom - top + 1, _INK)  # the step up or down from the previous point
        _fill(image, x, level, cell_w, 2, _INK)
        previous = level

    # the legend, right of the accuracy plot
    legend_x = strip_x + strip_w + 24
    outside: tuple[tuple[tuple[int, int, int] | None, str], ...] = (
        ((_ABSENT, "NOT IN IT: NOT REVEALED"),)
        if hidden
        else ((_RIGHT_PALE, "MODEL RIGHT, NOT IN IT"), (_WRONG_PALE, "MODEL WRONG, NOT IN IT"))
    )
    legend: tuple[tuple[tuple[int, int, int] | None, str], ...] = (
        (_RIGHT, "MODEL RIGHT, IN THE TEAM"),
        (_WRONG, "MODEL WRONG, IN THE TEAM"),
        *outside,
        (_INK, "NEXT: TEAM COMMITTED FOR"),
        (None, "      THE NEXT QUESTION"),
    )
    if weights is not None:
        legend += ((tuple(int(v) for v in _PROB), "BAR RIGHT OF NEXT: WEIGHT"),)  # type: ignore[assignment,operator]
    for k, (swatch, text) in enumerate(legend):
        if swatch is not None:
            _fill(image, legend_x, y + k * LINE_HEIGHT, 8, 7, swatch)
        draw_text(image, legend_x + 14, y + k * LINE_HEIGHT, text)

    # the question: team probabilities per choice
    n_choices = int(cache.n_choices[question])
    cell = geo.choice_width(n_choices)
    label = int(cache.labels[question])
    heading = f"QUESTION {question}: P(CHOICE)" if answered else f"FIRST QUESTION {question}: P(CHOICE)"
    draw_text(image, geo.panel_x, geo.strip_y - LINE_HEIGHT, heading)
    probs = cache.probs[question]
    for model in range(n):
        for choice in range(n_choices):
            x, top = geo.choice_cell(model, choice, n_choices)
            if team[model]:
                shade = np.round(255.0 + float(probs[model, choice]) * (_PROB - 255.0)).astype(np.uint8)
            else:
                shade = np.array(_ABSENT, dtype=np.uint8)
            _fill(image, x, top, cell - 1, row - 1, shade)
            if choice == label:
                _outline(image, x - 1, top - 1, cell + 1, row + 1, _RIGHT)
    for choice in range(n_choices):
        x = geo.choice_cell(0, choice, n_choices)[0]
        if choice == label:
            draw_text(image, x + (cell - 5) // 2, geo.answer_y, "G", _RIGHT)
        if answered and choice == int(info["answer"]):
            _fill(image, x, geo.answer_y + LINE_HEIGHT, cell - 1, 4, _RIGHT if info["correct"] else _WRONG)
    draw_text(image, geo.panel_x, geo.answer_y + LINE_HEIGHT + 8, "G GOLD   BAR: ANSWER")
    return image
