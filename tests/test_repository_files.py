"""The repository's own files agree with each other: the licence (LICENSE, pyproject.toml), the citation
(CITATION.cff: CFF 1.2.0, the version of pyproject.toml, the two seed papers), the documentation's index
(docs/README.md lists every page), the extras (pyproject.toml, :mod:`ensemble_env.extras`, the table of
docs/install.md) and the README as a front page (a picture and CI's two commands in its first screen, short
paragraphs, a bounded length).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ensemble_env import extras

ROOT = Path(__file__).resolve().parents[1]
#: the seed papers every citation must name: arXiv id -> a word of the title
SEED_PAPERS = {"2502.04492": "Two-Stage Reinforcement Learning Agents", "2506.00439": "RLAE"}
#: the README's bounds as a front page (issue 42): the first screen, a paragraph, the whole page, in lines
FIRST_SCREEN_LINES, PARAGRAPH_LINES, README_LINES = 40, 8, 250
#: the keys CFF 1.2.0 allows at the top level (its schema's ``properties``)
CFF_KEYS = {
    "abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi", "identifiers", "keywords",
    "license", "license-url", "message", "preferred-citation", "references", "repository", "repository-artifact",
    "repository-code", "title", "type", "url", "version",
}  # fmt: skip


def _pyproject() -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# -- a YAML reader: PyYAML when installed, else the block subset CITATION.cff is written in ---------------------


def _scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].replace('\\"', '"') if text[0] == '"' else text[1:-1].replace("''", "'")
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _block(lines: list[tuple[int, str]], start: int, indent: int) -> tuple[Any, int]:
    """The mapping or list whose lines start at ``start`` with ``indent`` spaces; the value and the next line."""
    if lines[start][1].startswith("- "):
        items: list[Any] = []
        index = start
        while index < len(lines) and lines[index][0] == indent and lines[index][1].startswith("- "):
            rest = lines[index][1][2:]
            if re.match(r"^[\w-]+:( |$)", rest):  # a mapping: its first key on the dash's line
                lines[index] = (indent + 2, rest)
                value, index = _block(lines, index, indent + 2)
            else:
                value, index = _scalar(rest), index + 1
            items.append(value)
        return items, index
    mapping: dict[str, Any] = {}
    index = start
    while index < len(lines) and lines[index][0] == indent and not lines[index][1].startswith("- "):
        match = re.fullmatch(r"([\w-]+):(?: (.*))?", lines[index][1])
        assert match, f"not a key of a mapping: {lines[index][1]!r}"
        key, rest = match.group(1), match.group(2)
        assert key not in mapping, f"{key} given twice"
        if rest:
            mapping[key], index = _scalar(rest), index + 1
        else:
            assert index + 1 < len(lines) and lines[index + 1][0] > indent, f"{key}: nothing under it"
            mapping[key], index = _block(lines, index + 1, lines[index + 1][0])
    return mapping, index


def _simple_yaml(text: str) -> Any:
    lines = [
        (len(line) - len(line.lstrip(" ")), line.strip())
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert "\t" not in text, "YAML indents with spaces"
    value, end = _block(lines, 0, 0)
    assert end == len(lines), f"line {end}: not read ({lines[end][1]!r})"
    return value


def _read_yaml(text: str) -> Any:
    try:
        import yaml
    except ModuleNotFoundError:
        return _simple_yaml(text)
    return yaml.safe_load(text)


def test_the_simple_reader_reads_blocks_lists_and_quotes() -> None:
    text = 'a: 1\nb: "x: y"\nc:\n  - name: n\n    k: [v]\n  - plain\nd:\n  e: 0.1.0\n'
    assert _simple_yaml(text) == {"a": 1, "b": "x: y", "c": [{"name": "n", "k": "[v]"}, "plain"], "d": {"e": "0.1.0"}}


# -- the licence --------------------------------------------------------------------------------------------------


def test_the_licence_is_mit_as_pyproject_says() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "MIT License"
    assert "Copyright (c) 2026 the ensemble_env developers" in text
    assert "Permission is hereby granted, free of charge, to any person obtaining a copy" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
    assert _pyproject()["project"]["license"] == "MIT"


# -- the citation -------------------------------------------------------------------------------------------------


def _citation() -> dict[str, Any]:
    return _read_yaml((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def _person_or_entity(author: Any) -> bool:
    if not isinstance(author, dict):
        return False
    named = isinstance(author.get("name"), str) and author["name"].strip()
    person = all(isinstance(author.get(key), str) and author[key].strip() for key in ("family-names", "given-names"))
    return bool(named or person)


def test_the_citation_is_cff_1_2_0_with_the_projects_version_and_licence() -> None:
    citation = _citation()
    assert set(citation) <= CFF_KEYS, set(citation) - CFF_KEYS
    assert citation["cff-version"] == "1.2.0"
    for key in ("message", "title"):
        assert isinstance(citation[key], str) and citation[key].strip()
    assert citation["type"] == "software"
    assert citation["authors"] and all(_person_or_entity(author) for author in citation["authors"])
    project = _pyproject()["project"]
    assert str(citation["version"]) == project["version"]
    assert citation["license"] == project["license"] == "MIT"


def test_the_citation_references_the_two_seed_papers() -> None:
    references = _citation()["references"]
    by_id = {}
    for reference in references:
        assert reference["type"] in ("article", "generic", "report", "conference-paper")
        assert isinstance(reference["title"], str) and isinstance(reference["year"], int)
        assert reference["authors"] and all(_person_or_entity(author) for author in reference["authors"])
        found = re.search(r"arxiv\.org/abs/(\d{4}\.\d{5})", reference["url"])
        assert found, reference["url"]
        arxiv = found.group(1)
        assert reference["doi"] == f"10.48550/arXiv.{arxiv}"
        assert {"type": "other", "value": f"arXiv:{arxiv}"}.items() <= reference["identifiers"][0].items()
        by_id[arxiv] = reference
    assert set(by_id) == set(SEED_PAPERS)
    for arxiv, words in SEED_PAPERS.items():
        assert words in by_id[arxiv]["title"]
    docs = " ".join((ROOT / "docs" / "environment-spec.md").read_text(encoding="utf-8").split())  # lines joined
    for reference in references:  # the titles the documentation cites
        assert f'"{reference["title"].removeprefix("RLAE: ")}"' in docs


# -- the documentation's index ------------------------------------------------------------------------------------


def _index_links() -> list[str]:
    text = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    return [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in target]


def test_the_docs_index_links_every_page_and_only_pages_that_exist() -> None:
    links = _index_links()
    for target in links:
        assert (ROOT / "docs" / target).exists(), f"docs/README.md links {target}, which does not exist"
    linked = {(ROOT / "docs" / target).resolve() for target in links}
    pages = [page for page in sorted((ROOT / "docs").glob("*.md")) if page.name != "README.md"]
    pages.append(ROOT / "docs" / "tutorials" / "README.md")
    assert len(pages) > 5
    missing = [str(page.relative_to(ROOT)) for page in pages if page.resolve() not in linked]
    assert not missing, f"docs/README.md does not list: {', '.join(missing)}"


def test_the_readme_links_the_docs_index() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/README.md)" in readme.split("\n## ")[0]  # near the top, before the first section


# -- the extras ---------------------------------------------------------------------------------------------------


def test_the_extras_are_pyprojects_and_the_install_page_tables_them() -> None:
    defined = _pyproject()["project"]["optional-dependencies"]
    assert set(extras.EXTRAS) == set(defined)
    page = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    for name in defined:
        row = next((line for line in rows if f"`{name}`" in line.split("|")[1]), None)
        assert row is not None, f"docs/install.md's extras table has no row for {name}"
        if name in ("plot", "data", "dev", "mappo"):
            assert f"`{extras.install_line(name, with_torch=name == 'mappo')}`" in row
    for name, extra in extras.EXTRAS.items():  # the modules the code checks come with the extra
        listed = " ".join(defined[name]).lower().replace("-", "_")
        for module in extra.modules:
            assert {"sklearn": "scikit_learn"}.get(module, module) in listed, f"{name}: {module}"


# -- the README as a front page -------------------------------------------------------------------------------


def _prose_paragraphs(text: str) -> list[tuple[int, int]]:
    """(first line, line count) of each prose paragraph of a Markdown text, lines numbered from 1.

    A paragraph is a run of non-blank lines outside fenced blocks; a table row, a heading or a fence ends it, and a
    list item starts a paragraph of its own (its continuation lines belong to it).
    """
    paragraphs: list[tuple[int, int]] = []
    start, count, fenced = 0, 0, False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
        prose = not fenced and bool(stripped) and not stripped.startswith(("```", "|", "#"))
        item = re.match(r"(?:[-*+]|\d+\.) ", stripped) is not None
        if count and (not prose or item):
            paragraphs.append((start, count))
            count = 0
        if prose:
            start, count = (number, 1) if count == 0 else (start, count + 1)
    if count:
        paragraphs.append((start, count))
    return paragraphs


def test_prose_paragraphs_are_counted_between_blocks_tables_and_list_items() -> None:
    text = "# Title\n\none\ntwo\n\n```sh\nnot prose\n\nnor this\n```\n- item\n  more\n- next\n| a | b |\nafter\n"
    assert _prose_paragraphs(text) == [(3, 2), (11, 2), (13, 1), (15, 1)]


def test_the_readme_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines, more than {README_LINES}"
    first_screen = "\n".join(lines[:FIRST_SCREEN_LINES])
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", first_screen)
    assert images, f"README.md shows no image in its first {FIRST_SCREEN_LINES} lines"
    for image in images:
        assert (ROOT / image).is_file(), f"README.md shows {image}, which does not exist"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = re.findall(r"^(?:main_job|tests)='([^']+)'", ci, re.M)
    assert len(commands) == 2  # what .ci/run runs: the install-train-evaluate line and the tests' line
    for command in commands:
        assert command in first_screen, f"README.md's first {FIRST_SCREEN_LINES} lines do not show: {command}"
    long = [f"line {start}: {count} lines" for start, count in _prose_paragraphs(text) if count > PARAGRAPH_LINES]
    assert not long, f"README.md paragraphs longer than {PARAGRAPH_LINES} lines: {', '.join(long)}"
