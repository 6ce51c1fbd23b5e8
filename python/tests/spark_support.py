"""A real Spark standalone cluster for the Spark tests: one master and two workers (1 core each) started
from the pyspark package's own jars with ``spark-class``, on 127.0.0.1, and one SparkSession on it.

Java 17 comes from scripts/toolchains.sh (``make test`` runs it first); a missing ``java`` is a test
failure, not a skip. The executors run the test's own Python (``spark.pyspark.python``), so they import
this densewire. Also: the helpers the fault tests use to find a task's processes (the Python worker
that holds a PostgreSQL connection, its executor JVM, the Worker that launched that executor).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from server_support import SRC, free_port

TESTS = Path(__file__).resolve().parent  # on the executors' path too: the tests' own mapInArrow functions

__all__ = ["SparkCluster", "spark_conf", "spark_session", "java_or_fail", "wait_for_executors", "executors",
           "process_of_local_port", "ancestors", "cmdline", "executor_jvm_of"]


def java_or_fail() -> str:
    java = shutil.which("java") or (os.environ.get("JAVA_HOME") and str(Path(os.environ["JAVA_HOME"], "bin", "java")))
    if not java or not os.access(java, os.X_OK):
        raise RuntimeError("Spark needs Java 17: none on the PATH or in JAVA_HOME (bash scripts/toolchains.sh install "
                           "installs openjdk-17-jdk-headless)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    major = out.split('"')[1].split(".")[0] if '"' in out else "0"
    if not major.isdigit() or int(major) < 17:
        raise RuntimeError(f"Spark 4 needs Java 17 or newer; {java} is:\n{out}")
    return java


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


class SparkCluster:
    """``spark-class ...Master`` and two ``...Worker`` s, each with its own log and work folder."""

    def __init__(self, workers: int = 2, worker_memory: str = "1g") -> None:
        java_or_fail()
        self.home = _spark_home()
        self.tmp = Path(tempfile.mkdtemp(prefix="dw-spark-"))
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.n_workers, self.worker_memory = workers, worker_memory
        self.procs: list[subprocess.Popen] = []
        self.workers: list[subprocess.Popen] = []

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update(SPARK_HOME=str(self.home), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
                   SPARK_LOG_DIR=str(self.tmp), PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   SPARK_NO_DAEMONIZE="1")
        return env

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "ab")
        proc = subprocess.Popen([str(self.home / "bin" / "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
                                env=self.env(), cwd=self.tmp, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self) -> "SparkCluster":
        """Start the master and the workers without waiting (call :meth:`wait_ready`)."""
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                    "--webui-port", str(self.ui_port))
        for i in range(self.n_workers):
            work = self.tmp / f"worker-{i}"
            work.mkdir()
            self.workers.append(self._start(
                f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                "--cores", "1", "--memory", self.worker_memory, "--webui-port", str(free_port()),
                "--work-dir", str(work)))
        return self

    def state(self) -> dict[str, Any]:
        """The master's status (``/json/``): workers, applications."""
        return _get_json(f"http://127.0.0.1:{self.ui_port}/json/")

    def wait_ready(self, timeout: float = 240.0) -> "SparkCluster":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark process exited with {p.returncode}:\n{self.logs()}")
            try:
                alive = [w for w in self.state()["workers"] if w["state"] == "ALIVE"]
                if len(alive) == self.n_workers:
                    return self
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"the Spark cluster did not have {self.n_workers} live workers in {timeout} s:\n{self.logs()}")

    def logs(self, n: int = 3000) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-n:]}" for f in sorted(self.tmp.glob("*.log")))

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers first: they stop their executors
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        shutil.rmtree(self.tmp, ignore_errors=True)


def spark_conf(cluster: SparkCluster) -> dict[str, str]:
    """The settings of an application on ``cluster``: one executor of 1 core per worker, this Python on
    both sides (this densewire and the tests' modules on the executors' path), the driver on loopback
    with its UI (and its REST API) on a free port, 4 attempts a task (the cluster default)."""
    return {"spark.master": cluster.url, "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.memory": "512m", "spark.executor.memory": "512m", "spark.executor.cores": "1",
            "spark.cores.max": str(cluster.n_workers), "spark.ui.port": str(free_port()),
            "spark.ui.showConsoleProgress": "false", "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)]), "spark.task.maxFailures": "4",
            "spark.sql.shuffle.partitions": "4"}


def spark_session(cluster: SparkCluster, app: str = "densewire-tests", conf: dict[str, str] | None = None) -> Any:
    """A SparkSession on ``cluster`` with :func:`spark_conf`'s settings, ``conf`` adding to (or replacing) them."""
    os.environ.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    os.environ.pop("SPARK_HOME", None)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    for key, value in {**spark_conf(cluster), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def wait_for_executors(spark: Any, n: int, timeout: float = 240.0) -> list[dict[str, Any]]:
    """The driver's live executors (its REST API), once ``n`` have registered."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = [e for e in executors(spark) if e["id"] != "driver" and e["isActive"]]
        except OSError:  # the driver's UI is slow to answer on a busy machine
            found = []
        if len(found) >= n or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def executors(spark: Any) -> list[dict[str, Any]]:
    sc = spark.sparkContext
    return _get_json(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/allexecutors")


# -- the processes of a task ------------------------------------------------------------------------------------
def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def ancestors(pid: int) -> list[int]:
    """``pid``'s parent, grandparent, ... up to init."""
    out = []
    while pid > 1:
        try:
            pid = _ppid(pid)
        except OSError:
            break
        out.append(pid)
    return out


def executor_jvm_of(pid: int) -> int:
    """The executor JVM (CoarseGrainedExecutorBackend) a Python worker process belongs to."""
    for p in ancestors(pid):
        if "CoarseGrainedExecutorBackend" in cmdline(p):
            return p
    raise LookupError(f"process {pid} is not under a Spark executor")


def process_of_local_port(port: int) -> int:
    """The process holding the loopback TCP socket whose local port is ``port`` (/proc/net/tcp, then the
    fd links of each process)."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] != "0":
                inode = fields[9]
                break
        if inode:
            break
    if inode is None:
        raise LookupError(f"no socket with local port {port}")
    target = f"socket:[{inode}]"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) == target:
                    return int(proc.name)
        except OSError:
            continue
    raise LookupError(f"no process holds {target}")
