"""The documentation site and the texts a reader follows.

The site builds (slow: ``scripts/build_docs.sh OUT`` exits 0 with no warning) and holds what a researcher looks
for: the README as its front page (the install-and-run commands, a results table, the figure), every lesson as a
page with its code, output, figure and downloads, the options of the environment factories in their API entries
(``feedback``, ``alpha``, ``window`` with their meaning), maths rendered, an entry for every public name.

Without building (fast): the sidebar's order (docs/index.md), the options lists made from ``EnvConfig``
(docs/_ext/envoptions.py) and the environment contract's options table against the dataclass, the README's commands
(command 1 activates the virtualenv; every ``ensemble-env`` line parses, and runs in a new shell after command 1),
the game's step notation written as maths, and the counts and names the texts quote (the lessons' number and times,
the names ``evaluate`` prints, output folders git ignores, the test count).

The build needs the ``docs`` extra (Sphinx, MyST-NB, furo) and the ``mappo`` extra (the lessons that train): skipped
without them. It takes about 35 CPU seconds: Sphinx, and the first lesson run at its quick budget; the other lessons'
pages show the session's runs of their notebooks, which tests/test_tutorials.py checks (tests/testing/lessons.py).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import zlib
from dataclasses import fields
from pathlib import Path

import pytest
from testing.lessons import LessonRuns

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COURSE = DOCS / "tutorials"
LESSONS = sorted(COURSE.glob("[0-9][0-9]_*.py"))
README = ROOT / "README.md"

#: the sidebar's getting-started order (docs/index.md's tables of contents), by docname
SIDEBAR = [
    "install", "quickstart", "environment", "environment-spec",
    "tutorials/README", *[f"tutorials/{path.stem}" for path in LESSONS],
    "benchmark", "baselines", "mappo", "rlae",
    "your-learner", "adapters",
    "caches", "cache-format", "default-cache", "generated-tasks",
    "reliability", "api/index", "development", "README",
]  # fmt: skip
#: the environment factories whose API entries list the options (those present in ensemble_env)
FACTORIES = (
    "env", "parallel_env", "vector_env", "unseen_env", "unseen_parallel_env", "unseen_vector_env",
    "gen_env", "gen_parallel_env", "gen_vector_env",
)  # fmt: skip
#: the game's step notation (q_t, E_{t+1}, r_{t+1}, ...), which the pages write as maths ($q_t$)
STEP_NOTATION = re.compile(r"(?<![\w$\\{`])([qErsA])_(t|0|1|\{t[+-]\d\})(?![\w$}`(])")
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}


def _envoptions():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        import envoptions
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    return envoptions


def _inventory(out: Path) -> set[str]:
    """The names of OUT's Python entries (objects.inv: four lines of header, then zlib-compressed lines)."""
    body = (out / "objects.inv").read_bytes().split(b"\n", 4)[4]
    return {line.split(" ", 2)[0] for line in zlib.decompress(body).decode("utf-8").splitlines() if " py:" in line}


def _text(html: str) -> str:
    """The visible text of an HTML page, whitespace collapsed (entities decoded)."""
    import html as html_module

    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", html, flags=re.S)
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", "", text)).split())


# -- the built site (slow) --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(
    tmp_path_factory: pytest.TempPathFactory, lesson_runs: LessonRuns
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``scripts/build_docs.sh OUT``. The pages of the lessons after the first show the session's runs of their
    notebooks (``lesson_runs``, which tests/test_tutorials.py checks; docs/conf.py's ``ENSEMBLE_ENV_SITE_LESSONS``)
    instead of running them a second time; the first lesson runs in the build, as every lesson does in a reader's."""
    for module in ("sphinx", "myst_nb", "furo", "ipykernel", "matplotlib", "torch"):
        pytest.importorskip(module, reason="the docs and mappo extras are not installed")
    folder = tmp_path_factory.mktemp("site")
    ran = lesson_runs.write([path.stem for path in LESSONS[1:]], folder / "lessons")
    out = folder / "html"
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_docs.sh"), str(out)],
        env={**os.environ, "PYTHON": sys.executable, "ENSEMBLE_ENV_SITE_LESSONS": str(ran)},
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    assert built.returncode == 0, built.stdout[-5000:] + built.stderr[-5000:]
    return out, built


@pytest.mark.slow
def test_the_site_builds_with_an_entry_for_every_public_name(
    site: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, built = site
    assert "WARNING" not in built.stderr.replace("[IPKernelApp] WARNING", ""), built.stderr[-5000:]
    pages = {path.relative_to(out).as_posix() for path in out.rglob("*.html")}
    assert {f"{name}.html" for name in SIDEBAR} | {"index.html"} <= pages
    assert {f"{page.stem}.html" for page in DOCS.glob("*.md")} <= pages
    entries = _inventory(out)
    import ensemble_env
    import ensemble_mappo

    for package in (ensemble_env, ensemble_mappo):
        assert {f"{package.__name__}.{name}" for name in package.__all__} <= entries
    # an object is documented once, under its shortest name; the longer ones are aliases of that entry
    assert "ensemble_env.LogitCache" in entries and "ensemble_env.cache.LogitCache" not in entries
    assert "ensemble_env.cache.logit_cache.LogitCache" in entries  # the alias
    assert "ensemble_mappo.algorithms.register" in entries
    assert (out / "_static" / "site.css").is_file()


@pytest.mark.slow
def test_the_front_page_is_the_readme_with_its_commands_results_and_figure(
    site: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, _ = site
    front = (out / "index.html").read_text(encoding="utf-8")
    text = _text(front)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in re.findall(r"^(?:main_job|tests)='([^']+)'", ci, re.M):
        assert " ".join(command.split()) in text  # the install-and-run commands, word for word
    assert "<table" in front and "static_team(certified)" in text  # a results table
    images = re.findall(r'<img[^>]+src="([^"]+)"', front)
    assert images and all((out / image).is_file() for image in images)  # the README's figure, shown
    assert "README.md" not in "".join(re.findall(r'href="([^"]+)"', front))  # no raw Markdown download
    assert 'href="quickstart.html"' in front and 'href="tutorials/01_the_game.html"' in front  # the sidebar


@pytest.mark.slow
@pytest.mark.parametrize("lesson", [path.stem for path in LESSONS])
def test_every_lesson_is_a_page_with_its_code_output_figure_and_downloads(
    lesson: str, site: tuple[Path, subprocess.CompletedProcess[str]]
) -> None:
    out, _ = site
    page = (out / "tutorials" / f"{lesson}.html").read_text(encoding="utf-8")
    assert page.count('class="cell_input') >= 3  # its code cells
    assert "cell_output" in page and "figure written to runs/tutorials/" in _text(page)  # what it printed
    figures = re.findall(r'<img[^>]+src="([^"]+)"', page)
    assert figures and all((out / "tutorials" / image).is_file() for image in figures)  # its figure, drawn
    for suffix in (".py", ".ipynb"):
        download = re.search(rf'href="(\.\./_downloads/[0-9a-f]+/{lesson}{re.escape(suffix)})"', page)
        assert download is not None, f"no download of {lesson}{suffix}"
        assert (out / "tutorials" / download.group(1)).read_bytes() == (COURSE / f"{lesson}{suffix}").read_bytes()


@pytest.mark.slow
def test_parallel_envs_entry_lists_every_option_with_its_meaning(
    site: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, _ = site
    page = (out / "api" / "ensemble_env.html").read_text(encoding="utf-8")
    start = page.index('id="ensemble_env.parallel_env"')
    entry = _text(page[start : page.index("</dd>", page.index("Parameters", start))]).replace("\\(", "")
    entry = entry.replace("\\)", "")  # the step notation, as MathJax's inline maths
    entry = entry.translate(str.maketrans({"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"}))  # smart quotes
    options = _envoptions().env_options()
    for option in options:
        meaning = " ".join(re.sub(r"``?|\*", "", option.meaning).split())[:30]
        assert f"{option.name} (" in entry and meaning in entry, option.name
    for name in ("feedback", "alpha", "window"):
        assert name in entry
    assert "What answering" in entry and "Size penalty" in entry and "most recently answered questions" in entry


@pytest.mark.slow
def test_maths_render(site: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, _ = site
    spec = (out / "environment-spec.html").read_text(encoding="utf-8")
    assert "mathjax" in spec.lower()
    assert '<span class="math notranslate nohighlight">\\(q_{t+1}\\)</span>' in spec
    assert "\\begin{aligned}" in spec  # the reward formulas, a ```math block


def test_the_script_refuses_a_call_without_its_folder() -> None:
    called = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_docs.sh")], capture_output=True, text=True, check=False, timeout=60
    )
    assert called.returncode == 2
    assert "usage: scripts/build_docs.sh OUT" in called.stderr


def test_the_script_names_what_its_interpreter_lacks(tmp_path: Path) -> None:
    """An interpreter without the extras: one line naming the modules and the install, before Sphinx runs."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    called = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_docs.sh"), str(tmp_path / "out")],
        env={**os.environ, "PYTHON": str(bare / "bin" / "python")},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert called.returncode == 1
    assert called.stderr.count("\n") == 1 and "sphinx (docs extra)" in called.stderr, called.stderr
    assert 'pip install -e ".[mappo,docs]"' in called.stderr


# -- the site's structure -----------------------------------------------------------------------------------------


def _toctree_entries() -> list[str]:
    """The docnames of docs/index.md's tables of contents, in order (``Title <name>`` or ``name``)."""
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    entries = []
    for body in re.findall(r"^```\{toctree\}\n(.*?)^```", text, re.S | re.M):
        for line in body.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                entries.append(re.sub(r"^.*<(.+)>$", r"\1", line))
    return entries


def test_the_sidebar_is_the_getting_started_order_and_holds_every_page_once() -> None:
    entries = _toctree_entries()
    assert entries == SIDEBAR
    pages = {page.stem for page in DOCS.glob("*.md")} - {"index"}
    pages |= {"tutorials/README", "api/index", *(f"tutorials/{path.stem}" for path in LESSONS)}
    assert len(entries) == len(set(entries)) and pages == set(entries), "docs/index.md misses a page, or lists one gone"
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    assert index.startswith("```{include} ../README.md\n")  # the front page is the README


def test_every_lesson_has_its_notebook_the_site_renders() -> None:
    assert LESSONS and all(path.with_suffix(".ipynb").is_file() for path in LESSONS)


# -- the options of the environment factories ----------------------------------------------------------------------


def test_the_options_list_is_envconfig_field_by_field() -> None:
    from ensemble_env import EnvConfig

    options = _envoptions().env_options()
    assert [option.name for option in options] == [item.name for item in fields(EnvConfig)]
    for option, item in zip(options, fields(EnvConfig), strict=True):
        assert option.default == item.default and option.type == item.type
        assert len(option.meaning.split()) >= 4, f"EnvConfig.{option.name}: a docstring of a few words at least"
    lines = "\n".join(_envoptions().factory_lines("ensemble_env.parallel_env"))
    for option in options:
        first = _envoptions().STEP_NOTATION.sub(r":math:`\g<0>`", option.meaning.splitlines()[0])
        assert f":param {option.name}: {first}" in lines
        assert f":type {option.name}: {option.type}, default ``{option.default!r}``" in lines
    assert ":param feedback: What answering" in lines and ":type alpha: float, default ``1.0``" in lines


def test_every_environment_factory_gets_the_options_and_a_scenarios_settings() -> None:
    import ensemble_env

    envoptions = _envoptions()
    factories = {name for name in ensemble_env.__all__ if envoptions.is_factory(name, getattr(ensemble_env, name))}
    assert factories == {name for name in FACTORIES if hasattr(ensemble_env, name)}
    page = (DOCS / "api" / "ensemble_env.md").read_text(encoding="utf-8")  # listed first on the package's page
    assert set(re.findall(r"^\.\. autofunction:: ensemble_env\.(\w+)$", page, re.M)) == factories
    assert {"parallel_env", "vector_env", "unseen_parallel_env"} <= factories
    assert not envoptions.scenario_settings("ensemble_env.parallel_env")
    unseen = " ".join(envoptions.scenario_settings("ensemble_env.unseen_vector_env"))
    assert "``episodes='task'``" in unseen and "``version=2``: ``feedback='team'``" in unseen
    if hasattr(ensemble_env, "gen_parallel_env"):
        generated = " ".join(envoptions.scenario_settings("ensemble_env.gen_parallel_env"))
        assert "``feedback='team'``" in generated and "``split='all'``" in generated


def test_the_contracts_options_table_is_envconfigs() -> None:
    """docs/environment-spec.md's Options table: one row per field of EnvConfig, with its default."""
    from ensemble_env import EnvConfig

    text = (DOCS / "environment-spec.md").read_text(encoding="utf-8")
    section = text.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split(" | ")[0].strip("| `"): line.split(" | ")[1]
        for line in section.splitlines()
        if line.startswith("| `")
    }
    assert sorted(rows) == sorted(item.name for item in fields(EnvConfig))
    for item in fields(EnvConfig):
        written = rows[item.name].strip("`").split(" (")[0].strip("`")
        assert ast.literal_eval(written) == item.default, f"{item.name}: {rows[item.name]} is not {item.default!r}"


# -- the README's commands in a new shell -------------------------------------------------------------------------


def _shell_lines(document: Path) -> list[list[list[str]]]:
    """The command lines of a Markdown file's ``sh`` blocks, each as its commands (the parts between ``&&``, ``;``
    or ``|``), each command as its words; comments dropped, continuation lines joined, a line that is not complete
    shell (a quoted string running over lines) left out."""
    text = document.read_text(encoding="utf-8")
    lines = []
    for body in re.findall(r"^```(?:sh|bash)\n(.*?)^```", text, re.S | re.M):
        for line in body.replace("\\\n", " ").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split, lexer.commenters = True, "#"
            try:
                tokens = list(lexer)
            except ValueError:
                continue
            commands: list[list[str]] = [[]]
            for token in tokens:
                if token in ("&&", ";", "|", "||"):
                    commands.append([])
                else:
                    commands[-1].append(token)
            if any(commands):
                lines.append([command for command in commands if command])
    return lines


def _ensemble_env_commands(line: list[list[str]]) -> list[list[str]]:
    """The ``ensemble-env`` invocations of a command line, each as its words."""
    return [words for words in line if Path(words[0]).name == "ensemble-env"]


def test_the_readme_commands_activate_the_virtualenv_and_name_the_bare_commands() -> None:
    readme = README.read_text(encoding="utf-8")
    first_block = re.search(r"^```sh\n(.*?)^```", readme, re.S | re.M).group(1)
    command_1, command_2 = [line for line in first_block.splitlines() if line and not line.startswith("#")][:2]
    for command in (command_1, command_2):
        assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && "), command
    blocks = "".join(re.findall(r"^```sh\n(.*?)^```", readme, re.S | re.M))
    assert ".venv/bin/" not in blocks.replace(". .venv/bin/activate", "")  # after it, the bare names, consistently
    assert "in a new shell, run `. .venv/bin/activate` first" in " ".join(readme.split())
    calling = [words for line in _shell_lines(README) for words in _ensemble_env_commands(line)]
    assert len(calling) >= 6 and all(words[0] == "ensemble-env" for words in calling)


DOCUMENTS_WITH_COMMANDS = [README, *sorted(DOCS.glob("*.md")), COURSE / "README.md"]


@pytest.mark.parametrize("document", DOCUMENTS_WITH_COMMANDS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_ensemble_env_line_of_the_docs_parses(document: Path) -> None:
    """Each ``ensemble-env`` command of a page's ``sh`` blocks is a command with options ``ensemble-env`` knows (a
    synopsis, with optional parts in brackets, is not a command)."""
    from ensemble_env.cli.parser import build_parser

    parser = build_parser()
    for line in _shell_lines(document):
        if re.search(r"\[--?\w", " ".join(map(" ".join, line))):
            continue
        for words in _ensemble_env_commands(line):
            try:
                parser.parse_args(words[1:])
            except SystemExit as exit:
                raise AssertionError(f"{document.name}: {shlex.join(words)} does not parse") from exit


@pytest.mark.slow
def test_every_readme_line_calling_ensemble_env_runs_in_a_new_shell_after_command_1(tmp_path: Path) -> None:
    """A new shell (nothing but the system's PATH), the virtualenv command 1 made activated as the README says: each
    README line that calls ``ensemble-env`` finds it and its options parse (``--help`` appended: nothing runs)."""
    activate = Path(sys.prefix) / "bin" / "activate"
    if sys.prefix == sys.base_prefix or not activate.is_file():
        pytest.skip("the tests do not run in a virtualenv (command 1 makes one)")
    if shutil.which("ensemble-env", path=str(Path(sys.prefix) / "bin")) is None:
        pytest.skip("ensemble-env is not installed in this virtualenv")
    lines = [" && ".join(map(shlex.join, line)) for line in _shell_lines(README)[2:] if _ensemble_env_commands(line)]
    assert lines
    fresh = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    bare = subprocess.run(["bash", "-c", "command -v ensemble-env"], env=fresh, capture_output=True, check=False)
    assert bare.returncode != 0  # the trap: without the activation, a new shell has no ensemble-env
    for line in lines:
        script = f". {shlex.quote(str(activate))} && {line} --help"
        done = subprocess.run(
            ["bash", "-c", script], env=fresh, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300
        )
        assert done.returncode == 0 and "usage: ensemble-env" in done.stdout, f"{line}\n{done.stderr[-2000:]}"


# -- the texts' counts, names and notation ---------------------------------------------------------------------------


def _prose(path: Path) -> list[str]:
    """The prose lines of a page (a lesson: its Markdown cells), outside fenced blocks and code spans, and outside the
    blocks generated from the code's docstrings (``<!-- name -->`` ... ``<!-- /name -->``: tests/test_docs_tables.py
    keeps them equal to the code, which writes plain text)."""
    text = re.sub(r"^<!-- ([\w:-]+) -->\n.*?^<!-- /\1 -->$", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    lines, fenced, markdown = [], False, path.suffix == ".md"
    for line in text.splitlines():
        if path.suffix == ".py":
            if line.startswith("# %%"):
                markdown = "[markdown]" in line
                continue
            line = line[2:] if line.startswith("# ") else ""
        if not markdown:
            continue
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`+[^`]*`+", "", line))
    return lines


@pytest.mark.parametrize(
    "path", [*sorted(DOCS.glob("*.md")), COURSE / "README.md", *LESSONS], ids=lambda path: path.name
)
def test_the_games_step_notation_is_written_as_maths(path: Path) -> None:
    raw = [line for line in _prose(path) if "$" not in line and STEP_NOTATION.search(line)]
    assert not raw, f"{path.name}: write the step notation as maths, $q_{{t+1}}$ (GitHub and the site render it): {raw}"


def test_the_course_readme_counts_its_lessons_and_times_each() -> None:
    text = " ".join((COURSE / "README.md").read_text(encoding="utf-8").split())
    count = len(LESSONS)
    words = re.findall(r"\b(One|Two|Three|Four|Five|Six|Seven|Eight|Nine|one|two|three|four|five|six|seven|eight|"
                       r"nine)\b (lessons|lesson's|notebooks|scripts|took)", text)  # fmt: skip
    words += re.findall(r"\b[Tt]he (one|two|three|four|five|six|seven|eight|nine)\b()", text)
    assert words and all(NUMBERS[word.lower()] == count for word, _ in words), words
    for path in LESSONS:
        row = next(line for line in (COURSE / "README.md").read_text(encoding="utf-8").splitlines()
                   if f"]({path.name})" in line)  # fmt: skip
        times = re.search(r"\| (\d+) s / \d+ s \|$", row)
        assert times, f"the table has no times for {path.name}"
        said = re.search(r"[Aa]bout (\d+) s of CPU", path.read_text(encoding="utf-8"))  # the lesson's own words
        assert said and said.group(1) == times.group(1), f"{path.name} says {said and said.group(0)}, the table {row}"
    for listed in re.findall(r"wall times? were ((?:\d+(?:\.\d+)?(?:, | and )?)+) s", text):
        assert len(re.findall(r"\d+(?:\.\d+)?", listed)) == count, listed


def test_the_names_the_readme_says_evaluate_prints_are_evaluates() -> None:
    from ensemble_env import datasets
    from ensemble_env.baselines import comparison, registry

    readme = " ".join(README.read_text(encoding="utf-8").split())
    paragraph = readme.split("**What command 1 prints.**", 1)[1].split("**", 1)[0]
    cache = datasets.load("bbh5")
    printed = comparison.evaluate_baselines(cache)
    assert "static_team" in printed and "oracle" in printed
    for name in ("static_team(certified)", "oracle_team(test)"):  # the results' names: not in evaluate's table
        assert f"`{name}`" in paragraph and name in registry.BASELINES and name not in printed
    results = {
        result.name: result for result in comparison.compare(cache, split="test", names=["static_team", "oracle"])
    }
    static, oracle = results["static_team"], results["oracle"]
    static_scores, oracle_scores = static.scores(cache), oracle.scores(cache)  # as evaluate's table prints them
    figures = f"({static_scores['accuracy']:.4f}, {static_scores['reward']:+.4f})"
    assert f"`static_team` is the results' `static_team` {figures}" in paragraph
    assert f"`oracle` is right whenever a model is ({oracle_scores['accuracy']:.4f}, all five consulted)" in paragraph


def test_the_output_folders_of_the_docs_commands_are_ignored_by_git() -> None:
    """A command a page shows writes its run or benchmark folder (``--out``) where git does not look (runs/, or a
    folder .gitignore names): following the docs leaves no untracked folder."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    outputs = set()
    for document in DOCUMENTS_WITH_COMMANDS:
        for line in _shell_lines(document):
            for words in _ensemble_env_commands(line):
                outputs |= {words[i + 1].rstrip("/") + "/" for i, word in enumerate(words[:-1]) if word == "--out"}
    outputs = {out for out in outputs if not out.rstrip("/").isupper() and not out.startswith(("/", "$", "~", "<"))}
    assert outputs
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"], input="\n".join(sorted(outputs)), cwd=ROOT,
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    ignored = set(checked.stdout.split())
    assert outputs <= ignored, f"written outside what git ignores: {sorted(outputs - ignored)}"


def _command_2s_count(request: pytest.FixtureRequest) -> int | None:
    """The tests this session collected when it is command 2 itself (``pytest --run-slow`` in the checkout, no
    paths, nothing selected or deselected): what ``pytest --collect-only --run-slow`` would count; else None."""
    config, options = request.config, request.config.option
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    whole = (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and Path(config.rootpath) == ROOT
        and config.getoption("--run-slow")
        and not (options.keyword or options.markexpr or options.deselect or options.ignore or options.ignore_glob)
        and not (getattr(options, "lf", False) or getattr(options, "stepwise", False))
        and reporter is not None
        and not reporter.stats.get("deselected")
    )
    return request.session.testscollected if whole else None


@pytest.mark.slow
def test_the_install_page_quotes_the_test_count_of_command_2(request: pytest.FixtureRequest) -> None:
    """docs/install.md says command 2 runs every test (--run-slow) and how many: within 10% of the collection (this
    session's, when it is command 2; else a ``--collect-only`` of it)."""
    text = " ".join((DOCS / "install.md").read_text(encoding="utf-8").split())
    section = text.split("## What the second command runs", 1)[1].split("## ", 1)[0]
    assert "The second command runs every test, the slow ones included (`--run-slow`" in section
    quoted = int(re.search(r"\): ([\d,]+) tests when this was written", section).group(1).replace(",", ""))
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the count is of the suite with the mappo extra")
    count = _command_2s_count(request)
    if count is None:
        collected = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--run-slow"],
            cwd=ROOT, capture_output=True, text=True, check=False, timeout=900,
        )  # fmt: skip
        count = int(re.search(r"(\d+) tests? collected", collected.stdout).group(1))
    assert abs(count - quoted) <= 0.1 * count, f"docs/install.md quotes {quoted:,} tests; {count:,} are collected"


# -- the README's lead figure ---------------------------------------------------------------------------------------


def _lead_figure():
    spec = importlib.util.spec_from_file_location("lead_figure", ROOT / "scripts" / "lead_figure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lead_figure_draws_a_results_json_learners_rules_and_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    def entry(mean: float, reference: str | None = None) -> dict[str, object]:
        interval = {"mean": mean, "low": mean - 0.03, "high": mean + 0.03}
        return {"reference": reference, "aggregate": {"reward": interval, "team_size": {"mean": 1.2}}}

    results = {"caches": {"bbh5": {"mappo": entry(-0.10), "ucb_team(partial)": entry(-0.105),
                                   "ftl_team": entry(-0.03, "full feedback")}}}  # fmt: skip
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results), encoding="utf-8")
    figure = _lead_figure()
    cache, rows = figure.rows(results, None, "reward")
    assert cache == "bbh5" and [row["kind"] for row in rows] == ["learner", "rule", "reference"]
    pytest.importorskip("matplotlib")
    out = tmp_path / "lead.png"
    assert figure.main([str(path), "-o", str(out), "--title", "partial feedback"]) == 0
    assert out.read_bytes().startswith(b"\x89PNG") and capsys.readouterr().out == f"figure written to {out}\n"
    path.write_text("[1, 2]", encoding="utf-8")
    assert figure.main([str(path), "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"lead_figure.py: error: {path}: expected a JSON object\n"
