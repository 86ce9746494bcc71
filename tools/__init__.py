"""The workshop: what only this project's developers run, kept out of the installed package.

Benchmark harnesses (`tools.bench`, the peer harness in `tools.bench.peer`), the documentation
site's generators and the docs-block checker (`tools.site`) and the service's load tester
(`tools.serve_load`). They import `seq2seq`; `seq2seq` never imports them (the import
contract in pyproject.toml). The wheel does not install this folder: run its scripts from a
checkout (`scripts/`, `make bench`), where the repository root is importable.
"""

import seq2seq.built_ins  # noqa: F401  (registers the built-in components the tools look up)
