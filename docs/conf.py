"""Sphinx configuration of the documentation site: the Markdown pages of docs/ as they are (MyST) and the API
reference generated from the docstrings (autodoc, docs/api/), in the furo theme, as PettingZoo and Gymnasium do.

Build it with ``scripts/build_docs.sh OUT`` (docs/README.md): any warning fails the build.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import sys
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

project = "ensemble_env"
author = "the ensemble_env authors"
copyright = "the ensemble_env authors (MIT licence)"
release = version = next(
    node.value.value
    for node in ast.parse((ROOT / "src" / "ensemble_env" / "__init__.py").read_text(encoding="utf-8")).body
    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__version__"
)

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
root_doc = "index"
source_suffix = {".md": "markdown"}
# README.md is the site's front page through index.md, which includes it (GitHub shows README.md in the folder)
exclude_patterns = ["README.md", "_build"]

html_theme = "furo"
html_title = f"ensemble_env {release}"

# MyST: GitHub's heading anchors (the pages link `page.md#a-heading`), and ``$...$`` maths as GitHub renders it
myst_heading_anchors = 6
myst_enable_extensions = ["dollarmath"]

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


def setup(app: Sphinx) -> dict[str, Any]:
    owners = _Owners()
    app.connect("autodoc-process-docstring", owners.module_started)
    app.connect("autodoc-skip-member", owners.skip)
    app.connect("build-finished", owners.check)
    app.add_transform(RepositoryLinks)
    return {"parallel_read_safe": False}
