"""The contract suite as pytest tests; a plugin you opt into, never loaded by itself.

Load it with `pytest -p seq2seq.testing.pytest_plugin`, or with
`pytest_plugins = ["seq2seq.testing.pytest_plugin"]` in your tests' top `conftest.py` (or in
a test module). Then every test that takes the argument `contract_case` runs once per check
of every registered component (`seq2seq.testing.contract_cases`, ids like
`score-my_score-masking`), and the fixture `contract_runner` runs one:

    def test_contract(contract_case, contract_runner):
        contract_runner.require(contract_case)      # ContractFailure names check and component

Options (`pytest --help`, section "seq2seq contracts"):

* `--contract GROUP:NAME` (repeatable): only these components, e.g. `score:my_score`;
* `--contract-plugins SPEC` (repeatable): import these plugins first (`seq2seq.plugins`;
  your conftest may also just import your module);
* `--contract-config-dir DIR`: your presets (`DIR/attention/my_score.yaml`, ...);
* `--contract-quick`: leave out the learning check.

One `Runner` serves the whole session, so each preset is composed once.
"""

from __future__ import annotations

import pytest

from seq2seq.testing.suite import ContractCase, Runner, contract_cases


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("seq2seq contracts", "the seq2seq contract suite (seq2seq.testing)")
    group.addoption("--contract", action="append", default=[], metavar="GROUP:NAME",
                    help="check only this component (repeatable), e.g. score:my_score")  # fmt: skip
    group.addoption("--contract-plugins", action="append", default=[], metavar="SPEC",
                    help="import these plugins (seq2seq.plugins) before collecting")  # fmt: skip
    group.addoption("--contract-config-dir", default=None, metavar="DIR",
                    help="a config folder with the components' presets")  # fmt: skip
    group.addoption("--contract-quick", action="store_true",
                    help="leave out the learning check")  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    specs = config.getoption("contract_plugins")
    if specs:
        from seq2seq.plugins import import_plugins

        import_plugins(specs)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "contract_case" in metafunc.fixturenames:
        cases = selected_cases(metafunc.config)
        metafunc.parametrize("contract_case", cases, ids=[str(case) for case in cases])


def selected_cases(config: pytest.Config) -> list[ContractCase]:
    """The cases of the components `--contract` names (all registered ones by default)."""
    cases = contract_cases(quick=config.getoption("contract_quick"))
    wanted = [parse_component(text) for text in config.getoption("contract")]
    if not wanted:
        return cases
    known = {(case.group, case.name) for case in cases}
    unknown = [f"{group}:{name}" for group, name in wanted if (group, name) not in known]
    if unknown:
        raise pytest.UsageError(f"--contract: no registered component {', '.join(unknown)}")
    return [case for case in cases if (case.group, case.name) in wanted]


def parse_component(text: str) -> tuple[str, str]:
    group, colon, name = text.partition(":")
    if not colon or not group or not name:
        raise pytest.UsageError(f"--contract takes GROUP:NAME (score:my_score), got {text!r}")
    return group, name


@pytest.fixture(scope="session")
def contract_runner(pytestconfig: pytest.Config) -> Runner:
    """The session's `Runner`, with the presets of `--contract-config-dir`."""
    return Runner(pytestconfig.getoption("contract_config_dir"))
