"""The distribution as pip builds it (offline: no build isolation, no dependencies fetched):
its name, the `letterbox` command and the pytest plugin's entry point, the files a running
broker needs (console, schema, type marker), and a base install that pulls in nothing of the
test suite or Spark (what keeps it small: `make dist-check` measures the installed size)."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    (path,) = out.glob("letterbox_broker-*.whl")
    return zipfile.ZipFile(path)


def _dist_info(wheel: zipfile.ZipFile, name: str) -> str:
    (member,) = [n for n in wheel.namelist() if n.endswith(f".dist-info/{name}")]
    return wheel.read(member).decode()


def test_name_command_and_plugin(wheel: zipfile.ZipFile) -> None:
    meta = Parser().parsestr(_dist_info(wheel, "METADATA"))
    assert meta["Name"] == "letterbox-broker"
    entry_points = _dist_info(wheel, "entry_points.txt")
    assert "[console_scripts]\nletterbox = letterbox.cli:main" in entry_points
    assert "[pytest11]\nletterbox = letterbox.testing.pytest_plugin" in entry_points


def test_files_a_running_broker_needs(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for needed in ("letterbox/py.typed", "letterbox/protocol/pulsar_api.proto",
                   "letterbox/admin/console/static/index.html", "letterbox/testing/pytest_plugin.py"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("tests/", "docs/", "benchmarks/"))]


def test_the_base_install_pulls_in_no_test_or_spark_dependency(wheel: zipfile.ZipFile) -> None:
    meta = Parser().parsestr(_dist_info(wheel, "METADATA"))
    requires = meta.get_all("Requires-Dist") or []
    base = [r.split(";")[0].strip() for r in requires if "extra ==" not in r]
    heavy = ("pytest", "pyspark", "pyarrow", "pandas", "matplotlib", "mypy", "selenium", "grpcio")
    assert not [r for r in base if r.lower().startswith(heavy)], base
    assert set(meta.get_all("Provides-Extra") or []) >= {"test", "spark", "dev"}
    test_extra = [r.split(";")[0].strip() for r in requires if 'extra == "test"' in r]
    assert [r for r in test_extra if r.startswith("pytest")] and not [r for r in test_extra if "spark" in r]
