"""The tests' shared helpers: what more than one test module uses lives here, and every module under tests/ takes it
from here; no module imports a test module (a ``test_*.py`` file) nor ``conftest`` (tests/test_architecture.py checks
it). Fixtures stay in tests/conftest.py, which builds them from these helpers; the fuzz suites' watchdog is
tests/fuzzing.py, a script of its own.

- :mod:`testing.caches`: the tiny hand-built cache's fields, label flips, rebuilding and comparing caches;
- :mod:`testing.conversions`: the converters' inputs: a small hand-written pool of lm-eval samples files (both
  layouts), arrays, the real BBH samples' folder, and a digest of a folder's files;
- :mod:`testing.game`: the unseen-task game's hand cache and tables, random teams, the window statistics by
  definition, snapshot round trips through ``np.savez``, and a deep equality of everything an environment gives;
- :mod:`testing.hostile`: hostile values (numbers, numpy dtypes, non-numbers) described in JSON, for the fuzz suites;
- :mod:`testing.rules`: the unseen-task protocol's four-task pool, and the partial-feedback rules written out
  naively;
- :mod:`testing.tables`: reading the commands' plain-text tables;
- :mod:`testing.benchmarks`: importing a benchmark script, a folder's snapshot, a fake ``train`` run and benchmark;
- :mod:`testing.benchmarl_runs`: BenchMARL's Hydra command line, run tiny and quiet in a subprocess;
- :mod:`testing.lessons`: the course's notebooks, each run once per session (the tutorials' tests and the site's).

tests/ is on ``sys.path`` (tests/conftest.py puts it there; a fuzz suite run as a script puts it there itself), so
this package imports as ``testing``.
"""
