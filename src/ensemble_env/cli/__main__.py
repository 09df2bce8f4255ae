"""``python -m ensemble_env.cli``: the same as the ``ensemble-env`` command."""

from ensemble_env.cli.parser import main

raise SystemExit(main())
