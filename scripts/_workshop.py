"""Puts the repository root on `sys.path`, so that a script of this folder imports the workshop.

The workshop (`tools/`: benchmark harnesses, the site generator, the load tester) lives in
the checkout and is not installed with the package; a script started as
`python scripts/NAME.py` has only `scripts/` on its path. Each script that needs `tools`
imports this module first.
"""

import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
if str(REPOSITORY) not in sys.path:
    sys.path.insert(0, str(REPOSITORY))
