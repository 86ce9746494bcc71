"""More attacks of round 3 (issue 46), beyond the ones each class started with: the
service's limits at their extremes and the requests a hostile client can shape (two `Host`
headers, an absolute request target, a UTF-16 body, a chunked body that never ends), the
search's length options, `--host` values that are not names, and more.

Traffic goes to 127.0.0.1 only, bounded in count, every socket with a timeout.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from serve_fixtures import (
    HOST,
    CountingEngine,
    closed_within,
    exchange,
    read_answer,
    server_in_thread,
    toy_checkpoint,
    translate_body,
)

from seq2seq.config.search_settings import SearchSettings, SearchSettingsError

READ_TIMEOUT_S = 1.0


def run_command(program: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`program` (a console script's module) run with `args` in a subprocess."""
    return subprocess.run([sys.executable, "-m", program, *args], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def one_error_line(result: subprocess.CompletedProcess, program: str) -> str:
    """The one stderr line of a refused command (exit 2, no traceback)."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith(program), result.stderr
    return lines[0]


# ---------------------------------------------------------------- command-line values


SERVE_LIMITS = [
    ("--max-batch", "1000000000000000000"), ("--max-queue", "1000000000000000000"),
    ("--max-sentences", "1000000000000000000"), ("--max-chars", "1000000000000000000"),
    ("--max-beam", "1000000000000000000"), ("--max-beam", "2000"),
    ("--max-len-b", "1000000000000"), ("--max-len-a", "1e300"),
]  # fmt: skip


@pytest.mark.attack("cli")
@pytest.mark.parametrize(("option", "value"), SERVE_LIMITS)
def test_serve_limits_past_any_sane_size_are_refused(tmp_path, option, value):
    """A limit is a promise about memory: 10^18 sentences per batch or characters per request
    is refused before the checkpoint is looked at (it does not exist here)."""
    from seq2seq.cli.serve import main

    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path / "missing.pt"), option, value])
    assert stopped.value.code == 2


@pytest.mark.attack("cli")
def test_serve_limits_whose_product_is_too_large_are_refused(tmp_path, capsys):
    from seq2seq.cli.serve import main

    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path / "missing.pt"), "--max-sentences", "10000", "--max-chars", "100000"])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--max-sentences" in line and "--max-chars" in line


@pytest.mark.attack("cli")
@pytest.mark.parametrize("host", ["garbage..x", "a" * 70 + ".example", ".", "x" * 300])
def test_serve_host_that_is_no_name_is_one_line(tmp_path, host):
    """`--host garbage..x` made the IDNA codec raise inside getaddrinfo: a traceback."""
    result = run_command("seq2seq.cli.serve", str(tmp_path / "missing.pt"), "--host", host)
    line = one_error_line(result, "seq2seq-serve")
    assert "--host" in line


@pytest.mark.attack("cli")
@pytest.mark.parametrize(
    "settings",
    [{"max_len_b": 10**12}, {"max_len_b": 100_001}, {"max_len_a": 1e300}, {"max_len_a": 1001.0}],
)
def test_search_lengths_past_any_output_are_refused(settings):
    """An RNN decoder has no position table to cap a·len + b: b = 10^12 runs until EOS, and
    a = 1e300 overflows into a negative length."""
    with pytest.raises(SearchSettingsError) as refused:
        SearchSettings(**settings)
    assert refused.value.field in settings


@pytest.mark.attack("cli")
@pytest.mark.parametrize("program", ["seq2seq.cli.translate", "seq2seq.cli.evaluate"])
def test_translate_and_evaluate_refuse_an_endless_output_length(tmp_path, program):
    result = run_command(program, str(tmp_path / "missing.pt"), "--max-len-b", "1000000000000")
    assert "--max-len-b" in one_error_line(result, program.replace("seq2seq.cli.", "seq2seq-"))


# ---------------------------------------------------------------- the service


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
    pytest.importorskip("uvicorn", reason="uvicorn is not installed (pip install '.[serve]')")
    from seq2seq.search.translator import Translator
    from seq2seq.serve.backends import TorchEngine

    checkpoint = toy_checkpoint(tmp_path_factory.mktemp("serve_more"))
    return TorchEngine(Translator.load(checkpoint), checkpoint)


def served(engine, **limits):
    """The real server in a thread (`server_in_thread`), serving `engine` on loopback names."""
    from seq2seq.serve.app import create_app
    from seq2seq.serve.hosts import LOOPBACK_NAMES
    from seq2seq.serve.limits import Limits

    limits = Limits(**{"read_timeout_s": READ_TIMEOUT_S, **limits})
    return server_in_thread(create_app(engine, limits, None, LOOPBACK_NAMES), limits)


def raw(head: list[str], body: bytes = b"") -> bytes:
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


TWO_HOSTS = [("evil.example", HOST), (HOST, "evil.example"), (HOST, HOST)]


@pytest.mark.attack("serve")
@pytest.mark.parametrize(("first", "second"), TWO_HOSTS)
def test_two_host_headers_are_a_400(engine, first, second):
    """RFC 9112 3.2: a request with more than one Host is a 400, whichever one is foreign
    (h11 refuses it before the application; the Host check would too, for another protocol)."""
    counting = CountingEngine(engine)
    body = translate_body(["a"])
    with served(counting) as port:
        head = ["POST /translate HTTP/1.1", f"Host: {first}", f"Host: {second}",
                "Content-Type: application/json", f"Content-Length: {len(body)}"]  # fmt: skip
        answer = exchange(port, raw(head, body))
    assert answer.status == 400 and counting.calls == 0


@pytest.mark.attack("serve")
def test_the_host_check_refuses_two_host_headers_itself():
    """The middleware alone, as another HTTP protocol implementation would call it."""
    from seq2seq.serve.app import HostCheck

    check = HostCheck(None, ["127.0.0.1"])
    scope = {"type": "http", "path": "/", "headers": [(b"host", b"evil"), (b"host", b"127.0.0.1")]}
    assert "2 Host headers" in check.host_problem(scope)
    assert check.host_problem({**scope, "headers": scope["headers"][1:]}) is None


@pytest.mark.attack("serve")
@pytest.mark.parametrize("target", ["http://evil.example/translate", "http://evil.example/"])
def test_an_absolute_target_naming_another_host_is_a_400(engine, target):
    """RFC 9112 3.2.2: an absolute-form target's authority replaces Host; one naming a host
    the service does not answer to is refused like a foreign Host."""
    counting = CountingEngine(engine)
    body = translate_body(["a"])
    with served(counting) as port:
        head = [f"POST {target} HTTP/1.1", f"Host: {HOST}", "Content-Type: application/json",
                f"Content-Length: {len(body)}"]  # fmt: skip
        answer = exchange(port, raw(head, body))
    assert answer.status == 400 and counting.calls == 0


@pytest.mark.attack("serve")
def test_an_absolute_target_naming_itself_is_answered(engine):
    body = translate_body(["a"])
    with served(engine) as port:
        head = [f"POST http://{HOST}:{port}/translate HTTP/1.1", f"Host: {HOST}",
                "Content-Type: application/json", f"Content-Length: {len(body)}"]  # fmt: skip
        answer = exchange(port, raw(head, body))
    assert answer.status == 200, answer.body


@pytest.mark.attack("serve")
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_json_body_in_utf16_is_a_400_not_a_500(engine, encoding):
    counting = CountingEngine(engine)
    body = translate_body(["a"]).decode("utf-8").encode(encoding)
    with served(counting) as port:
        head = ["POST /translate HTTP/1.1", f"Host: {HOST}", "Content-Type: application/json",
                f"Content-Length: {len(body)}"]  # fmt: skip
        answer = exchange(port, raw(head, body))
    assert answer.status in (400, 415) and counting.calls == 0
    (message,) = answer.json().values()
    assert "\n" not in message


@pytest.mark.attack("serve")
@pytest.mark.parametrize(
    "content_type",
    ["application/json ; charset=utf-8", "APPLICATION/JSON", 'application/json;charset="UTF-8"'],
)
def test_json_types_written_oddly_are_read(engine, content_type):
    body = translate_body(["a"])
    with served(engine) as port:
        head = ["POST /translate HTTP/1.1", f"Host: {HOST}", f"Content-Type: {content_type}",
                f"Content-Length: {len(body)}"]  # fmt: skip
        assert exchange(port, raw(head, body)).status == 200


@pytest.mark.attack("serve")
def test_a_utf16_charset_is_a_415(engine):
    counting = CountingEngine(engine)
    body = translate_body(["a"]).decode("utf-8").encode("utf-16")
    with served(counting) as port:
        head = ["POST /translate HTTP/1.1", f"Host: {HOST}",
                "Content-Type: application/json; charset=utf-16", f"Content-Length: {len(body)}"]  # fmt: skip
        answer = exchange(port, raw(head, body))
    assert answer.status == 415 and counting.calls == 0


@pytest.mark.attack("serve")
def test_a_chunked_body_that_never_ends_is_a_408(engine):
    counting = CountingEngine(engine)
    with served(counting) as port, socket.create_connection((HOST, port), timeout=10) as link:
        head = ["POST /translate HTTP/1.1", f"Host: {HOST}", "Content-Type: application/json",
                "Transfer-Encoding: chunked"]  # fmt: skip
        link.sendall(raw(head, b'5\r\n{"sen\r\n'))
        answer = read_answer(link)
        assert answer.status == 408
        assert closed_within(link, 3) is not None
    assert counting.calls == 0


@pytest.mark.attack("serve")
def test_many_connections_sending_one_byte_are_each_closed(engine):
    """40 connections each send one byte of a request line and nothing more: each closes
    within the read deadline, and a real request is answered meanwhile."""
    with served(engine) as port:
        links = [socket.create_connection((HOST, port), timeout=10) for _ in range(40)]
        try:
            for link in links:
                link.sendall(b"P")
            body = translate_body(["a"])
            head = ["POST /translate HTTP/1.1", f"Host: {HOST}",
                    "Content-Type: application/json", f"Content-Length: {len(body)}"]  # fmt: skip
            assert exchange(port, raw(head, body)).status == 200
            assert all(closed_within(link, 3) is not None for link in links)
        finally:
            for link in links:
                link.close()


@pytest.mark.attack("serve")
def test_requests_pipelined_after_a_refusal_are_not_served(engine):
    """A refused request closes the connection: a request pipelined behind it is not read."""
    counting = CountingEngine(engine)
    body = translate_body(["a"])
    good = ["POST /translate HTTP/1.1", f"Host: {HOST}", "Content-Type: application/json",
            f"Content-Length: {len(body)}"]  # fmt: skip
    foreign = ["POST /translate HTTP/1.1", "Host: evil.example", "Content-Type: application/json",
               f"Content-Length: {len(body)}"]  # fmt: skip
    with served(counting) as port, socket.create_connection((HOST, port), timeout=10) as link:
        link.sendall(raw(foreign, body) + raw(good, body))
        assert read_answer(link).status == 400
        assert closed_within(link, 3) is not None
    assert counting.calls == 0


# ---------------------------------------------------------------- encodings of config folders


DOT_PRESET = "defaults:\n  - base_attention\n  - score: dot\n  - region: soft\n  - _self_\n"


def config_folder(root, name: str, data: bytes):
    """A user's config folder holding one attention preset `name` of bytes `data`."""
    (root / "attention").mkdir(parents=True)
    (root / "attention" / f"{name}.yaml").write_bytes(data)
    return root


HYDRA_PROGRAMS = {"seq2seq.cli.train": "seq2seq-train", "seq2seq.cli.compare": "seq2seq-compare",
                  "seq2seq.cli.data": "seq2seq-data"}  # fmt: skip


@pytest.mark.attack("encoding")
@pytest.mark.parametrize("module", HYDRA_PROGRAMS)
@pytest.mark.parametrize("form", ["--config-dir", "-cd", "--config-dir="])
def test_a_utf16_preset_in_a_config_folder_is_one_line(tmp_path, module, form):
    """Hydra opened the preset as UTF-8: a UnicodeDecodeError traceback (exit 1)."""
    folder = config_folder(tmp_path / "cfg", "dot16", DOT_PRESET.encode("utf-16"))
    where = [form + str(folder)] if form.endswith("=") else [form, str(folder)]
    result = run_command(module, *where, "attention=dot16", f"hydra.run.dir={tmp_path / 'run'}")
    line = one_error_line(result, HYDRA_PROGRAMS[module])
    assert "UTF-16" in line and "dot16.yaml" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.attack("structured")
def test_an_alias_bomb_in_a_train_config_folder_is_one_line(tmp_path):
    """Hydra's loader expands aliases: the preset is read within bounds first."""
    bomb = "a: &a [x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join(['*' + chr(97 + n)] * 8)}]\n" for n in range(8)
    )
    folder = config_folder(tmp_path / "cfg", "bomb", bomb.encode())
    result = run_command("seq2seq.cli.train", "--config-dir", str(folder), "attention=bomb",
                         f"hydra.run.dir={tmp_path / 'run'}")  # fmt: skip
    assert "alias" in one_error_line(result, "seq2seq-train")


@pytest.mark.attack("encoding")
def test_config_folders_with_a_utf8_mark_are_read(tmp_path):
    """A preset saved with a UTF-8 byte-order mark (Notepad's "UTF-8 with BOM") passes the
    check: it is UTF-8."""
    from seq2seq.cli.hydra_places import check_config_folders

    folder = config_folder(tmp_path / "cfg", "dot", b"\xef\xbb\xbf" + DOT_PRESET.encode())
    check_config_folders(["--config-dir", str(folder), "-cd"], "seq2seq-train")
    check_config_folders([f"--config-dir={tmp_path / 'missing'}", "-cp", "pkg://x"], "x")


# ---------------------------------------------------------------- error paths


def earlier_output(folder):
    """A finished output folder of the command `test` holding `a.txt` = b"old"."""
    from seq2seq.output_folders import claim_output_folder

    with claim_output_folder(folder, command="test").writing() as new:
        (new / "a.txt").write_bytes(b"old")


@pytest.mark.attack("error_path")
def test_ctrl_c_right_after_the_swap_rename_stays_a_ctrl_c(tmp_path, monkeypatch):
    """Ctrl-C arriving just after the new folder was renamed in: the roll-back found the
    target taken and raised OSError (ENOTEMPTY) in place of the KeyboardInterrupt, and said
    "cannot be written" about an output that was complete."""
    import seq2seq.output_folders as output_folders

    out = tmp_path / "out"
    earlier_output(out)
    real_rename = output_folders.os.rename

    def rename_then_interrupt(source, target):
        real_rename(source, target)
        if str(source).endswith(".new"):
            raise KeyboardInterrupt

    monkeypatch.setattr(output_folders.os, "rename", rename_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        with output_folders.claim_output_folder(out, command="test", force=True).writing() as new:
            (new / "a.txt").write_bytes(b"new")
    assert (out / "a.txt").read_bytes() == b"new"  # a whole output, the new one


@pytest.mark.attack("error_path")
def test_a_failed_swap_whose_roll_back_fails_reports_the_first_error(tmp_path, monkeypatch):
    """The rename in fails (EIO) and so does the rename back: the one line names the first
    failure, and the earlier output is kept aside, not removed."""
    import errno

    import seq2seq.output_folders as output_folders

    out = tmp_path / "out"
    earlier_output(out)
    real_rename = output_folders.os.rename
    calls = []

    def failing_rename(source, target):
        calls.append(source)
        if len(calls) >= 2:
            raise OSError(errno.EIO, "Input/output error", str(source))
        real_rename(source, target)

    monkeypatch.setattr(output_folders.os, "rename", failing_rename)
    with pytest.raises(output_folders.OutputPlaceError) as refused:
        with output_folders.claim_output_folder(out, command="test", force=True).writing() as new:
            (new / "a.txt").write_bytes(b"new")
    assert str(refused.value).startswith(str(calls[1]))  # the rename in, not the roll-back
    (aside,) = [p for p in tmp_path.iterdir() if p.name.endswith(".old")]
    assert (aside / "a.txt").read_bytes() == b"old"


# ---------------------------------------------------------------- the environment


RANK_ENVIRONMENTS = [
    {"RANK": "banana"}, {"WORLD_SIZE": "0"}, {"WORLD_SIZE": "100000"}, {"RANK": "3"},
    {"RANK": "-1"}, {"LOCAL_RANK": "1e3"}, {"LOCAL_RANK": "-1"},
    {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"},  # no MASTER_ADDR / MASTER_PORT
]  # fmt: skip


@pytest.mark.attack("cli")
@pytest.mark.parametrize("environment", RANK_ENVIRONMENTS, ids=lambda e: " ".join(e.values()))
def test_rank_variables_that_cannot_be_are_one_line(environment):
    """`RANK=banana seq2seq-train`: a ValueError traceback from int(); WORLD_SIZE=2 without
    torchrun: a traceback from the rendezvous."""
    from seq2seq.training.distributed import RankEnvironmentError, from_environment

    with pytest.raises(RankEnvironmentError) as refused:
        from_environment(environment)
    assert "\n" not in str(refused.value)


@pytest.mark.attack("cli")
def test_the_rank_variables_torchrun_sets_are_read():
    from seq2seq.training.distributed import from_environment

    ranks = from_environment({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1",
                              "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})  # fmt: skip
    assert (ranks.rank, ranks.local_rank, ranks.world_size) == (1, 1, 2)
    assert from_environment({}).world_size == 1


@pytest.mark.attack("cli")
def test_seq2seq_train_with_a_bad_rank_variable_is_one_line(tmp_path, monkeypatch):
    from helpers import TINY_TOY, compose_config

    from seq2seq.config.build import ConfigError
    from seq2seq.runs.assemble import train_and_test

    monkeypatch.setenv("RANK", "banana")
    with pytest.raises(ConfigError, match="RANK"):
        train_and_test(compose_config(TINY_TOY + [f"data.root={tmp_path}"]), tmp_path / "run")
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- encodings of plugins


@pytest.mark.attack("encoding")
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
@pytest.mark.parametrize("shape", ["file", "package", "link"])
def test_a_plugin_saved_as_utf16_names_its_encoding(tmp_path, encoding, shape):
    """A plugin saved by Notepad as "Unicode": `SyntaxError: source code string cannot
    contain null bytes (<frozen importlib._bootstrap> line 241)`, naming neither the file
    nor the encoding."""
    from seq2seq.plugins import PluginError, import_plugins

    source = "VALUE = 1\n".encode(encoding)
    name = f"enc_{shape}_{encoding.replace('-', '_')}"
    if shape == "package":
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "part.py").write_bytes(source)
        (tmp_path / name / "__init__.py").write_text("from . import part\n")
        spec, bad = f"./{name}", "part.py"
    else:
        (tmp_path / f"{name}_real.py").write_bytes(source)
        bad = f"{name}_real.py"
        if shape == "link":
            (tmp_path / f"{name}.py").symlink_to(f"{name}_real.py")
        else:
            (tmp_path / f"{name}.py").write_bytes(source)
            bad = f"{name}.py"
        spec = f"./{name}.py"
    with pytest.raises(PluginError) as refused:
        import_plugins([spec], base=tmp_path)
    message = str(refused.value)
    assert "UTF-" in message and bad in message and "iconv" in message and "\n" not in message
    assert not any(key.startswith(name) for key in sys.modules)


@pytest.mark.attack("encoding")
def test_compare_config_dir_with_a_utf16_preset_is_one_line_before_training(tmp_path):
    """`seq2seq-compare config_dir=DIR`: each training it started met the preset."""
    folder = config_folder(tmp_path / "cfg", "dot16", DOT_PRESET.encode("utf-16"))
    result = run_command("seq2seq.cli.compare", f"config_dir={folder}", f"dir={tmp_path / 'sw'}")
    assert "UTF-16" in one_error_line(result, "seq2seq-compare")
    assert not (tmp_path / "sw").exists()


# ---------------------------------------------------------------- Hydra's own errors


HYDRA_OVERRIDES = [
    ("seq2seq.cli.train", "trainer.threads=abc"), ("seq2seq.cli.train", "trainer.nosuch=1"),
    ("seq2seq.cli.train", "attention=nosuch"), ("seq2seq.cli.compare", "threads=abc"),
    ("seq2seq.cli.data", "data=nosuch"), ("seq2seq.cli.data", "data.root=[1"),
]  # fmt: skip


@pytest.mark.attack("cli")
@pytest.mark.parametrize(("module", "override"), HYDRA_OVERRIDES)
def test_an_override_hydra_refuses_is_one_line_exit_2(tmp_path, module, override):
    """Hydra reported these in five to eight lines ("full_key: ... reference_type=...",
    "Set the environment variable HYDRA_FULL_ERROR=1 ...") with exit code 1."""
    result = run_command(module, override, f"hydra.run.dir={tmp_path / 'run'}")
    line = one_error_line(result, HYDRA_PROGRAMS[module])
    key, _, value = override.partition("=")
    assert "HYDRA_FULL_ERROR" not in line and (key in line or value in line)
    assert not (tmp_path / "run").exists()


@pytest.mark.attack("cli")
def test_a_user_who_asks_for_hydras_traceback_gets_it(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.data", "data=nosuch", f"hydra.run.dir={tmp_path}/r"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" in result.stderr


# ---------------------------------------------------------------- walks


@pytest.mark.attack("walk")
def test_resume_last_over_outputs_with_link_loops_ends(tmp_path):
    """`trainer.resume=last` globs `outputs/**`: links to `/`, to a parent and to itself
    inside the outputs folder are not followed; the one real last.pt is found, in time."""
    import threading

    from seq2seq.runs.folder import resolve_resume

    outputs = tmp_path / "outputs"
    (outputs / "day" / "run" / "checkpoints").mkdir(parents=True)
    (outputs / "day" / "run" / "checkpoints" / "last.pt").write_bytes(b"x")
    (outputs / "day" / "run" / "up").symlink_to("..")
    (outputs / "day" / "root").symlink_to("/")
    (outputs / "self").symlink_to("self")
    found = []
    walker = threading.Thread(
        target=lambda: found.append(resolve_resume("last", tmp_path / "new", outputs)),
        daemon=True,
    )
    walker.start()
    walker.join(10)
    assert found == [outputs / "day" / "run" / "checkpoints" / "last.pt"]


@pytest.mark.attack("cli")
def test_the_one_line_hydra_errors_leave_the_environment_as_it_was(monkeypatch, capsys):
    from hydra.errors import ConfigCompositionException

    from seq2seq.cli.hydra_places import run_hydra_app

    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)

    def composition_fails():
        raise ConfigCompositionException("Could not find 'attention/x'\nAvailable: a b")

    with pytest.raises(SystemExit) as stopped:
        run_hydra_app(composition_fails, "seq2seq-train")
    assert stopped.value.code == 2 and "HYDRA_FULL_ERROR" not in os.environ
    (line,) = capsys.readouterr().err.splitlines()
    assert line == "seq2seq-train: Could not find 'attention/x' Available: a b"
