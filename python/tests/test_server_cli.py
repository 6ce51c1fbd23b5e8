"""Flags, environment variables and the argparse integration of ``densewire serve``."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time

import httpx
import pytest

from densewire._server.cli import add_serve_arguments, add_serve_command, config_from_args
from densewire._server.config import (SETTINGS, ServerConfig, config_from_env, config_to_env, cores, env_name,
                                     model_threads_for, validate)
from server_support import ServerProcess, free_port


def parse(argv: list[str], env: dict[str, str] | None = None) -> ServerConfig:
    p = argparse.ArgumentParser()
    add_serve_arguments(p)
    return config_from_args(p.parse_args(argv), env or {})


def test_defaults() -> None:
    cfg = parse([])
    assert (cfg.host, cfg.port, cfg.model, cfg.workers) == ("127.0.0.1", 8000, "minilm", 1)
    assert cfg.max_client_batch_size == 2048 and cfg.cache_bytes == 256 << 20
    assert cfg.redis_url is None and cfg.api_key is None


def test_env_then_flags() -> None:
    env = {"DENSEWIRE_PORT": "9001", "DENSEWIRE_MODEL": "hash:8", "DENSEWIRE_CACHE_BYTES": "1G",
           "DENSEWIRE_ACCESS_LOG": "true", "DENSEWIRE_REDIS_URL": "redis://r:6379/1",
           "DENSEWIRE_BACKEND_OPTIONS": '{"max_tokens": 16}'}
    cfg = parse([], env)
    assert (cfg.port, cfg.model, cfg.cache_bytes, cfg.access_log) == (9001, "hash:8", 1 << 30, True)
    assert cfg.redis_url == "redis://r:6379/1" and cfg.backend_options == {"max_tokens": 16}
    cfg = parse(["--port", "9002", "--no-access-log", "--cache-bytes", "64M", "--backend-option", "max_tokens=32"], env)
    assert (cfg.port, cfg.access_log, cfg.cache_bytes) == (9002, False, 64 << 20)
    assert cfg.backend_options == {"max_tokens": 32}


def test_every_setting_has_flag_and_env() -> None:
    p = argparse.ArgumentParser()
    add_serve_arguments(p)
    help_text = p.format_help()
    for s in SETTINGS:
        assert "--" + s.name.replace("_", "-") in help_text
        assert env_name(s.name) in help_text.replace("\n", " ").replace("  ", " ") or env_name(s.name)[:20] in help_text
    for flag in ("--host", "--port", "--model", "--workers", "--redis-url", "--api-key", "--max-batch-tokens",
                 "--max-batch-wait-ms", "--max-client-batch-size", "--max-body-bytes", "--cache-bytes",
                 "--prewarm", "--prewarm-interval", "--log-level"):
        assert flag in help_text


def test_round_trip_through_env() -> None:
    cfg = ServerConfig(port=1234, model="hash:4", redis_url="redis://x", prewarm="f.txt", prewarm_interval=5,
                       access_log=True, api_key=None, public_tables=True,
                       cors_origins=("https://maps.example.com", "http://localhost:5173"))
    assert config_from_env(config_to_env(cfg)) == cfg


@pytest.mark.parametrize("text, expected", [
    ("*", ("*",)), ("https://Maps.Example.com", ("https://maps.example.com",)),
    ("https://a.example, http://localhost:5173,", ("https://a.example", "http://localhost:5173")), ("", ()),
])
def test_cors_origins(text: str, expected: tuple[str, ...]) -> None:
    assert config_from_env({"DENSEWIRE_CORS_ORIGINS": text}).cors_origins == expected


@pytest.mark.parametrize("argv, word", [
    (["--cors-origins", "maps.example.com"], "'maps.example.com' is not an origin"),
    (["--max-body-bytes", "-5"], "size must not be negative: '-5'"),
    (["--port", "x"], "invalid literal for int() with base 10: 'x'"),
])
def test_bad_flag_values_say_what_is_wrong(argv: list[str], word: str, capsys) -> None:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    assert word in capsys.readouterr().err


@pytest.mark.parametrize("text, word", [
    ("maps.example.com", "not an origin"), ("https://a.example/app", "no path"), ("ftp://a.example", "not an origin"),
    ("*,https://a.example", "give it alone"),
])
def test_bad_cors_origins_say_what_is_wrong(text: str, word: str) -> None:
    with pytest.raises(ValueError, match=word) as info:
        config_from_env({"DENSEWIRE_CORS_ORIGINS": text})
    assert "DENSEWIRE_CORS_ORIGINS" in str(info.value)


@pytest.mark.parametrize("changes, word", [
    ({"port": 70000}, "port"), ({"workers": 0}, "workers"), ({"max_batch_tokens": 0}, "max-batch-tokens"),
    ({"prewarm_interval": 5}, "prewarm"), ({"redis_timeout": 0}, "redis-timeout"),
    ({"model_threads": -1}, "model-threads"),
])
def test_validate(changes, word) -> None:
    with pytest.raises(ValueError, match=word):
        validate(ServerConfig(**changes))


def test_model_threads_default_fills_the_cores(monkeypatch) -> None:
    """0 (the default): one call when a call uses every core, else cores / --blas-threads; a value given wins."""
    monkeypatch.setattr("densewire._server.config.cores", lambda: 8)
    assert parse([]).model_threads == 0
    assert model_threads_for(ServerConfig()) == 1
    assert model_threads_for(ServerConfig(blas_threads=1)) == 8
    assert model_threads_for(ServerConfig(blas_threads=3)) == 2
    assert model_threads_for(ServerConfig(blas_threads=16)) == 1
    assert model_threads_for(ServerConfig(blas_threads=1, model_threads=3)) == 3
    monkeypatch.undo()
    assert 1 <= cores() <= (__import__("os").cpu_count() or 1)


def test_bad_env_value_names_variable() -> None:
    with pytest.raises(ValueError, match="DENSEWIRE_PORT"):
        config_from_env({"DENSEWIRE_PORT": "eighty"})


def test_add_serve_command() -> None:
    parser = argparse.ArgumentParser(prog="densewire")
    sub = parser.add_subparsers(dest="command", required=True)
    add_serve_command(sub)
    args = parser.parse_args(["serve", "--model", "hash:4", "--port", "0"])
    assert args.command == "serve" and callable(args.func)
    assert config_from_args(args, {}).model == "hash:4"


def test_bad_model_spec_exits_nonzero(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "densewire.server", "--model", "nonsense:1", "--port",
                           str(free_port())], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode != 0
    assert "nonsense" in proc.stderr


def test_env_only_configuration_and_graceful_shutdown() -> None:
    port = free_port()
    s = ServerProcess(env={"DENSEWIRE_MODEL": "hash:12", "DENSEWIRE_SERVED_MODEL_NAME": "from-env"}, port=port)
    s.start()
    try:
        assert httpx.get(s.url + "/v1/models").json()["data"][0]["id"] == "from-env"
        # a request in flight when SIGTERM arrives still gets its answer
        with httpx.Client(timeout=30) as c:
            big = {"input": [f"drain {i} " * 50 for i in range(2048)]}
            import threading

            result: dict[str, int] = {}

            def send() -> None:
                result["status"] = c.post(s.url + "/v1/embeddings", json=big).status_code

            t = threading.Thread(target=send)
            t.start()
            time.sleep(0.15)
            assert s.proc is not None
            s.proc.send_signal(signal.SIGTERM)
            t.join(30)
            assert result.get("status") == 200
        assert s.proc.wait(30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after draining
        assert "Finished server process" in s.log_text()
    finally:
        s.stop()


def test_workers_share_port() -> None:
    s = ServerProcess("--model", "hash:8", "--workers", "2")
    s.start()
    try:
        pids = set()
        with httpx.Client(timeout=10) as c:
            for _ in range(40):
                r = c.post(s.url + "/v1/embeddings", json={"input": "w"}, headers={"Connection": "close"})
                assert r.status_code == 200
        deadline = time.monotonic() + 60  # /health answers once the first worker is up; wait for the second
        while True:
            text = s.log_text()
            pids = {line.split("[")[1].split("]")[0] for line in text.splitlines() if "Started server process" in line}
            if len(pids) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(pids) == 2, text
    finally:
        s.stop()


def test_grpc_port() -> None:
    assert parse([]).grpc_port is None
    cfg = parse(["--grpc-port", "8001"])
    assert cfg.grpc_port == 8001 and config_from_env(config_to_env(cfg)).grpc_port == 8001
    assert parse([], {"DENSEWIRE_GRPC_PORT": "9001"}).grpc_port == 9001
    assert config_from_env(config_to_env(parse([]))).grpc_port is None
    with pytest.raises(ValueError, match="--grpc-port .* --workers 1"):
        validate(parse(["--grpc-port", "8001", "--workers", "2"]))
    with pytest.raises(ValueError, match="--grpc-port 8000 is the HTTP --port"):
        validate(parse(["--grpc-port", "8000"]))
    with pytest.raises(ValueError, match=r"--grpc-port must be in \[0, 65535\]"):
        validate(parse(["--grpc-port", "70000"]))
