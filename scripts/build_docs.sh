#!/usr/bin/env bash
# Build the documentation site into OUT (configured in docs/conf.py): the README as its front page, the pages of
# docs/ in a getting-started order, the course's lessons run at their quick budget and rendered (MyST-NB), and the
# API reference generated from the docstrings (docs/api/), with Sphinx, MyST-NB and furo. It needs the `docs`
# extra in the project's virtualenv, beside the `mappo` extra and its torch (lessons 3 and 4 train a learner):
# `pip install -e ".[mappo,docs]"` after the README's torch step. The API reference itself imports no torch
# (docs/conf.py mocks it).
#
# Fails on any warning (Sphinx lists them all, then exits 1), on a lesson cell that raises, and when a name of
# `ensemble_env.__all__` or `ensemble_mappo.__all__` has no entry in OUT's object inventory. Then open
# OUT/index.html.
#
# usage: scripts/build_docs.sh OUT
# The interpreter, the first that applies: $PYTHON; the active virtualenv's python ($VIRTUAL_ENV); the
# repository's .venv/bin/python (the README's commands make it); python3. So it works in a new shell as well.
set -euo pipefail

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
    echo "usage: scripts/build_docs.sh OUT   (OUT: the folder the HTML site is written to)" >&2
    exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$1"
if [ -n "${PYTHON:-}" ]; then
    python="$PYTHON"
elif [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    python="$VIRTUAL_ENV/bin/python"
elif [ -x "$root/.venv/bin/python" ]; then
    python="$root/.venv/bin/python"
else
    python=python3
fi

# OUT must be a folder this script can write (made if missing): one line otherwise, never Sphinx's crash report
if [ -e "$out" ] && [ ! -d "$out" ]; then
    echo "build_docs.sh: error: OUT $out: is not a folder (OUT is the folder the HTML site is written to)" >&2
    exit 2
fi
if ! made="$(mkdir -p -- "$out" 2>&1)"; then
    echo "build_docs.sh: error: OUT $out: cannot make the folder (${made##*: })" >&2
    exit 2
fi
if ! probe="$(mktemp "$out/.build_docs.XXXXXX" 2>&1)"; then
    echo "build_docs.sh: error: OUT $out: cannot write in the folder (${probe##*: })" >&2
    exit 2
fi
rm -f -- "$probe"

# what the build imports: the docs extra (Sphinx, MyST-NB, furo, ipykernel, matplotlib), torch and tqdm (the lessons
# that train), named in one line when missing, before anything runs
if ! missing="$("$python" - <<'PY' 2>&1
import importlib.util
needed = {"sphinx": "docs", "myst_nb": "docs", "furo": "docs", "ipykernel": "docs", "matplotlib": "docs",
          "torch": "mappo (torch first: the README's torch step)", "tqdm": "mappo"}
missing = sorted({f"{name} ({extra} extra)" for name, extra in needed.items() if importlib.util.find_spec(name) is None})
if missing:
    raise SystemExit(", ".join(missing))
PY
)"; then
    echo "build_docs.sh: $python lacks ${missing:-its modules}: pip install -e \".[mappo,docs]\" (after torch)" >&2
    exit 1
fi
# -E -a: every page read and written again, so that a second build into OUT shows every warning again
"$python" -m sphinx -W --keep-going -E -a --quiet --builder html "$root/docs" "$out"

# Every public name of the two packages has its entry in the site (read from OUT, not from the build's memory).
"$python" - "$root" "$out" <<'PY'
import ast
import re
import sys
import zlib
from pathlib import Path

root, out = Path(sys.argv[1]), Path(sys.argv[2])
if not (out / "index.html").is_file():
    sys.exit(f"build_docs.sh: {out / 'index.html'} was not written")
header, _, body = (out / "objects.inv").read_bytes().partition(b"# The remainder of this file is compressed using zlib.\n")
entries = set(re.findall(r"^(\S+) py:\w+ ", zlib.decompress(body).decode("utf-8"), re.MULTILINE))
missing = []
for package, init in (("ensemble_env", "src/ensemble_env/__init__.py"), ("ensemble_mappo", "agents/ensemble_mappo/__init__.py")):
    tree = ast.parse((root / init).read_text(encoding="utf-8"))
    names = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == "__all__" for target in node.targets)
    )
    missing += [f"{package}.{name}" for name in names if f"{package}.{name}" not in entries]
if missing:
    sys.exit(f"build_docs.sh: no entry in {out / 'objects.inv'} for: {', '.join(missing)}")
print(f"build_docs.sh: the site is in {out} (open {out / 'index.html'}); {len(entries)} API entries")
PY
