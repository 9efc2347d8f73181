"""The reference broker: Apache Pulsar standalone, run from its own jars on Maven Central.

Owns where those jars are cached (`~/.cache/letterbox/pulsar-<version>/lib`, or under
`$LETTERBOX_CACHE`), fetching them with Maven (`conformance/pulsar/pom.xml` pins the version),
starting a standalone broker on free loopback ports with its own data directory, waiting until it
serves (the admin API lists `public/default`), stopping it, and running Pulsar's command-line tools
(`pulsar-admin`, `pulsar-client`, `pulsar-perf`) from the same jars against any broker.

Invariants: nothing is written inside the repository; the cache directory is filled completely or
not at all (a stamp file marks a finished fetch); a broker started here is stopped by whoever
started it (`with PulsarReference(...)`, or `stop` for one left running by `start --detach`).

    python -m conformance.reference fetch
    python -m conformance.reference start [--port P] [--admin-port A] [--detach]
    python -m conformance.reference stop
    python -m conformance.reference tool --admin-url http://127.0.0.1:8080 pulsar-admin tenants list
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

HERE = Path(__file__).resolve().parent
POM = HERE / "pulsar" / "pom.xml"
SETTINGS = HERE / "pulsar" / "settings.xml"
CONF = HERE / "pulsar" / "standalone.conf"
LOG_CONF = HERE / "pulsar" / "log4j2.xml"

# the main classes behind the distribution's bin/ scripts
TOOLS = {
    "pulsar-admin": "org.apache.pulsar.admin.cli.PulsarAdminTool",
    "pulsar-client": "org.apache.pulsar.client.cli.PulsarClientTool",
    "pulsar-perf": "org.apache.pulsar.testclient.PulsarPerfTestTool",
}
STANDALONE = "org.apache.pulsar.PulsarStandaloneStarter"
# what the distribution's scripts open for netty and BookKeeper on Java 17+
OPENS = [
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.net=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.platform=ALL-UNNAMED",
    "--add-opens", "java.management/sun.management=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
]
READY_TIMEOUT_S = 240.0


def pulsar_version() -> str:
    """The version pinned by conformance/pulsar/pom.xml (the one place that names it)."""
    m = re.search(r"<pulsar\.version>([^<]+)</pulsar\.version>", POM.read_text())
    if m is None:
        raise RuntimeError(f"{POM}: no <pulsar.version> property")
    return m.group(1).strip()


def cache_root() -> Path:
    return Path(os.environ.get("LETTERBOX_CACHE", Path.home() / ".cache" / "letterbox"))


def home() -> Path:
    """Where this version's jars live: home()/lib/*.jar."""
    return cache_root() / f"pulsar-{pulsar_version()}"


def fetched() -> bool:
    return (home() / "lib" / ".complete").exists()


def fetch(quiet: bool = True) -> Path:
    """Copy the pinned version's runtime jars from Maven Central into the cache, once."""
    lib = home() / "lib"
    if fetched():
        return lib
    if shutil.which("mvn") is None:
        raise RuntimeError("Maven (mvn) is needed to fetch Apache Pulsar's jars: apt-get install maven")
    partial = lib.with_name("lib.partial")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = ["mvn", "-B", "-s", str(SETTINGS), "-f", str(POM), "dependency:copy-dependencies",
           f"-DoutputDirectory={partial}", "-DincludeScope=runtime"]
    if quiet:
        cmd.insert(1, "-q")
    subprocess.run(cmd, check=True)
    shutil.rmtree(lib, ignore_errors=True)
    partial.rename(lib)
    (lib / ".complete").write_text(pulsar_version() + "\n")
    return lib


def java() -> str:
    """The JVM that runs the reference: $LETTERBOX_REFERENCE_JAVA, else `java` on PATH."""
    return os.environ.get("LETTERBOX_REFERENCE_JAVA", "java")


def classpath() -> str:
    return str(fetch() / "*")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# short-lived tools start faster with the client compiler only and the serial collector; the load
# generator keeps the full JIT and room for its latency histograms
QUICK_JVM = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
TOOL_JVM = {"pulsar-perf": ["-Xms1g", "-Xmx1g", "-XX:+UseG1GC"]}


def client_conf(directory: Path, service_url: str, admin_url: str) -> Path:
    """A client.conf for Pulsar's command-line tools, pointing at one broker."""
    path = directory / "client.conf"
    path.write_text(f"webServiceUrl={admin_url}\nbrokerServiceUrl={service_url}\n")
    return path


def tool(name: str, args: list[str], service_url: str, admin_url: str,
         timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run one of Pulsar's command-line tools against a broker; never raises on its exit code."""
    with tempfile.TemporaryDirectory(prefix="pulsar-tool-") as tmp:
        cmd = tool_command(name, args, service_url, admin_url, Path(tmp))
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def tool_command(name: str, args: list[str], service_url: str, admin_url: str,
                 conf_dir: Path | None = None) -> list[str]:
    """The command line of one of Pulsar's tools against a broker (its client.conf written into
    `conf_dir`, a new temporary directory by default), for callers that run it themselves."""
    if name not in TOOLS:
        raise ValueError(f"unknown tool {name!r}: one of {', '.join(sorted(TOOLS))}")
    conf = client_conf(conf_dir or Path(tempfile.mkdtemp(prefix="pulsar-tool-")), service_url, admin_url)
    return [java(), *TOOL_JVM.get(name, QUICK_JVM), *OPENS, "-Dlog4j2.level=warn", "-cp", classpath(),
            TOOLS[name], str(conf), *args]


def get_json(url: str, timeout: float = 5.0) -> object:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


class PulsarReference:
    """One Apache Pulsar standalone broker: its ports, data directory and process."""

    def __init__(self, data_dir: Path | None = None, port: int = 0, admin_port: int = 0,
                 heap: str = "1g") -> None:
        self._own_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="pulsar-reference-"))
        self.port = port or free_port()
        self.admin_port = admin_port or free_port()
        self.bookie_port = free_port()
        self.heap = heap
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "pulsar.log"

    def _conf(self) -> Path:
        path = self.data_dir / "standalone.conf"
        path.write_text(CONF.read_text() + "\n# this run\n"
                        f"brokerServicePort={self.port}\nwebServicePort={self.admin_port}\n")
        return path

    def command(self) -> list[str]:
        return [java(), f"-Xms{self.heap}", f"-Xmx{self.heap}", f"-XX:MaxDirectMemorySize={self.heap}",
                "-XX:+UseG1GC", *OPENS, f"-Dlog4j.configurationFile={LOG_CONF}",
                f"-Dpulsar.log.file={self.log_path}", "-Dio.netty.leakDetection.level=disabled",
                "-Dpulsar.allocator.exit_on_oom=true",
                "-cp", classpath(), STANDALONE, "--config", str(self._conf()),
                "--no-functions-worker", "--no-stream-storage",
                "--metadata-dir", str(self.data_dir / "metadata"),
                "--bookkeeper-dir", str(self.data_dir / "bookkeeper"),
                "--bookkeeper-port", str(self.bookie_port)]

    def start(self, detach: bool = False) -> PulsarReference:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        out = (self.data_dir / "stdout.log").open("wb")
        self.proc = subprocess.Popen(self.command(), cwd=self.data_dir, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=detach)
        self.pid = self.proc.pid
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"Apache Pulsar exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if "public/default" in str(get_json(f"{self.admin_url}/admin/v2/namespaces/public")):
                    return
            except (OSError, urllib.error.URLError, ValueError):
                pass
            time.sleep(0.5)
        raise RuntimeError(f"Apache Pulsar did not serve within {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        text = ""
        for path in (self.data_dir / "stdout.log", self.log_path):
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
        return text

    def stop(self, timeout: float = 60.0) -> None:
        if self.pid is not None:
            _terminate(self.pid, timeout)
            if self.proc is not None:
                self.proc.wait()
        self.pid = None
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def tool(self, name: str, args: list[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return tool(name, args, self.service_url, self.admin_url, timeout)

    def __enter__(self) -> PulsarReference:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours has ended too
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _terminate(pid: int, timeout: float) -> None:
    if not _alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


def state_file() -> Path:
    return cache_root() / "reference.json"


def _start_detached(args: argparse.Namespace) -> int:
    state = state_file()
    if state.exists():
        old = json.loads(state.read_text())
        if _alive(int(old["pid"])):
            print(f"Apache Pulsar {old['version']} is already running: {old['service_url']} {old['admin_url']}")
            return 0
    data_dir = Path(args.data_dir) if args.data_dir else cache_root() / "reference-data"
    if data_dir.exists() and not args.data_dir:
        shutil.rmtree(data_dir)
    ref = PulsarReference(data_dir, args.port, args.admin_port)
    ref.start(detach=True)
    state.write_text(json.dumps({"pid": ref.pid, "version": pulsar_version(), "service_url": ref.service_url,
                                 "admin_url": ref.admin_url, "data_dir": str(ref.data_dir)}))
    print(f"Apache Pulsar {pulsar_version()} standalone is running (pid {ref.pid}, data in {ref.data_dir})")
    print(f"service URL: {ref.service_url}")
    print(f"admin URL:   {ref.admin_url}")
    print("stop it with: make pulsar-stop")
    return 0


def _stop_detached() -> int:
    state = state_file()
    if not state.exists():
        print("no Apache Pulsar started by `make pulsar` is running")
        return 0
    info = json.loads(state.read_text())
    _terminate(int(info["pid"]), 60.0)
    state.unlink()
    print(f"stopped Apache Pulsar (pid {info['pid']})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.reference", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("fetch", help="fetch the pinned Apache Pulsar jars from Maven Central into the cache")
    start = sub.add_parser("start", help="start Apache Pulsar standalone and leave it running")
    start.add_argument("--port", type=int, default=0, help="binary protocol port (default: a free one)")
    start.add_argument("--admin-port", type=int, default=0, help="admin/HTTP port (default: a free one)")
    start.add_argument("--data-dir", default="", help="data directory (default: a fresh one under the cache)")
    sub.add_parser("stop", help="stop the broker left running by start")
    run_tool = sub.add_parser("tool", help="run pulsar-admin, pulsar-client or pulsar-perf")
    run_tool.add_argument("--service-url", default="pulsar://127.0.0.1:6650")
    run_tool.add_argument("--admin-url", default="http://127.0.0.1:8080")
    run_tool.add_argument("name", choices=sorted(TOOLS))
    run_tool.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.verb == "fetch":
            print(fetch(quiet=False))
            return 0
        if args.verb == "start":
            return _start_detached(args)
        if args.verb == "stop":
            return _stop_detached()
        rest = args.args[1:] if args.args[:1] == ["--"] else args.args
        done = tool(args.name, rest, args.service_url, args.admin_url)
        sys.stdout.write(done.stdout)
        sys.stderr.write(done.stderr)
        return done.returncode
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
