"""The options of the environment factories, generated from :class:`ensemble_env.game.config.EnvConfig`.

``parallel_env``, ``env``, ``vector_env``, the ``unseen_*`` and ``gen_*`` factories take the fields of ``EnvConfig``
as keyword arguments (``**options``). docs/conf.py appends to each factory's API entry a Parameters list made here
from the dataclass itself (each field's type, default and docstring, the string under the field in the class
body), so that the reference cannot drift from the code: a field added, renamed or given another default shows in
the next build, and a field without a docstring fails it. ``tests/test_docs_site.py`` checks the lists without
building the site.

This module imports no Sphinx: it turns the dataclass into reStructuredText lines.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import textwrap
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import Any

__all__ = [
    "NOT_FACTORIES",
    "Option",
    "env_options",
    "factory_lines",
    "is_factory",
    "keywords_name",
    "scenario_settings",
]


@dataclass(frozen=True)
class Option:
    """One keyword of the factories: a field of ``EnvConfig``."""

    name: str
    type: str  # the annotation as written in the source (``tuple[str, ...] | None``)
    default: Any
    meaning: str  # the field's docstring, reStructuredText


def _field_docstrings(cls: type) -> dict[str, str]:
    """Each annotated field's docstring (the string literal right after it in the class body), by name."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef)).body
    docs = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def env_options(cls: type | None = None) -> list[Option]:
    """The fields of ``cls`` (default ``EnvConfig``) in their order: name, type, default and docstring.

    >>> options = {option.name: option for option in env_options()}
    >>> options["alpha"].type, options["alpha"].default
    ('float', 1.0)
    """
    if cls is None:
        from ensemble_env.game.config import EnvConfig

        cls = EnvConfig
    docs = _field_docstrings(cls)
    options = []
    for item in fields(cls):
        if item.name not in docs:
            raise ValueError(f"{cls.__qualname__}.{item.name} has no docstring (the string under the field)")
        default = item.default if item.default is not MISSING else item.default_factory()  # type: ignore[misc]
        annotation = item.type if isinstance(item.type, str) else inspect.formatannotation(item.type)
        options.append(Option(item.name, annotation, default, docs[item.name]))
    return options


#: functions of ``ensemble_env`` with keywords that are not a game's options (``make_env``: an id's factory's keywords)
NOT_FACTORIES = frozenset({"make_env"})


def keywords_name(obj: Any) -> str | None:
    """The name of ``obj``'s ``**`` parameter (``options``), or None."""
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return None
    return next((p.name for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD), None)


def is_factory(name: str, obj: Any) -> bool:
    """Whether ``obj`` (documented as ``name``) is an environment factory: a function of ``ensemble_env`` or of its
    views, named ``..._env``, whose ``**`` keywords carry the fields of ``EnvConfig`` (``parallel_env(**options)``,
    ``unseen_vector_env``, ``gen_env(**keywords)``, ...)."""
    if not inspect.isfunction(obj):
        return False
    module = getattr(obj, "__module__", "") or ""
    if module != "ensemble_env" and not module.startswith("ensemble_env.views."):
        return False
    short = name.rsplit(".", 1)[-1]
    return short.endswith("env") and short not in NOT_FACTORIES and keywords_name(obj) is not None


#: the game's step notation in a docstring (``q_t``, ``E_0``, ``E_{t+1}``), shown as maths in the entries
STEP_NOTATION = re.compile(r"(?<![\w$\\{`])([qErsA])_(t|0|1|\{t[+-]\d\})(?![\w$}`(])")


def _maths(text: str) -> str:
    """``text`` (reST) with the step notation outside its literals written as the :math: role."""
    parts = re.split(r"(``[^`]*``|`[^`]*`)", text)
    return "".join(
        part if part.startswith("`") else STEP_NOTATION.sub(lambda m: f":math:`{m.group(0)}`", part) for part in parts
    )


def _literal(value: Any) -> str:
    return f"``{value!r}``"


def _settings_text(game: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    return [f"``{name}={value!r}``" for name, value in game.items() if name in defaults and value != defaults[name]]


def _unseen() -> list[tuple[str, dict[str, Any]]]:
    from ensemble_env.game.config import MAX_TEAM_RECORD_MODELS, UNSEEN_VERSIONS, unseen_game

    return [(f"``version={v}``", unseen_game(MAX_TEAM_RECORD_MODELS, version=v)) for v in UNSEEN_VERSIONS]


def _generated() -> list[tuple[str, dict[str, Any]]]:
    from ensemble_env.game.config import MAX_TEAM_RECORD_MODELS
    from ensemble_env.views.generated import gen_game  # the generated-task scenario (ensemble_env/EnsembleGen-v0)

    return [("", gen_game(MAX_TEAM_RECORD_MODELS))]


#: the factories of a scenario, by the prefix of their names: the games they build over ``EnvConfig``'s defaults
#: (each with a label: ``version=1``), and the function that makes those options
SCENARIOS: dict[str, tuple[Callable[[], list[tuple[str, dict[str, Any]]]], str]] = {
    "unseen_": (_unseen, "ensemble_env.game.config.unseen_game"),
    "gen_": (_generated, "ensemble_env.views.generated.gen_game"),
}


def scenario_settings(name: str) -> list[str]:
    """The sentence (reST lines) saying which options the scenario of factory ``name`` sets over the defaults; none
    for the plain factories."""
    short = name.rsplit(".", 1)[-1]
    prefix = next((prefix for prefix in SCENARIOS if short.startswith(prefix)), None)
    if prefix is None:
        return []
    make, maker = SCENARIOS[prefix]
    defaults = {option.name: option.default for option in env_options()}
    games = make()
    common = {key: value for key, value in games[0][1].items() if all(key in g and g[key] == value for _, g in games)}
    text = ", ".join(_settings_text(common, defaults))
    varying = [
        f"{label}: {', '.join(_settings_text({k: v for k, v in game.items() if k not in common}, defaults))}"
        for label, game in games
        if _settings_text({k: v for k, v in game.items() if k not in common}, defaults)
    ]
    sentence = f"This game sets, over the defaults below: {text}"
    if varying:
        sentence += "; and, fixed by the version, " + "; ".join(varying)
    sentence += (
        f" (:func:`~{maker}`, for a pool of up to "
        ":data:`~ensemble_env.game.config.MAX_TEAM_RECORD_MODELS` models; a larger pool's decider has no "
        "``team_record``)."
    )
    return ["", *textwrap.wrap(sentence, 110, break_long_words=False, break_on_hyphens=False)]


def factory_lines(name: str, keywords: str = "options") -> list[str]:
    """The reST appended to the docstring of the factory ``name``: what its ``**keywords`` hold, the scenario's
    settings, then a field list with a ``:param:`` and a ``:type:`` for every field of ``EnvConfig`` (Sphinx shows it
    as the entry's Parameters)."""
    lines = [
        "",
        f"``{keywords}``: every field of :class:`~ensemble_env.game.config.EnvConfig`, listed below with its type, "
        "default and meaning (generated from the dataclass); an unknown option raises a ``TypeError`` naming the "
        "known ones, a wrong value a ``ValueError``.",
        *scenario_settings(name),
        "",
    ]
    for option in env_options():
        meaning = _maths(option.meaning).splitlines()
        lines.append(f":param {option.name}: {meaning[0]}")
        lines += [f"   {line}" if line.strip() else "" for line in meaning[1:]]
        lines.append(f":type {option.name}: {option.type}, default {_literal(option.default)}")
    lines.append("")
    return lines
