"""A Spark standalone cluster (one master, N workers) started from the installed
PySpark package, for the cluster tests.

Every process is started in its own process group (start_new_session) and
stop() kills each group with SIGKILL, so a worker's executors and their Python
workers go with it; stop() is also registered with atexit, so an interrupted
run leaves no Spark process behind. Ports are ephemeral (port 0, read back
from the logs); everything binds to 127.0.0.1."""
from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SRC = Path(__file__).resolve().parents[2] / "src"


def spark_env(log_dir: Path) -> dict[str, str]:
    """The environment of the Spark daemons: loopback only, small daemon heaps,
    Python workers on this interpreter, this checkout's letterbox first on the path."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_LOG_DIR=str(log_dir),
        SPARK_PID_DIR=str(log_dir),
        SPARK_WORKER_DIR=str(log_dir / "work"),  # executors' directories (default: inside the package)
        SPARK_NO_DAEMONIZE="1",
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p),
    )
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SparkProcess:
    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen(args, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 90.0, count: int = 1) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = list(re.finditer(pattern, self.text()))
            if len(found) >= count:
                return found[count - 1]
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.text()[-3000:]}")
            time.sleep(0.2)
        raise AssertionError(f"{self.name}: no {pattern!r} within {timeout} s:\n{self.text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group: the daemon, its executors and their Python workers."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


class SparkCluster:
    """spark-class Master + Worker processes; `url` is the master's spark:// address."""

    def __init__(self, base: Path, workers: int = 2, worker_memory: str = "1g") -> None:
        self.base = base
        self.logs = base / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.env = spark_env(self.logs)
        self.processes: list[SparkProcess] = []
        self.workers: list[SparkProcess] = []
        self.n_workers, self.worker_memory = workers, worker_memory
        self.url = ""
        atexit.register(self.stop)

    def _spark_class(self, name: str, main: str, *args: str) -> SparkProcess:
        p = SparkProcess(name, [str(SPARK_HOME / "bin" / "spark-class"), main, *args], self.env,
                         self.logs / f"{name}.log")
        self.processes.append(p)
        return p

    def start(self) -> SparkCluster:
        master = self._spark_class("master", "org.apache.spark.deploy.master.Master",
                                   "--host", "127.0.0.1", "--port", "0", "--webui-port", "0")
        self.master = master
        self.url = master.wait_for(r"Starting Spark master at (spark://\S+)").group(1)
        for _ in range(self.n_workers):
            self.add_worker()
        master.wait_for(r"Registering worker", count=self.n_workers)
        return self

    def add_worker(self) -> SparkProcess:
        i = len(self.workers)
        work = self.base / f"worker-{i}"
        work.mkdir(exist_ok=True)
        w = self._spark_class(
            f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.url,
            "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
            "--cores", "1", "--memory", self.worker_memory, "--work-dir", str(work))
        self.workers.append(w)
        return w

    def session_conf(self) -> dict[str, str]:
        """What an application on this cluster sets: small executors, one per worker."""
        return {
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": str(self.n_workers),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": self.env["PYTHONPATH"],
        }

    def kill_worker(self, i: int) -> None:
        self.workers[i].kill()

    def stop(self) -> None:
        for p in reversed(self.processes):
            p.kill()

    def logs_tail(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.text()[-2000:]}" for p in self.processes)
