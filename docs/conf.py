"""Sphinx configuration of the documentation site, in the furo theme, as PettingZoo and Gymnasium do:

- the front page (index.md) is the repository's README, rendered (its links and images made the site's), then the
  pages of docs/ in a getting-started order (index.md's tables of contents);
- the course's lessons are pages: each committed notebook (``tutorials/NN_name.ipynb``, made from its script) run
  at the course's quick budget (``ENSEMBLE_ENV_TUTORIAL_QUICK=1``) by MyST-NB while the site is built (or, in the
  test suite, shown as the tests ran it: ``ENSEMBLE_ENV_SITE_LESSONS``), its code, output and figures shown, the
  script and the notebook offered as downloads at the top;
- the API reference generated from the docstrings (autodoc, docs/api/); the environment factories' options
  (``parallel_env(**options)``, ...) listed in their entries from ``EnvConfig`` itself (``_ext/envoptions.py``);
- maths as MathJax (``$q_{t+1}$`` and ```` ```math ```` blocks, as GitHub renders them), wide tables and code
  scrolling sideways (``_static/site.css``).

Build it with ``scripts/build_docs.sh OUT`` (docs/README.md): any warning fails the build.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import logging as std_logging
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.ext.autodoc.mock import mock
from sphinx.pycode import ModuleAnalyzer
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# the reference documents this checkout's sources, whatever the environment has installed
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "agents")]
sys.path.insert(0, str(DOCS / "_ext"))

import envoptions  # noqa: E402  (docs/_ext: the factories' options from EnvConfig)

project = "ensemble_env"
author = "the ensemble_env authors"
copyright = "the ensemble_env authors (MIT licence)"
release = version = next(
    node.value.value
    for node in ast.parse((ROOT / "src" / "ensemble_env" / "__init__.py").read_text(encoding="utf-8")).body
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__version__"
)

# myst_nb: MyST-Parser (the Markdown pages) and the notebooks (the lessons), executed
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
root_doc = "index"
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
# _ext: Python for this configuration; the lessons' scripts are sources of the notebooks, not pages
exclude_patterns = ["_build", "_ext", "_static"]

html_theme = "furo"
html_title = f"ensemble_env {release}"
html_static_path = ["_static"]
html_css_files = ["site.css"]

# MyST: GitHub's heading anchors (the pages link `page.md#a-heading`), and maths as GitHub renders it: ``$...$``
# inline, ``$$...$$`` and ```` ```math ```` blocks
myst_heading_anchors = 6
myst_enable_extensions = ["dollarmath"]
myst_fence_as_directive = ["math"]

#: the lessons: ``tutorials/NN_name`` (each a notebook made from its script)
LESSON = re.compile(r"^tutorials/(\d\d_\w+)$")
# MyST-NB runs every lesson's notebook while the site is built, in its folder (it imports course.py from there),
# on a kernel of this interpreter, at the course's quick budget (the environment: _LessonRun); a cell that raises
# fails the build. The committed notebooks hold no output; the pages show what this run printed and drew.
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = True  # the kernel's working folder: a temporary one (course.py is found by PYTHONPATH)
nb_merge_streams = True
#: a folder of lessons already run (``NN_name.ipynb`` with their outputs, run as the build runs them: on a python3
#: kernel, at the quick budget, the output folder ``runs/tutorials`` under the lesson's folder): a lesson found there
#: is shown as it ran there and not run again (:func:`ran_lesson`); the others run as above. The test suite sets it
#: (tests/test_docs_site.py builds the pages from the runs tests/test_tutorials.py checks, issue 47); unset, as in
#: scripts/build_docs.sh, every lesson runs.
RAN_LESSONS = os.environ.get("ENSEMBLE_ENV_SITE_LESSONS") or None
# the build's output: Sphinx's warnings, not nbclient's line per notebook run
std_logging.getLogger("traitlets").setLevel(std_logging.WARNING)

# autodoc: the docstrings are NumPy style (napoleon); members in the order of the source
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# a member without a docstring of its own is left out, not shown with its base class's (gymnasium's, torch's)
autodoc_inherit_docstrings = False
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# The learner (ensemble_mappo) imports torch, the adapters their libraries (when used); the site is built without
# them (the `docs` extra installs none, and the pages are the same whether or not they are installed): autodoc
# reads the modules with these mocked.
autodoc_mock_imports = ["torch", "stable_baselines3", "sb3_contrib", "supersuit", "ray", "torchrl", "tensordict"]
autodoc_mock_imports += ["benchmarl"]

logger = logging.getLogger(__name__)

#: the API pages: each documents packages and modules with ``automodule``, read from the pages themselves
API_PAGES = sorted((DOCS / "api").glob("*.md"))
_AUTOMODULE = re.compile(r"^\.\. automodule:: (\S+)", re.MULTILINE)


def _documented_modules() -> list[str]:
    return [name for page in API_PAGES for name in _AUTOMODULE.findall(page.read_text(encoding="utf-8"))]


def _home(module_name: str, name: str) -> str | None:
    """The module whose source holds the doc comment (``#:``) of the constant ``name`` that ``module_name`` publishes,
    following its imports (``from ensemble_env.cache.logit_cache import SPLITS``); None when none has one."""
    analyzer = ModuleAnalyzer.for_module(module_name)
    if ("", name) in analyzer.find_attr_docs():
        return module_name
    for node in ast.walk(ast.parse(analyzer.code)):
        if isinstance(node, ast.ImportFrom) and node.module and any(alias.name == name for alias in node.names):
            return _home(node.module, name)
    return None


class _Owners:
    """Where each public object is documented: once, under the shortest name that publishes it.

    ``ensemble_env`` publishes ``LogitCache`` (from ``ensemble_env.cache``, which publishes it too): its entry is
    ``ensemble_env.LogitCache``, and the page of ``ensemble_env.cache`` leaves it out (autodoc notes the longer
    names as aliases, so every cross-reference to them lands on the one entry). A constant published under a
    shorter name keeps its doc comment (``#:``), read where it is defined.
    """

    def __init__(self) -> None:
        self._publishers: dict[tuple[str, int], list[str]] | None = None
        self.current = ""

    def publishers(self, name: str, obj: Any) -> list[str]:
        """The documented modules that publish ``obj`` as ``name`` (their ``__all__``), the shortest first.

        A name of ``__all__`` that ``dir(module)`` does not list (a class an adapter builds from its library's base
        class when first asked for it, :func:`ensemble_env.adapters.lazy_class`) is left out: autodoc cannot see it,
        and building it needs the library.
        """
        if self._publishers is None:
            self._publishers = {}
            with mock(autodoc_mock_imports):
                for module_name in sorted(_documented_modules(), key=lambda name: (name.count("."), name)):
                    module = importlib.import_module(module_name)
                    for member in set(getattr(module, "__all__", ())) & set(dir(module)):
                        self._publishers.setdefault((member, id(getattr(module, member))), []).append(module_name)
        return self._publishers.get((name, id(obj)), [])

    def module_started(self, app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
        """autodoc-process-docstring: a module's docstring comes before its members are chosen. autodoc documents a
        constant only where its doc comment (``#:``) is; one published under a shorter name gets its entry there,
        with the comment of the module that defines it (its name there an alias)."""
        if what != "module":
            return
        self.current = name
        with mock(autodoc_mock_imports):
            members = {member: getattr(obj, member) for member in set(getattr(obj, "__all__", ())) & set(dir(obj))}
        for member, value in sorted(members.items()):
            publishers = self.publishers(member, value)
            constant = not (inspect.isclass(value) or inspect.isroutine(value) or inspect.ismodule(value))
            if publishers[:1] != [name] or not constant:
                continue
            home = next(filter(None, (_home(publisher, member) for publisher in publishers)), None)
            if home is not None and home != name:
                lines += ["", f".. py:data:: {member}", f"   :canonical: {home}.{member}", ""]
                lines += [f"   {line}" for line in ModuleAnalyzer.for_module(home).find_attr_docs()[("", member)]]

    def check(self, app: Sphinx, exception: Exception | None) -> None:
        """build-finished: every public name of every documented module has its entry, under the shortest name
        that publishes it (a name none documents is a warning, which fails the build)."""
        if exception is not None or self._publishers is None:
            return
        objects = app.env.get_domain("py").objects  # type: ignore[attr-defined]
        for (member, _), publishers in sorted(self._publishers.items()):
            if f"{publishers[0]}.{member}" not in objects:
                logger.warning("%s.%s has no entry in the API reference (docs/api/)", publishers[0], member)

    def skip(self, app: Sphinx, what: str, name: str, obj: Any, skip: bool, options: Any) -> bool | None:
        """autodoc-skip-member: a module's member is documented under the shortest name that publishes it."""
        if what != "module":
            return None
        if name in (getattr(options, "exclude_members", None) or ()):
            return True  # documented elsewhere on the page (docs/api/ensemble_env.md: the factories first)
        publishers = self.publishers(name, obj)
        if not publishers:
            return None
        return publishers[0] != self.current


class RepositoryLinks(SphinxTransform):
    """Links from the pages to the repository's files that are not pages of the site.

    The pages are written for GitHub, where ``[the README](../README.md)`` or ``[img/](img/)`` opens the file or the
    folder. MyST already makes a link to a file that is not a page (a lesson's script, an example) a download of
    it; a Markdown file outside docs/ (the repository's README, a folder's README) it takes for a page of the site
    (named by its absolute path, being outside the site) and warns that there is none. This makes those a download
    too, as the other files, and a link to a folder its text (the site holds no folder listing). A link to a path
    that does not exist still warns.
    """

    default_priority = 500

    def apply(self, **kwargs: Any) -> None:
        here = Path(self.env.doc2path(self.env.docname)).parent
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst":
                continue
            target = str(node["reftarget"])
            if node.get("refdomain") == "doc" and target not in self.env.found_docs and Path(target).is_absolute():
                files = [Path(target + suffix) for suffix in source_suffix if Path(target + suffix).is_file()]
                path = files[0] if files else None
                if path is not None and DOCS not in path.resolve().parents:
                    link = addnodes.download_reference(
                        refdomain=None,
                        reftarget=os.path.relpath(path, here),
                        refdoc=node["refdoc"],
                        reftype="myst",
                        refexplicit=node.get("refexplicit", False),
                    )
                    link += node.children
                    node.replace_self(link)
            elif node.get("refdomain") is None and (here / target).is_dir():
                node.replace_self(nodes.inline("", "", *node.children))


class SiteLinks(SphinxTransform):
    """Links that GitHub and the site resolve differently.

    - The repository's README is the site's front page: a link to it (``[README](../README.md)``) opens the index.
    - A lesson is a page: a link to its script (``tutorials/01_the_game.py``, which MyST makes a download) opens the
      lesson's page, whose top offers the script and the notebook (:class:`LessonDownloads`).
    """

    default_priority = 490  # before RepositoryLinks, which would make the README a download

    def apply(self, **kwargs: Any) -> None:
        here = Path(self.env.doc2path(self.env.docname)).parent
        for node in list(self.document.findall(addnodes.pending_xref)):
            target = str(node.get("reftarget", ""))
            if node.get("reftype") == "myst" and node.get("refdomain") == "doc" and Path(target).is_absolute():
                if Path(target + ".md").resolve() == (ROOT / "README.md").resolve():
                    node.replace_self(_doc_link(node, "index", node["refdoc"]))
        for node in list(self.document.findall(addnodes.download_reference)):
            path = (here / str(node["reftarget"])).resolve()
            page = path.relative_to(DOCS).with_suffix("").as_posix() if DOCS in path.parents else ""
            if path.suffix == ".py" and LESSON.match(page) and node["refdoc"] != page:
                node.replace_self(_doc_link(node, page, node["refdoc"]))


def _doc_link(node: nodes.Element, page: str, refdoc: str) -> addnodes.pending_xref:
    """A link to the page ``page`` (a docname) with ``node``'s text."""
    link = addnodes.pending_xref(
        refdomain="std", reftype="doc", reftarget=f"/{page}", refdoc=refdoc, refexplicit=True, refwarn=True
    )
    link += nodes.inline("", "", *node.children)
    return link


class LessonDownloads(SphinxTransform):
    """At the top of a lesson's page (under its title): the lesson's script and notebook, as downloads, and how the
    page was made."""

    default_priority = 500

    def apply(self, **kwargs: Any) -> None:
        lesson = LESSON.match(self.env.docname)
        if lesson is None:
            return
        stem = lesson.group(1)
        section = next(iter(self.document.findall(nodes.section)), None)
        if section is None or not isinstance(section[0], nodes.title):
            return
        paragraph = nodes.paragraph()
        paragraph += nodes.strong("", "Download the lesson: ")
        for index, (suffix, words) in enumerate(((".py", "the script"), (".ipynb", "the notebook"))):
            link = addnodes.download_reference(
                refdomain=None, reftarget=stem + suffix, refdoc=self.env.docname, reftype="myst", refexplicit=True
            )
            link += nodes.literal("", stem + suffix)
            paragraph += nodes.Text((", " if index else "") + words + " ")
            paragraph += link
        paragraph += nodes.Text(
            ". This page shows the notebook as it ran when the site was built, at the course's quick budget "
            "(ENSEMBLE_ENV_TUTORIAL_QUICK=1: fewer seeds and shorter training than the default, so its numbers "
            "differ from a default run's)."
        )
        section.insert(1, paragraph)


class _LessonRun:
    """The environment the lessons' notebooks run in while the site is built (builder-inited to build-finished):

    - the quick budget (``ENSEMBLE_ENV_TUTORIAL_QUICK=1``) and the output folder ``runs/tutorials`` under the
      kernel's temporary working folder (``nb_execution_in_temp``), so that the pages print short paths and
      nothing is written into the repository (nor its bytecode: ``PYTHONDONTWRITEBYTECODE``);
    - ``course.py`` found on ``PYTHONPATH`` (docs/tutorials/);
    - the kernel ``python3`` of this interpreter (a kernelspec in a temporary ``JUPYTER_PATH``, which Jupyter searches
      first), whatever kernels the machine has installed;
    - matplotlib's backend left to the kernel (inline figures: an ``MPLBACKEND`` set outside would hide them).
    """

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.saved: dict[str, str | None] = {}

    def start(self, app: Sphinx) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ensemble_env_site_"))
        kernel = self.folder / "kernels" / "python3"
        kernel.mkdir(parents=True)
        spec = {
            # the kernel's own log (a warning that it talks over local TCP, per notebook) is not the build's output;
            # a cell's error still fails the build (it comes as a message, not a log line)
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--log-level=ERROR"],
            "display_name": "Python 3",
            "language": "python",
        }
        (kernel / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
        python_path = os.pathsep.join(filter(None, [str(DOCS / "tutorials"), os.environ.get("PYTHONPATH")]))
        settings = {
            "ENSEMBLE_ENV_TUTORIAL_QUICK": "1",
            "ENSEMBLE_ENV_TUTORIAL_OUT": str(Path("runs") / "tutorials"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": python_path,
            "JUPYTER_PATH": str(self.folder),
            "MPLBACKEND": None,
        }
        for key, value in settings.items():
            self.saved[key] = os.environ.get(key)
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def finish(self, app: Sphinx, exception: Exception | None) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def ran_lesson(app: Sphinx, docname: str, source: list[str]) -> None:
    """source-read: a lesson's notebook replaced by its run in :data:`RAN_LESSONS`, when there, which MyST-NB shows
    without running it again. A run whose cells are not the committed notebook's is a warning (the build fails)."""
    lesson = LESSON.match(docname)
    if RAN_LESSONS is None or lesson is None:
        return
    path = Path(RAN_LESSONS) / f"{lesson.group(1)}.ipynb"
    if not path.is_file():
        return
    ran, committed = json.loads(path.read_text(encoding="utf-8")), json.loads(source[0])

    def cells(notebook: dict[str, Any]) -> list[tuple[str, str]]:
        return [(cell["cell_type"], "".join(cell["source"])) for cell in notebook["cells"]]

    if cells(ran) != cells(committed):
        logger.warning("%s: its cells are not those of %s.ipynb (a run of another version)", path, docname)
        return
    ran["metadata"]["mystnb"] = {"execution_mode": "off"}
    source[0] = json.dumps(ran)


def factory_options(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """autodoc-process-docstring: an environment factory's entry lists every option, from ``EnvConfig`` (before its
    examples)."""
    if what != "function" or not envoptions.is_factory(name, obj):
        return
    at = next((index for index, line in enumerate(lines) if line.lstrip().startswith(">>>")), len(lines))
    lines[at:at] = envoptions.factory_lines(name, envoptions.keywords_name(obj) or "options")


def setup(app: Sphinx) -> dict[str, Any]:
    owners = _Owners()
    lessons = _LessonRun()
    app.connect("autodoc-process-docstring", owners.module_started)
    app.connect("autodoc-process-docstring", factory_options)
    app.connect("autodoc-skip-member", owners.skip)
    app.connect("builder-inited", lessons.start)
    app.connect("source-read", ran_lesson)
    app.connect("build-finished", owners.check)
    app.connect("build-finished", lessons.finish)
    app.add_transform(SiteLinks)
    app.add_transform(LessonDownloads)
    app.add_transform(RepositoryLinks)
    return {"parallel_read_safe": False}
