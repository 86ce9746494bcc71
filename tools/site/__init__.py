"""The documentation site's own code: what `make docs` generates and how MkDocs reads it.

* `schema_text`: a dataclass schema's fields as rows (type, default, the comment beside it);
* `reference`: the reference pages (config keys, components, commands), made from the code;
* `readme_tables`: the READMEs' tables of encoders, decoders, scores and regions, from the
  registry (their `<!-- generated: components -->` region);
* `outputs`: the `<!-- output: NAME -->` regions of a page, filled from its runnable blocks;
* `pictures`: the pictures of docs/images, redrawn from trained runs by the current code
  (`python -m tools.site.pictures`), with a record of what each was drawn from;
* `includes`: the repository's top-level result files inside the results pages (the MkDocs
  hook `tools/site/mkdocs_hooks.py` calls it);
* `translations`: which pages have a Chinese version; the hook marks the others in the
  Chinese menu and names the lab's pages there;
* `python -m tools.site`: regenerate all of it (`make docs`).

The runner of the pages' command blocks is `tools.site.doc_blocks`.
"""
