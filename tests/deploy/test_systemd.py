"""deploy/systemd/sluice.service: `systemd-analyze verify` finds nothing to say, the hardening
the docs promise is there, and the ExecStart line, run as written (paths moved to a temporary
directory), serves, reloads on the signal ExecReload sends, and drains within TimeoutStopSec.
This machine runs no systemd as PID 1, so the unit is not started by systemd itself.
"""

import shlex
import shutil
import signal
import subprocess
import time

import pytest

from conftest import ROOT, free_port, http, wait_http

UNIT = ROOT / "deploy" / "systemd" / "sluice.service"


def service_section():
    """The [Service] keys, each with its list of values (a key may repeat)."""
    keys, section = {}, None
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            k, v = line.split("=", 1)
            keys.setdefault(k, []).append(v)
    return keys


def test_unit_verifies(host_binary, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    unit = tmp_path / "sluice.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/sluice", host_binary))
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(unit)], capture_output=True, text=True
    )
    overall = [l for l in security.stdout.splitlines() if "Overall exposure level" in l]
    print("\n" + (overall[0] if overall else security.stderr.strip()))


def test_unit_is_hardened_and_waits_for_the_drain():
    keys = service_section()
    for key, value in {
        "DynamicUser": "yes",
        "StateDirectory": "sluice",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "CapabilityBoundingSet": "",
        "KillSignal": "SIGTERM",
    }.items():
        assert keys.get(key) == [value], f"{key}={keys.get(key)}"
    assert keys["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    argv = shlex.split(keys["ExecStart"][0])
    grace = float(argv[argv.index("--shutdown-grace-secs") + 1])
    assert argv[argv.index("--data-dir") + 1] == "/var/lib/" + keys["StateDirectory"][0]
    # sluice's own flush after the drain takes up to 15 s (src/main.rs, serve).
    assert float(keys["TimeoutStopSec"][0]) >= grace + 15


def test_exec_start_serves_reloads_and_drains(host_binary, tmp_path):
    keys = service_section()
    argv = shlex.split(keys["ExecStart"][0])
    config = tmp_path / "config.yaml"
    data = tmp_path / "state"
    port = free_port()
    moved = {"/usr/local/bin/sluice": host_binary, "/etc/sluice/config.yaml": str(config),
             "/var/lib/sluice": str(data), "4000": str(port)}
    argv = [moved.get(a, a) for a in argv]
    # The image's default config: this is the image's binary, which has no mock provider.
    default_config = (ROOT / "deploy" / "config.yaml").read_text()
    config.write_text(default_config)
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        root = f"http://127.0.0.1:{port}"

        def alive():
            assert proc.poll() is None, proc.stderr.read()

        wait_http(f"{root}/health/liveliness", proc_check=alive)
        config.write_text(default_config.replace("model_name: gpt-4o-mini", "model_name: reloaded-by-sighup"))
        proc.send_signal(signal.SIGHUP)  # what ExecReload does
        deadline = time.time() + 10
        while time.time() < deadline:
            _, models = http("GET", f"{root}/v1/models", key="sk-1234")
            if "reloaded-by-sighup" in {m["id"] for m in models["data"]}:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("SIGHUP did not reload the config")
        status, _ = http("POST", f"{root}/key/generate", {}, key="sk-1234")
        assert status == 200
        started = time.time()
        proc.send_signal(signal.SIGTERM)  # what systemctl stop does (KillSignal)
        code = proc.wait(timeout=float(keys["TimeoutStopSec"][0]))
        print(f"\nExecStart exited {code} {time.time() - started:.1f} s after SIGTERM")
        assert code == 0
        assert (data / "sluice.db").exists(), "the SQLite store lives in the StateDirectory"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
