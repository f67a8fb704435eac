"""The command line maps flags onto the configuration's settings: ``--log-level`` before or after
the command is ``logging.level`` (one setting, flag > environment > file), ``--help`` says what
each command does and each option's default, and ``sim --crd`` reads the configuration's
grammar of a custom resource."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cacheproxy.cli import build_parser, main
from cacheproxy.cli.configured import overrides
from cacheproxy.daemon.config import load_config
from cacheproxy.kube.resources import ResourceType
from cacheproxy.sim import SimServer


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--log-level", "debug"],
        ["--log-level", "debug", "serve"],
        ["check-config", "--set", "logging.level=info", "--log-level", "debug"],
    ],
)
def test_log_level_before_or_after_the_command_is_the_logging_level_setting(
    argv: list[str],
) -> None:
    assert overrides(build_parser().parse_args(argv))["logging.level"] == "debug"


def test_without_the_flag_the_file_or_environment_decides(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("resources: [pods]\nlogging: {level: error}\n")
    flags = overrides(build_parser().parse_args(["serve"]))
    assert "logging.level" not in flags
    assert load_config(path, env={}, overrides=flags).logging.level == "error"
    env = {"CACHEPROXY_LOGGING_LEVEL": "warning"}
    assert load_config(path, env=env, overrides=flags).logging.level == "warning"
    flags = overrides(build_parser().parse_args(["serve", "--log-level", "debug"]))
    assert load_config(path, env=env, overrides=flags).logging.level == "debug"


def test_check_config_help_describes_it_and_shows_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check-config", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Validate the configuration" in text
    assert "--port PORT same as --set server.port=… (default: 8080)" in text
    assert "--address ADDRESS same as --set server.address=… (default: 127.0.0.1)" in text


def test_sim_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sim", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--history HISTORY events kept for watch resume before compaction (default: 10000)" in text
    )


def test_completion_prints_a_script_bash_loads_that_completes_the_commands(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "cacheproxy.bash"
    script.write_text(capsys.readouterr().out)
    # Loaded into bash, the function it registers offers the subcommands after "cacheproxy ".
    probe = (
        f"source {script}; COMP_WORDS=(cacheproxy che); COMP_CWORD=1; "
        'COMP_LINE="cacheproxy che"; COMP_POINT=${#COMP_LINE}; '
        '$(complete -p cacheproxy | sed -E "s/.*-F ([^ ]+) .*/\\1/") cacheproxy che cacheproxy; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["check-config"]
    assert main(["completion", "zsh"]) == 0
    assert capsys.readouterr().out.startswith("#compdef cacheproxy")


def test_the_completion_help_keeps_its_examples_as_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["completion", "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert "  source <(cacheproxy completion bash)                 # this bash session" in lines


@pytest.mark.parametrize(
    ("text", "namespaced"),
    [
        ("example.com/v1/widgets:Widget", True),
        ("example.com/v1/widgets:Widget:namespaced", True),
        ("example.com/v1/widgets:Widget:cluster", False),
    ],
)
def test_sim_crd_takes_the_configurations_grammar(text: str, namespaced: bool) -> None:
    args = build_parser().parse_args(["sim", "--crd", text])
    assert args.crd == [
        ResourceType("example.com", "v1", "widgets", "Widget", namespaced=namespaced)
    ]
    config = load_config(None, env={}, overrides={"resources": text})
    assert [r.rtype for r in config.resources] == args.crd


def test_sim_crd_refuses_what_the_configuration_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sim", "--crd", "Example.com/v1/widgets:widget"])
    err = capsys.readouterr().err
    assert "group 'Example.com' is not a DNS subdomain" in err
    assert "expected a CamelCase kind like Widget, got 'widget'" in err


async def _serve_logs(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, until: str
) -> str:
    """stderr of ``cacheproxy serve`` (an unreachable upstream) until it printed a line with
    ``until`` (or a guard passed), and what it printed as it stopped on SIGTERM."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        f"resources: [pods]\nupstream: {{kubeconfig: {kubeconfig}, inCluster: false}}\n"
        "server: {port: 0}\nlogging: {level: error}\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CACHEPROXY_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cacheproxy", *args, "--config", str(config),
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
        env={**clean, **(env or {})},
    )  # fmt: skip
    assert proc.stderr is not None
    seen: list[bytes] = []

    async def read_until() -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            seen.append(line)
            if until.encode() in line:
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read_until(), 60)  # a guard: the verdict is the lines'
    proc.send_signal(signal.SIGTERM)
    seen.append(await asyncio.wait_for(proc.stderr.read(), 20))
    await asyncio.wait_for(proc.wait(), 20)
    return b"".join(seen).decode()


async def test_serve_logs_at_the_level_given_after_the_command(tmp_path: Path) -> None:
    # The file says error, the environment warning: the flag after the command wins.
    env = {"CACHEPROXY_LOGGING_LEVEL": "warning"}
    err = await _serve_logs(
        tmp_path, "serve", "--log-level", "info", env=env, until="INFO cacheproxy.daemon: serving"
    )
    assert " INFO cacheproxy.daemon: serving pods on http://127.0.0.1:" in err, err
    # Without the flag, the environment's warning: no INFO line, the upstream's WARNING.
    err = await _serve_logs(tmp_path, "serve", env=env, until=" WARNING ")
    assert " INFO " not in err, err
    assert " WARNING " in err, err


@pytest.mark.parametrize(
    ("index", "code", "said"),
    [
        (
            "spec.nodName",
            1,
            "no cached object has a value at the index path spec.nodName, so "
            "every query on it answers nothing; did you mean spec.nodeName?",
        ),
        ("spec.nodeName", 0, "OK: "),
    ],
)
async def test_check_config_live_asks_upstream_whether_the_index_paths_exist(
    demo_server: SimServer, tmp_path: Path, index: str, code: int, said: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: "
        f"'{demo_server.url}'}}}}]\nusers: [{{name: u, user: {{}}}}]\ncontexts: [{{name: x, "
        "context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    config = tmp_path / "config.yaml"
    config.write_text(
        f"resources:\n  - resource: pods\n    indexes: [{index}]\n"
        f"upstream: {{kubeconfig: '{kubeconfig}'}}\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cacheproxy",
        "check-config",
        "--config",
        str(config),
        "--live",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == code, (out, err)
    assert said in (out + err).decode()


def test_every_command_shows_examples_and_each_parses() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(commands) == {"serve", "check-config", "rbac", "demo", "sim", "completion"}
    for name, command in commands.items():
        # Each example's command line, up to a comment, pipe or redirection, after any
        # environment variables set for it ("source <(…)" wraps one: its inside).
        examples = [
            shlex.split(line.split("#", 1)[0].replace("<(", " ").replace(")", " "))
            for line in (command.epilog or "").splitlines()
            if line.startswith("  ")
        ]
        assert examples, f"{name} --help shows no examples"
        for words in examples:
            words = words[words.index("cacheproxy") :]
            for end in ("|", ">"):
                words = words[: words.index(end)] if end in words else words
            parser.parse_args(words[1:])  # exits (a failed test) when it does not parse
