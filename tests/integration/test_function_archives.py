"""The deployable archives run: what `make package` zips is what was tested.

Each archive is unpacked on its own and served by functions-framework with the
archive's directory first on the path, so its bundled ``tarsy`` package (not the
checkout's) handles the requests, against the same emulators as the stack.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tarsy_dev.localstack.processes import ProcessInfo, free_port, http_ok, spawn, stop, wait_until
from tarsy_dev.localstack.signin import KEYS_PATH, LOCAL_AUDIENCE
from tarsy_dev.localstack.stack import Stack

from .conftest import signed_in

ROOT = Path(__file__).resolve().parents[2]
KEY = "archive-test-key"


def build(out: Path) -> dict[str, Path]:
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "package_functions.py"), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    unpacked: dict[str, Path] = {}
    for name in ("ingest", "api", "step"):
        target = out / name
        with zipfile.ZipFile(out / f"{name}.zip") as archive:
            archive.extractall(target)
        unpacked[name] = target
    return unpacked


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build(tmp_path_factory.mktemp("archives"))


def environment(stack: Stack, directory: Path, api_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(directory),
        "GOOGLE_CLOUD_PROJECT": stack.project_id,
        "FIRESTORE_EMULATOR_HOST": stack.firestore_host,
        "PUBSUB_EMULATOR_HOST": stack.pubsub_host,
        "TARSY_API_KEY": KEY,
        "TARSY_STEPS_TOPIC": stack.steps_topic,
        "TARSY_PUBLIC_API_URL": api_url,
        "TARSY_LOG_FORMAT": "console",
        # The api verifies the sign-in proxy's assertions, as the stack's own api does.
        "TARSY_IAP_AUDIENCE": LOCAL_AUDIENCE,
        "TARSY_IAP_CERTS_URL": stack.signin_url + KEYS_PATH,
        "TARSY_ACCESS_GRANTS": json.dumps({"admin": [f"user:{stack.user}"]}),
    }


@pytest.mark.parametrize("function", ["ingest", "api", "step"])
def test_archive_imports_its_own_tarsy(archives: dict[str, Path], function: str) -> None:
    directory = archives[function]
    probe = (
        "import sys; sys.path.insert(0, '.'); import main, tarsy; "
        "print(tarsy.__file__); print(sorted(n for n in dir(main) if not n.startswith('_')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": str(directory)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert Path(out[0]).resolve().is_relative_to(directory.resolve())
    assert function in out[1] or (function == "step" and "dead_letter" in out[1])
    assert (directory / "requirements.txt").read_text().count("google-cloud-firestore") == 1


# Imports every module of the archive's tarsy package, then reports each loaded
# tarsy module's file: the checkout's tarsy is importable too (the venv's editable
# install), so a module that needed excluded code would load it from there.
_IMPORT_ALL = """
import importlib, json, pkgutil, sys
sys.path.insert(0, '.')
import main, tarsy
for module in pkgutil.walk_packages(tarsy.__path__, 'tarsy.'):
    importlib.import_module(module.name)
print(json.dumps({n: getattr(m, '__file__', None) for n, m in sys.modules.items()
                  if n == 'tarsy' or n.startswith('tarsy.')}))
"""


@pytest.mark.parametrize("function", ["ingest", "api", "step"])
def test_archive_holds_the_library_whole_and_needs_nothing_else(
    archives: dict[str, Path], function: str
) -> None:
    directory = archives[function]
    library = ROOT / "shared" / "tarsy"
    names = {
        p.relative_to(directory / "tarsy").as_posix()
        for p in (directory / "tarsy").rglob("*")
        if p.is_file()
    }
    expected = {
        p.relative_to(library).as_posix()
        for p in library.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in {".pyc", ".pyo"}
    }
    assert names == expected
    assert not (directory / "tarsy_dev").exists()
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": str(directory)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    loaded: dict[str, str | None] = json.loads(out.splitlines()[-1])
    assert "tarsy.engine.steps" in loaded and "tarsy.llm.langchain_provider" in loaded
    outside = {
        name: file
        for name, file in loaded.items()
        if file is None or not Path(file).resolve().is_relative_to(directory.resolve())
    }
    assert outside == {}


@pytest.fixture
def served(stack: Stack, archives: dict[str, Path], tmp_path: Path) -> Iterator[dict[str, str]]:
    ports = {name: free_port() for name in ("ingest", "api")}
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    processes: list[ProcessInfo] = []
    try:
        for name, port in ports.items():
            directory = archives[name]
            argv = [
                sys.executable, "-m", "functions_framework", "--target", name,
                "--source", str(directory / "main.py"), "--host", "127.0.0.1", "--port", str(port),
            ]  # fmt: skip
            info = spawn(
                f"archive-{name}", argv, log_dir=tmp_path,
                env=environment(stack, directory, urls["api"]), cwd=directory,
            )  # fmt: skip
            processes.append(info)
            wait_until(http_ok(f"{urls[name]}/healthz"), timeout=60, what=name, process=info)
        yield urls
    finally:
        for info in processes:
            stop(info)


def test_packaged_ingest_and_api_serve_against_the_emulators(
    served: dict[str, str], stack: Stack
) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    person = signed_in(stack)
    alert = {"alert_type": "generic", "data": {"service": "orders", "error_rate": 0.31}}
    response = httpx.post(f"{served['ingest']}/alerts", json=alert, headers=auth, timeout=30)
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status_url"] == f"{served['api']}/sessions/{body['session_id']}"

    view = httpx.get(body["status_url"], headers=person, timeout=30)
    assert view.status_code == 200, view.text
    session = view.json()["session"]
    assert session["session_id"] == body["session_id"]
    assert session["alert_type"] == "generic"
    assert '"error_rate": 0.31' in session["alert_data"]

    rejected = httpx.post(f"{served['ingest']}/alerts", json=alert, timeout=30)
    assert rejected.status_code == 401

    # The stack's step function picks the session up; let it finish before the next test.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = httpx.get(body["status_url"], headers=person, timeout=30).json()["session"]
        if status["status"] in ("completed", "failed"):
            break
        time.sleep(0.25)
    assert status["status"] == "completed"


def test_the_packaged_api_serves_the_pages_from_its_own_archive(
    served: dict[str, str], archives: dict[str, Path], stack: Stack
) -> None:
    names = {p.relative_to(archives["api"]).as_posix() for p in archives["api"].rglob("*")}
    assert {"tarsy/web/static/app.js", "tarsy/web/templates/session.html"} <= names
    auth = {"Authorization": f"Bearer {KEY}"}
    alert = {"alert_type": "generic", "data": "queue depth 9000 on billing"}
    created = httpx.post(f"{served['ingest']}/alerts", json=alert, headers=auth, timeout=30)
    session_id = created.json()["session_id"]

    shell = httpx.get(f"{served['api']}/ui/sessions/{session_id}", timeout=30)
    assert shell.status_code == 200 and "text/html" in shell.headers["content-type"]
    assert "script-src 'self'" in shell.headers["content-security-policy"]
    script = httpx.get(f"{served['api']}/ui/static/app.js", timeout=30)
    assert (
        script.status_code == 200
        and script.content == (archives["api"] / "tarsy" / "web" / "static" / "app.js").read_bytes()
    )
    data_url = f"{served['api']}/ui/data/sessions/{session_id}"
    assert httpx.get(data_url, timeout=30).status_code == 401
    update = httpx.get(data_url, headers=signed_in(stack), timeout=30)
    assert update.status_code == 200, update.text
    assert "queue depth 9000 on billing" in update.json()["overview"]
    listing = httpx.get(f"{served['api']}/ui/data/sessions", headers=signed_in(stack), timeout=30)
    assert f'href="sessions/{session_id}"' in listing.json()["html"]
    # Let the stack's step function finish it before the next test clears Firestore.
    deadline = time.monotonic() + 60
    while not httpx.get(data_url, headers=signed_in(stack), timeout=30).json()["finished"]:
        assert time.monotonic() < deadline
        time.sleep(0.25)
