"""Real processes for the server tests: densewire serve, redis-server, nginx.

Each runs on a free loopback port with its files in a temporary folder, and is stopped by the
fixture that started it. A missing redis-server or nginx is installed by scripts/services.sh
(apt-get, as root); if that fails the test fails: nothing is skipped.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "REPO",
    "free_port",
    "ensure_services",
    "ServerProcess",
    "RedisProcess",
    "NginxProcess",
    "parse_metrics",
    "metric_value",
]

REPO = Path(__file__).resolve().parents[3]
SRC = REPO / "python" / "src"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(name: str, *fallbacks: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for f in fallbacks:
        if os.access(f, os.X_OK):
            return f
    return None


def ensure_services() -> tuple[str, str]:
    """Paths of redis-server and nginx, installing them with scripts/services.sh when missing."""
    redis = _which("redis-server", "/usr/bin/redis-server")
    nginx = _which("nginx", "/usr/sbin/nginx")
    if redis is None or nginx is None:
        proc = subprocess.run(["bash", str(REPO / "scripts" / "services.sh"), "install"],
                              capture_output=True, text=True, timeout=600)
        redis = _which("redis-server", "/usr/bin/redis-server")
        nginx = _which("nginx", "/usr/sbin/nginx")
        if redis is None or nginx is None:
            raise RuntimeError(
                "redis-server and nginx are needed and scripts/services.sh could not install them:\n"
                + proc.stdout + proc.stderr)
    return redis, nginx


def _wait_port(port: int, proc: subprocess.Popen, what: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s:\n{_tail(log)}")


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


class _Process:
    proc: subprocess.Popen | None = None
    log: Path

    def _stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        self.proc = None
        return p.returncode

    def log_text(self) -> str:
        return _tail(self.log, 1 << 20)


class ServerProcess(_Process):
    """``python -m densewire.server`` with the given flags, on 127.0.0.1 and a free port. The demo tables
    (whose pre-built compressions cost minutes of CPU) are off unless ``demo_tables`` is true."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, port: int | None = None,
                 tmp: Path | None = None, demo_tables: bool = False) -> None:
        self.args = list(args)
        self.demo_tables = demo_tables
        self.port = port or free_port()
        self.env = env or {}
        self.tmp = tmp or Path(tempfile.mkdtemp(prefix="dw-server-"))
        self.log = self.tmp / f"server-{self.port}.log"
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0, wait: bool = True) -> "ServerProcess":
        env = {k: v for k, v in os.environ.items() if not k.startswith("DENSEWIRE_")}
        env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
        if not self.demo_tables:
            env["DENSEWIRE_DEMO_TABLES"] = "false"
        env.update(self.env)
        cmd = [sys.executable, "-m", "densewire.server", "--host", "127.0.0.1", "--port", str(self.port),
               *self.args]
        self._logf = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._logf, stderr=subprocess.STDOUT, env=env,
                                     cwd=str(self.tmp))
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{_tail(self.log)}")
            try:
                r = httpx.get(self.url + "/health", timeout=1.0)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready within {timeout} s:\n{_tail(self.log)}")

    def stop(self, timeout: float = 30.0) -> int | None:
        rc = self._stop(signal.SIGTERM, timeout)
        if getattr(self, "_logf", None):
            self._logf.close()
        return rc

    def metrics(self) -> dict[str, float]:
        return parse_metrics(httpx.get(self.url + "/metrics", timeout=5).text)

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class RedisProcess(_Process):
    """A throw-away redis-server (no persistence) on a loopback port; can be killed and restarted."""

    def __init__(self, port: int | None = None) -> None:
        self.binary, _ = ensure_services()
        self.port = port or free_port()
        self.tmp = Path(tempfile.mkdtemp(prefix="dw-redis-"))
        self.log = self.tmp / "redis.log"
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisProcess":
        cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--daemonize", "no", "--dir", str(self.tmp),
               "--logfile", str(self.log), "--protected-mode", "no"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port, self.proc, "redis-server", self.log, 15)
        return self

    def kill(self) -> None:
        """Stop at once, as a crash would (SIGKILL)."""
        self._stop(signal.SIGKILL, 10)

    def stop(self) -> None:
        self._stop(signal.SIGTERM, 10)

    def dbsize(self) -> int:
        import redis

        return int(redis.Redis(port=self.port, socket_timeout=2).dbsize())

    def __enter__(self) -> "RedisProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def render_nginx_conf(template: str, *, port: int, upstreams: list[int], tmp: Path) -> str:
    """deploy/nginx.conf with this test's ports and files (SPEC of the file: one directive a line)."""
    text = re.sub(r"(?m)^(\s*)pid\s+[^;]+;", rf"\1pid {tmp}/nginx.pid;", template)
    text = re.sub(r"(?m)^(\s*)error_log\s+[^;]+;", rf"\1error_log {tmp}/error.log warn;", text)
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        text = re.sub(rf"(?m)^(\s*){name}_temp_path\s+[^;]+;", rf"\1{name}_temp_path {tmp}/{name};", text)
    text = re.sub(r"(?m)^(\s*)listen\s+[^;]+;", rf"\1listen 127.0.0.1:{port};", text)
    servers = re.findall(r"(?m)^(\s*)server\s+127\.0\.0\.1:\d+([^;]*);\n", text)
    if not servers:
        raise ValueError("deploy/nginx.conf has no 'server 127.0.0.1:PORT ...;' line in its upstream")
    indent, params = servers[0]
    block = "".join(f"{indent}server 127.0.0.1:{p}{params};\n" for p in upstreams)
    text = re.sub(r"(?m)^\s*server\s+127\.0\.0\.1:\d+[^;]*;\n", "", text)
    text = text.replace(f"{indent}least_conn;\n", f"{indent}least_conn;\n{block}", 1)
    if block not in text:
        raise ValueError("deploy/nginx.conf: could not place the upstream servers after 'least_conn;'")
    return text


class NginxProcess(_Process):
    """nginx running deploy/nginx.conf in front of the given replica ports."""

    def __init__(self, upstreams: list[int], conf: Path | None = None) -> None:
        _, self.binary = ensure_services()
        self.port = free_port()
        self.tmp = Path(tempfile.mkdtemp(prefix="dw-nginx-"))
        os.chmod(self.tmp, 0o777)  # nginx workers run as another user when the tests run as root
        self.log = self.tmp / "error.log"
        self.conf_path = self.tmp / "nginx.conf"
        template = (conf or REPO / "deploy" / "nginx.conf").read_text()
        self.conf_path.write_text(render_nginx_conf(template, port=self.port, upstreams=upstreams, tmp=self.tmp))
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> "NginxProcess":
        cmd = [self.binary, "-p", str(self.tmp), "-c", str(self.conf_path), "-e", str(self.log),
               "-g", "daemon off;"]
        test = subprocess.run([*cmd[:-2], "-t"], capture_output=True, text=True)
        if test.returncode != 0:
            raise RuntimeError(f"nginx -t failed:\n{test.stderr}\n--- config ---\n{self.conf_path.read_text()}")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port, self.proc, "nginx", self.log, 15)
        return self

    def stop(self) -> None:
        self._stop(signal.SIGQUIT, 15)

    def __enter__(self) -> "NginxProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as ``{'name{label="v",...}': value}`` (labels sorted), plus bare names."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def metric_value(metrics: dict[str, float], name: str, **labels: str) -> float:
    """One sample's value (0.0 when absent, as for a counter never incremented)."""
    if labels:
        key = name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
    else:
        key = name
    return metrics.get(key, 0.0)
