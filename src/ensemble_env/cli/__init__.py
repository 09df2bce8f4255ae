"""The ``ensemble-env`` command line: :func:`main` and one module per command group.

================  ============================================================================================
module            what it holds
================  ============================================================================================
``parser``        the entry point, :func:`main` (re-exported here): every command group comes from an
                  ``ensemble_env.commands`` entry point, this package's own too
``options``       what the commands share: list options, status lines, counts, the version text
``demo``          ``demo`` and ``baselines``
``play``          ``play``
``cache``         ``cache ...`` (convert, split, validate, summarise and plot caches)
================  ============================================================================================
"""

from __future__ import annotations

from ensemble_env.cli.parser import COMMAND_GROUP, build_parser, main

__all__ = ["COMMAND_GROUP", "build_parser", "main"]
