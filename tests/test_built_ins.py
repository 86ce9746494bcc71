"""The list of built-in components (`seq2seq.built_ins`): it names every module that
registers one, the registry is empty and closed until it is imported, the bottom of the
package loads no pictures, and the entry points import it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_layers import LINT_IMPORTS, copy_of_the_package, lint_imports

from seq2seq import built_ins, registry

PACKAGE = Path(__file__).resolve().parent.parent / "seq2seq"


def registered_in_source(path: Path) -> list[tuple[str, str, str]]:
    """The (group, name, class) each `@registry.register("group", "name")` decorator, each
    `registry.register("group", "name")(Class)` call and each `@validation_metric("name",
    ...)` decorator (the "metric" group) of a module registers."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            found += [
                (node.lineno, group, name, node.name)
                for group, name in map(registration, node.decorator_list)
                if group
            ]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Call):
            group, name = registration(node.func)
            if group and node.args and isinstance(node.args[0], ast.Name):
                found.append((node.lineno, group, name, node.args[0].id))
    return [registered for _, *registered in sorted(found)]


def registration(call: ast.expr) -> tuple[str | None, str | None]:
    """The group and name a `register(...)` or `validation_metric(...)` call registers."""
    if not isinstance(call, ast.Call):
        return None, None
    called = (
        call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    )
    texts = [
        arg.value
        for arg in call.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    ]
    if called == "register" and len(texts) == 2:
        return texts[0], texts[1]
    if called == "validation_metric" and texts:
        return "metric", texts[0]
    return None, None


def scanned_modules() -> dict[str, list[tuple[str, str, str]]]:
    """Every module of the package that registers a component, by dotted name: what it
    registers, in the order of its source."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        registered = registered_in_source(path)
        if registered:
            found[".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)] = registered
    return found


def test_the_list_names_every_module_that_registers_a_component():
    listed = [module.__name__ for group in built_ins.BUILT_IN_MODULES.values() for module in group]
    assert sorted(listed) == sorted(scanned_modules())
    assert set(built_ins.BUILT_IN_MODULES) == set(registry.GROUPS)


@pytest.mark.parametrize("group", registry.GROUPS)
def test_each_group_holds_exactly_the_classes_its_modules_register(group):
    """In the order of the list and, within a module, of its source (the order names are
    offered in messages and the reference); none is a plugin's."""
    scanned = scanned_modules()
    expected = [
        (name, f"{module.__name__}.{cls}")
        for module in built_ins.BUILT_IN_MODULES[group]
        for found_group, name, cls in scanned[module.__name__]
        if found_group == group
    ]
    components = registry.components(group)
    assert [
        (c.name, f"{c.builder.__module__}.{c.builder.__name__}") for c in components
    ] == expected
    assert all(component.plugin is None for component in components)


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_bottom_of_the_package_loads_no_pictures_and_answers_no_lookup():
    """Importing the registry and the data package (the toy source too) imports nothing of
    `seq2seq.visualise`; a lookup then is one line saying what to import."""
    code = """
import sys
import seq2seq.registry, seq2seq.data, seq2seq.data.sources.toy
from seq2seq import registry
loaded = sorted(name for name in sys.modules if name.startswith("seq2seq.visualise"))
assert not loaded, loaded
for lookup in (lambda: registry.get("source", "toy"), lambda: registry.names("score")):
    try:
        lookup()
    except registry.BuiltInsNotLoaded as error:
        print(error)
    else:
        raise AssertionError("a lookup answered before seq2seq.built_ins was imported")
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all("import seq2seq.built_ins first" in line for line in lines)


@pytest.mark.parametrize(
    "entry",
    [
        "seq2seq.built_ins",
        "seq2seq.cli.translate",  # every command: seq2seq.cli imports the list
        "seq2seq.cli.lab",  # seq2seq-lab and python -m seq2seq.lab
        "seq2seq.testing",  # check_component
        "seq2seq.testing.pytest_plugin",
        "tools",  # the workshop
    ],
)
def test_each_entry_point_registers_the_built_ins_before_a_lookup(entry):
    """In a fresh process, importing the entry point alone registers every built-in."""
    code = (
        f"import json, {entry}\nfrom seq2seq import registry\n"
        "print(json.dumps({group: registry.names(group) for group in registry.GROUPS}))"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    names = json.loads(done.stdout)
    assert names == {group: list(registry.names(group)) for group in registry.GROUPS}


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed")
def test_the_registry_importing_the_list_breaks_the_contract(tmp_path):
    package = copy_of_the_package(tmp_path)
    path = package / "seq2seq" / "registry.py"
    path.write_text(path.read_text(encoding="utf-8") + "\nimport seq2seq.built_ins\n")
    checked = lint_imports(package)
    assert checked.returncode != 0 and "broken" in checked.stdout.lower(), checked.stdout[-2000:]
