"""A student's setting, for real: the release installed alone into a fresh virtual environment by
its own README's commands, JupyterLab started from it, and headless Chromium (Debian's chromium
and chromium-driver, driven by selenium) working through a notebook with every host but the
loopback unreachable."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: The test drives JupyterLab's commands through ``window.jupyterapp`` (this server option only):
#: the same commands as the menus, without guessing at the page's layout.
EXPOSE_APP = "--LabApp.expose_app_in_browser=True"


def readme_install_commands(release: Path) -> list[str]:
    """The shell lines of the release README's first ``bash`` block, but the one that starts JupyterLab."""
    block = re.search(r"```bash\n(.*?)```", (release / "README.md").read_text(encoding="utf-8"), re.S)
    if not block:
        raise AssertionError("the release README has no bash block of install commands")
    return [line for line in block.group(1).splitlines() if line.strip() and "jupyter lab" not in line]


def install_release(release: Path, python: str | None = None) -> dict:
    """Run the README's install commands in ``release`` (its ``.venv``); return the figures of the
    install: seconds, packages, megabytes of the environment."""
    python = python or getattr(sys, "_base_executable", sys.executable)
    started = time.perf_counter()
    for line in readme_install_commands(release):
        command = re.sub(r"^python3(\.\d+)?\b", python, line.strip())
        done = subprocess.run(command, shell=True, cwd=release, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise AssertionError(f"`{line}` failed in the release:\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    seconds = time.perf_counter() - started
    venv = release / ".venv"
    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True,
                            text=True, check=True).stdout
    size = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
    return {"seconds": seconds, "packages": len(json.loads(listed)), "megabytes": size / 1e6,
            "names": sorted(p["name"].lower() for p in json.loads(listed))}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(venv: Path, root: Path, env: dict, ready_seconds: float = 120):
    """JupyterLab from ``venv`` serving ``root`` on a loopback port; yields its base URL and token.
    Its process group (kernels included) is ended on exit."""
    port, token = _free_port(), secrets.token_hex(16)
    command = [str(venv / "bin" / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", EXPOSE_APP]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = open(root.parent / "jupyterlab.log", "w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_seconds
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("JupyterLab did not start: " + (root.parent / "jupyterlab.log").read_text()[-2000:])
                time.sleep(0.5)
        yield base, token
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)
        log.close()


@contextlib.contextmanager
def headless_chromium(width: int = 1366, height: int = 900):
    """Chromium driven by selenium; every request but to the loopback goes to a closed port."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={width},{height}", "--proxy-server=127.0.0.1:9"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


# JupyterLab, as the page shows it (window.jupyterapp): the current notebook panel and its model
_PANEL = "const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;"


def open_notebook(driver, base: str, token: str, path: str, seconds: float = 120) -> None:
    """Open ``path`` (relative to the server's root) and wait until its kernel is idle."""
    driver.get(f"{base}/lab/tree/{path}?token={token}")
    wait_for(driver, _PANEL + " return !!(panel && panel.context && panel.context.path === arguments[0] && "
             "panel.sessionContext.session && panel.sessionContext.session.kernel && "
             "panel.sessionContext.session.kernel.status === 'idle');", seconds, f"{path}'s kernel to start", path)


def run_all(driver) -> None:
    driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")


def wait_until_run(driver, seconds: float) -> None:
    """Until every code cell has run (the last one, the export, included) and the kernel is idle."""
    wait_for(driver, _PANEL + """
        const cells = panel.content.model.cells; let ran = true;
        for (let i = 0; i < cells.length; i++) {
          const cell = cells.get(i);
          if (cell.type === 'code' && cell.sharedModel.getSource().trim() && cell.executionCount === null) { ran = false; }
        }
        return ran && panel.sessionContext.session.kernel.status === 'idle';""", seconds, "every cell to run")


def set_cell_source(driver, index: int, text: str) -> None:
    """Type into a cell as a student would, without saving (the model changes, the file does not)."""
    driver.execute_script(_PANEL + " panel.content.model.cells.get(arguments[0]).sharedModel.setSource(arguments[1]);",
                          index, text)


def cells_in_page(driver) -> list[dict]:
    return driver.execute_script(_PANEL + " const cells = panel.content.model.cells; const out = [];"
                                 " for (let i = 0; i < cells.length; i++) { out.push(cells.get(i).toJSON()); }"
                                 " return out;")


def federated_extensions(driver) -> list[str]:
    """The JupyterLab extensions the page loaded, by name."""
    return driver.execute_script("return JSON.parse(document.getElementById('jupyter-config-data').textContent)"
                                 ".federated_extensions.map(function (e) { return e.name; });")


def wait_for(driver, script: str, seconds: float, what: str, *args) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if driver.execute_script(script, *args):
            return
        time.sleep(1)
    raise AssertionError(f"waited {seconds:.0f} s for {what}")
