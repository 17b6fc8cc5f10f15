#!/usr/bin/env python3
"""Drive a real Home Assistant (installed by setup.sh) against a real MQTT broker.

Standard library only (Python >= 3.9), so it runs under /usr/bin/python3 or the
venv's python alike; Home Assistant itself always runs as a subprocess
(`$HA_VENV/bin/hass -c DIR --skip-pip`).

Library:
    with HomeAssistantInstance(broker_port=1883, mqtt_rooms=[("phone-1", None)]) as ha:
        ha.url, ha.token, get_states(ha.url, ha.token), entity_registry(...), watch(...)

CLI (see README.md):
    ha_harness.py start    --broker-port P [--mqtt-room ID[=NAME]]... [--state-dir D]
    ha_harness.py states   (--state-dir D | --url U --token T) [--entity E]
    ha_harness.py registry (--state-dir D | --url U --token T) [--platform mqtt]
    ha_harness.py watch    (--state-dir D | --url U --token T) --entity E --seconds N
    ha_harness.py wait     (--state-dir D | --url U --token T) --entity E [--state S] [--timeout N]
    ha_harness.py broker   [--port P]          # a throwaway mosquitto, until SIGTERM
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Iterable, Optional

DEFAULT_VENV = os.environ.get("HA_VENV") or os.path.join(
    os.path.expanduser("~"), ".cache", "proximityd-ha", "venv"
)
MOSQUITTO = os.environ.get("MOSQUITTO", "/usr/sbin/mosquitto")
OWNER = {"name": "Test Owner", "username": "test", "password": "test-password-proximityd"}


class HarnessError(Exception):
    pass


def log(msg: str) -> None:
    sys.stderr.write(f"[ha_harness {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.2,
               alive: Optional[Callable[[], None]] = None) -> Any:
    """Poll pred() until it returns a truthy value; raise HarnessError after timeout.

    alive() is called each round and may raise (e.g. the process died)."""
    deadline = time.monotonic() + timeout
    last_exc: Optional[BaseException] = None
    while True:
        if alive is not None:
            alive()
        try:
            value = pred()
            if value:
                return value
        except (OSError, HarnessError, ValueError) as exc:  # connection refused, 5xx, ...
            last_exc = exc
        if time.monotonic() >= deadline:
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}"
                               + (f" (last error: {last_exc})" if last_exc else ""))
        time.sleep(interval)


def _set_pdeathsig() -> None:
    """In the child: get SIGTERM when the harness dies (Linux), so nothing is orphaned."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def stop_process(proc: Optional[subprocess.Popen], name: str, timeout: float = 30.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log(f"{name} (pid {proc.pid}) did not stop in {timeout:.0f}s after SIGTERM; SIGKILL")
        proc.kill()
        proc.wait(10)


def rss_kib(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# ---------------------------------------------------------------- HTTP / REST

def http(method: str, url: str, token: Optional[str] = None, body: Any = None,
         form: Optional[dict] = None, timeout: float = 15.0) -> tuple[int, Any]:
    headers = {}
    data = None
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw.decode(errors="replace")
    return status, parsed


def http_ok(method: str, url: str, **kw) -> Any:
    status, parsed = http(method, url, **kw)
    if status >= 300:
        raise HarnessError(f"{method} {url} -> HTTP {status}: {parsed}")
    return parsed


# ---------------------------------------------------------------- WebSocket (RFC 6455 client)

class WebSocket:
    """Minimal blocking websocket client for Home Assistant's /api/websocket."""

    def __init__(self, base_url: str, token: str, timeout: float = 15.0):
        u = urllib.parse.urlsplit(base_url)
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        self.sock.sendall(
            (f"GET /api/websocket HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
             "Upgrade: websocket\r\nConnection: Upgrade\r\n"
             f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise HarnessError("websocket: connection closed during handshake")
            head += chunk
        head, self._buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise HarnessError(f"websocket handshake failed: {head[:200]!r}")
        self._next_id = 1
        self._pending: list = []
        msg = self.recv()
        if msg.get("type") != "auth_required":
            raise HarnessError(f"websocket: unexpected first message {msg}")
        self.send({"type": "auth", "access_token": token})
        msg = self.recv()
        if msg.get("type") != "auth_ok":
            raise HarnessError(f"websocket auth failed: {msg}")

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise HarnessError("websocket: connection closed")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = secrets.token_bytes(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, obj: dict) -> None:
        self._send_frame(0x1, json.dumps(obj).encode())

    def _recv_raw(self) -> Any:
        message = b""
        while True:
            b0, b1 = self._read_exact(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read_exact(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read_exact(8))[0]
            mask = self._read_exact(4) if b1 & 0x80 else None
            payload = self._read_exact(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:  # ping
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            if opcode == 0x8:
                raise HarnessError("websocket: closed by server")
            message += payload
            if b0 & 0x80:
                return json.loads(message)

    def recv(self, timeout: Optional[float] = None) -> dict:
        """Next message; raises socket.timeout when none arrives within timeout."""
        if self._pending:
            return self._pending.pop(0)
        if timeout is not None:
            self.sock.settimeout(max(timeout, 0.001))
        msg = self._recv_raw()
        if isinstance(msg, list):  # coalesced messages
            self._pending.extend(msg[1:])
            msg = msg[0]
        return msg

    def call(self, type_: str, timeout: float = 15.0, **fields) -> Any:
        msg_id = self._next_id
        self._next_id += 1
        self.send({"id": msg_id, "type": type_, **fields})
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise HarnessError(f"websocket: no result for {type_} in {timeout:.0f}s")
            msg = self.recv(remaining)
            if msg.get("id") == msg_id and msg.get("type") == "result":
                if not msg.get("success"):
                    raise HarnessError(f"websocket {type_} failed: {msg.get('error')}")
                return msg.get("result")

    def close(self) -> None:
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------- API helpers

def get_states(url: str, token: str) -> list:
    return http_ok("GET", f"{url}/api/states", token=token)


def get_state(url: str, token: str, entity_id: str) -> Optional[dict]:
    status, parsed = http("GET", f"{url}/api/states/{entity_id}", token=token)
    if status == 404:
        return None
    if status >= 300:
        raise HarnessError(f"GET state {entity_id} -> HTTP {status}: {parsed}")
    return parsed


def entity_registry(url: str, token: str) -> list:
    """config/entity_registry/list: entity_id, name, original_name, unique_id, platform, ..."""
    with WebSocket(url, token) as ws:
        return ws.call("config/entity_registry/list")


def config_entries(url: str, token: str, domain: Optional[str] = None) -> list:
    q = f"?domain={domain}" if domain else ""
    return http_ok("GET", f"{url}/api/config/config_entries/entry{q}", token=token)


def wait_for_state(url: str, token: str, entity_id: str, state: Optional[str] = None,
                   timeout: float = 30.0) -> dict:
    def check():
        s = get_state(url, token, entity_id)
        return s if s is not None and (state is None or s["state"] == state) else None
    return wait_until(check, timeout, f"{entity_id}" + (f" == {state!r}" if state else " to exist"))


def watch(url: str, token: str, entity_id: str, seconds: float,
          emit: Callable[[dict], None], initial: bool = False) -> int:
    """Record state changes of entity_id for `seconds` (websocket state_changed events).

    Calls emit() with {"t": unix time, "entity_id", "old", "new", "attributes", "last_changed"}.
    Returns the number of changes seen."""
    count = 0
    with WebSocket(url, token) as ws:
        ws.call("subscribe_events", event_type="state_changed")
        if initial:
            s = get_state(url, token, entity_id)
            emit({"t": time.time(), "entity_id": entity_id, "initial": True,
                  "new": s and s["state"], "attributes": s and s["attributes"],
                  "last_changed": s and s["last_changed"]})
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return count
            try:
                msg = ws.recv(remaining)
            except socket.timeout:
                return count
            if msg.get("type") != "event":
                continue
            data = msg["event"]["data"]
            if data.get("entity_id") != entity_id:
                continue
            old, new = data.get("old_state"), data.get("new_state")
            count += 1
            emit({"t": time.time(), "entity_id": entity_id,
                  "old": old and old["state"], "new": new and new["state"],
                  "attributes": new and new["attributes"],
                  "last_changed": new and new["last_changed"]})


# ---------------------------------------------------------------- mosquitto

class Mosquitto:
    """A throwaway mosquitto on 127.0.0.1 (anonymous, no persistence)."""

    def __init__(self, port: Optional[int] = None, binary: str = MOSQUITTO):
        self.port = port or free_port()
        self.binary = binary
        self.proc: Optional[subprocess.Popen] = None
        self.dir = tempfile.mkdtemp(prefix="ha-mosquitto-")

    def start(self, timeout: float = 10.0) -> "Mosquitto":
        if not os.access(self.binary, os.X_OK):
            raise HarnessError(f"{self.binary} not found: apt-get install mosquitto")
        conf = os.path.join(self.dir, "mosquitto.conf")
        with open(conf, "w") as f:
            # `user` = ourselves: as root, mosquitto would otherwise switch to the user
            # "mosquitto", and that credential change clears PDEATHSIG (orphan on SIGKILL).
            f.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    f"user {pwd.getpwuid(os.getuid()).pw_name}\n")
        self.log_path = os.path.join(self.dir, "mosquitto.log")
        self.proc = subprocess.Popen([self.binary, "-c", conf], stdout=open(self.log_path, "w"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=_set_pdeathsig)

        def alive():
            if self.proc.poll() is not None:
                raise HarnessError(f"mosquitto exited {self.proc.returncode}: "
                                   + open(self.log_path).read()[-2000:])

        def accepts():
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        wait_until(accepts, timeout, f"mosquitto on port {self.port}", alive=alive)
        return self

    def stop(self) -> None:
        stop_process(self.proc, "mosquitto", 10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------- Home Assistant

def _yaml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid YAML double-quoted scalar


class HomeAssistantInstance:
    """A Home Assistant process with its own config dir, onboarded, MQTT added via config flow.

    mqtt_rooms: [(device_id, name or None)] -> `sensor: - platform: mqtt_room` entries with the
    default timeout / away_timeout (name defaults to "<device_id> room")."""

    def __init__(self, broker_port: int, broker_host: str = "127.0.0.1",
                 mqtt_rooms: Iterable[tuple] = (), room_topic: str = "room_presence",
                 state_dir: Optional[str] = None, venv: str = DEFAULT_VENV,
                 port: Optional[int] = None, log_level: str = "info",
                 timeout: float = 240.0, discovery_prefix: str = "homeassistant",
                 allow_pip: bool = False):
        self.broker_host, self.broker_port = broker_host, broker_port
        # (device_id, name, state_topic or None: room_topic)
        self.mqtt_rooms = [(r[0], r[1] or f"{r[0]} room", r[2] if len(r) > 2 else None) for r in mqtt_rooms]
        self.room_topic = room_topic
        self.venv = venv
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_level = log_level
        self.timeout = timeout
        self.discovery_prefix = discovery_prefix
        self.allow_pip = allow_pip
        self._own_state_dir = state_dir is None
        self.state_dir = os.path.abspath(state_dir or tempfile.mkdtemp(prefix="ha-harness-"))
        self.config_dir = os.path.join(self.state_dir, "config")
        self.proc: Optional[subprocess.Popen] = None
        self.token: Optional[str] = None
        self.timings: dict = {}
        self.room_entities: dict = {}

    # -- files
    def _write_config(self, with_rooms: bool) -> None:
        os.makedirs(self.config_dir, exist_ok=True)
        lines = [
            "homeassistant:",
            "  name: proximityd-test",
            "  latitude: 52.52",
            "  longitude: 13.405",
            "  elevation: 34",
            "  unit_system: metric",
            "  time_zone: UTC",
            "  country: DE",
            "  currency: EUR",
            f"  internal_url: {self.url}",
            "http:",
            "  server_host: 127.0.0.1",
            f"  server_port: {self.port}",
            "api:",
            "auth:",
            "config:",
            "onboarding:",
            "websocket_api:",
            "logger:",
            f"  default: {self.log_level}",
        ]
        if with_rooms and self.mqtt_rooms:
            lines.append("sensor:")
            for device_id, name, topic in self.mqtt_rooms:
                lines += ["  - platform: mqtt_room",
                          f"    device_id: {_yaml_str(device_id)}",
                          f"    name: {_yaml_str(name)}",
                          f"    state_topic: {_yaml_str(topic or self.room_topic)}"]
        with open(os.path.join(self.config_dir, "configuration.yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")

    @property
    def log_path(self) -> str:
        return os.path.join(self.config_dir, "home-assistant.log")

    # -- process
    def _alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            code = self.proc.returncode if self.proc else None
            tail = ""
            try:
                tail = open(os.path.join(self.state_dir, "hass.out"), errors="replace").read()[-3000:]
            except OSError:
                pass
            raise HarnessError(f"hass exited (code {code}); output tail:\n{tail}")

    def _spawn(self) -> None:
        hass = os.path.join(self.venv, "bin", "hass")
        if not os.access(hass, os.X_OK):
            raise HarnessError(f"{hass} not found: run tests/homeassistant/setup.sh first")
        out = open(os.path.join(self.state_dir, "hass.out"), "a")
        self.proc = subprocess.Popen(
            [hass, "-c", self.config_dir, "--log-no-color", "--log-file", self.log_path]
            + ([] if self.allow_pip else ["--skip-pip"]),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            preexec_fn=_set_pdeathsig, cwd=self.state_dir)
        out.close()

    def _wait_http(self) -> None:
        def up():
            # Any HTTP answer will do (/api/onboarding is 404 once onboarding is done).
            status, _ = http("GET", f"{self.url}/api/onboarding", timeout=2)
            return status < 500
        wait_until(up, self.timeout, f"HTTP at {self.url}", alive=self._alive)

    def _wait_running(self) -> None:
        def running():
            return http_ok("GET", f"{self.url}/api/config", token=self.token,
                           timeout=5).get("state") == "RUNNING"
        wait_until(running, self.timeout, "core state RUNNING", alive=self._alive)

    def stop_hass(self, timeout: float = 60.0) -> None:
        stop_process(self.proc, "hass", timeout)

    # -- onboarding & MQTT
    def _onboard(self) -> None:
        base, client_id = self.url, self.url + "/"
        steps = http_ok("GET", f"{base}/api/onboarding")
        if any(s["step"] == "user" and s["done"] for s in steps):
            raise HarnessError(f"{self.config_dir} is already onboarded")
        code = http_ok("POST", f"{base}/api/onboarding/users",
                       body={**OWNER, "client_id": client_id, "language": "en"})["auth_code"]
        tok = http_ok("POST", f"{base}/auth/token",
                      form={"grant_type": "authorization_code", "code": code,
                            "client_id": client_id})
        access = tok["access_token"]
        http_ok("POST", f"{base}/api/onboarding/core_config", token=access, body={})
        http_ok("POST", f"{base}/api/onboarding/analytics", token=access, body={})
        http_ok("POST", f"{base}/api/onboarding/integration", token=access,
                body={"client_id": client_id, "redirect_uri": f"{base}/?auth_callback=1"})
        left = [s["step"] for s in http_ok("GET", f"{base}/api/onboarding") if not s["done"]]
        if left:
            raise HarnessError(f"onboarding steps not done: {left}")
        with WebSocket(base, access) as ws:
            self.token = ws.call("auth/long_lived_access_token",
                                 client_name="proximityd-test", lifespan=3650)

    # The core_config onboarding step starts config flows for these (as a real onboarding
    # does); their packages are not installed (--skip-pip), so remove what they created.
    ONBOARDING_SIDE_EFFECTS = ("google_translate", "met", "radio_browser", "shopping_list")

    def _remove_onboarding_entries(self) -> list:
        removed = []
        for e in config_entries(self.url, self.token):
            if e["domain"] in self.ONBOARDING_SIDE_EFFECTS:
                http_ok("DELETE", f"{self.url}/api/config/config_entries/entry/{e['entry_id']}",
                        token=self.token)
                removed.append(e["domain"])
        return removed

    def _add_mqtt(self) -> dict:
        base, t = self.url, self.token
        flow = http_ok("POST", f"{base}/api/config/config_entries/flow", token=t,
                       body={"handler": "mqtt", "show_advanced_options": False})
        if flow.get("type") != "form" or flow.get("step_id") != "broker":
            raise HarnessError(f"mqtt flow: unexpected first step {flow}")
        res = http_ok("POST", f"{base}/api/config/config_entries/flow/{flow['flow_id']}", token=t,
                      body={"broker": self.broker_host, "port": self.broker_port})
        if res.get("type") != "create_entry":
            raise HarnessError(f"mqtt flow: broker step did not create the entry: {res}")
        entry_id = res["result"]["entry_id"]
        # Options flow: discovery on, prefix given explicitly (these are also the defaults).
        opt = http_ok("POST", f"{base}/api/config/config_entries/options/flow", token=t,
                      body={"handler": entry_id})
        res = http_ok("POST", f"{base}/api/config/config_entries/options/flow/{opt['flow_id']}",
                      token=t, body={"discovery": True, "discovery_prefix": self.discovery_prefix,
                                     "birth_enable": True, "will_enable": True})
        if res.get("type") != "create_entry":
            raise HarnessError(f"mqtt options flow failed: {res}")
        return res

    def _wait_mqtt_loaded(self) -> None:
        def loaded():
            entries = config_entries(self.url, self.token, "mqtt")
            return entries and entries[0]["state"] == "loaded"
        wait_until(loaded, self.timeout, "MQTT config entry loaded", alive=self._alive)

    def _wait_rooms(self) -> None:
        # By device id, and by name (two sensors of one device on two topics).
        names = {name: device for device, name, _ in self.mqtt_rooms}

        def found():
            for s in get_states(self.url, self.token):
                a = s["attributes"]
                if s["entity_id"].startswith("sensor.") and "distance" in a \
                        and a.get("friendly_name") in names:
                    self.room_entities[names[a["friendly_name"]]] = s["entity_id"]
                    self.room_entities[a["friendly_name"]] = s["entity_id"]
            return all(name in self.room_entities for name in names)
        wait_until(found, self.timeout, "mqtt_room sensors", alive=self._alive)

    # -- lifecycle
    def start(self) -> dict:
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> dict:
        t0 = time.monotonic()
        shutil.rmtree(self.config_dir, ignore_errors=True)  # always a fresh HA
        # Boot 1: onboard and add MQTT. Without mqtt_room: it needs the MQTT entry when its
        # platform is set up, else it logs "MQTT integration is not available" and never
        # comes back. The core_config onboarding step also makes HA start config flows for
        # met, radio_browser, google_translate and shopping_list, whose packages are not
        # installed: their errors stay in boot 1's log (home-assistant.log.1).
        self._write_config(with_rooms=False)
        self._spawn()
        self._wait_http()
        t_http = time.monotonic()
        self.timings["boot1_http_s"] = round(t_http - t0, 2)
        log(f"HTTP up after {t_http - t0:.1f}s; onboarding")
        self._onboard()
        self._wait_running()
        t_onb = time.monotonic()
        self.timings["onboarding_s"] = round(t_onb - t_http, 2)
        self._add_mqtt()
        self._wait_mqtt_loaded()
        removed = self._remove_onboarding_entries()
        if removed:
            log(f"removed config entries made by onboarding: {removed}")
        t_mqtt = time.monotonic()
        self.timings["mqtt_flow_s"] = round(t_mqtt - t_onb, 2)
        log(f"onboarded in {t_onb - t_http:.1f}s, MQTT entry loaded in {t_mqtt - t_onb:.1f}s;"
            " restarting" + (" with the mqtt_room sensors" if self.mqtt_rooms else ""))
        # Boot 2: what a test talks to; an onboarded HA with the MQTT entry (and mqtt_room).
        self.stop_hass()
        t_stop = time.monotonic()
        self.timings["stop_s"] = round(t_stop - t_mqtt, 2)
        self._write_config(with_rooms=True)
        self._spawn()
        self._wait_http()
        self.timings["boot2_http_s"] = round(time.monotonic() - t_stop, 2)
        self._wait_running()
        self._wait_mqtt_loaded()
        if self.mqtt_rooms:
            self._wait_rooms()
        self.timings["boot2_ready_s"] = round(time.monotonic() - t_stop, 2)
        self.timings["total_s"] = round(time.monotonic() - t0, 2)
        info = self.info()
        with open(os.path.join(self.state_dir, "ready.json"), "w") as f:
            json.dump(info, f)
        return info

    def info(self) -> dict:
        version = None
        try:
            version = http_ok("GET", f"{self.url}/api/config", token=self.token).get("version")
        except (OSError, HarnessError):
            pass
        return {"url": self.url, "token": self.token, "version": version,
                "pid": self.proc.pid if self.proc else None,
                "state_dir": self.state_dir, "config_dir": self.config_dir,
                "log": self.log_path, "broker": f"{self.broker_host}:{self.broker_port}",
                "discovery_prefix": self.discovery_prefix, "room_topic": self.room_topic,
                "mqtt_room_entities": self.room_entities, "timings": self.timings,
                "rss_kib": rss_kib(self.proc.pid) if self.proc else None}

    def stop(self) -> None:
        self.stop_hass()
        try:
            os.remove(os.path.join(self.state_dir, "ready.json"))  # its URL/token are dead now
        except FileNotFoundError:
            pass
        if self._own_state_dir and not os.environ.get("HA_HARNESS_KEEP"):
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------- CLI

def _conn(args) -> tuple[str, str]:
    if args.url and args.token:
        return args.url.rstrip("/"), args.token
    if args.state_dir:
        with open(os.path.join(args.state_dir, "ready.json")) as f:
            info = json.load(f)
        return info["url"], info["token"]
    raise SystemExit("give --url and --token, or --state-dir of a started instance")


def _print(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class _Stop(Exception):
    pass


def _install_stop_handlers() -> None:
    def handler(signum, frame):
        raise _Stop()
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGHUP, handler)


def _serve_until_stopped(check: Callable[[], None]) -> None:
    """Block until SIGTERM/SIGINT, the parent going away, or check() raising."""
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        check()
        if os.getppid() != parent:
            log("parent exited; stopping")
            return


def cmd_start(args) -> int:
    _install_stop_handlers()
    broker = None
    ha = None
    try:
        if args.broker_port is None:
            broker = Mosquitto().start()
            log(f"started mosquitto on 127.0.0.1:{broker.port}")
        rooms = []
        for spec in args.mqtt_room:
            # DEVICE_ID[=NAME][@STATE_TOPIC]
            spec, _, topic = spec.partition("@")
            device, _, name = spec.partition("=")
            rooms.append((device, name or None, topic or None))
        ha = HomeAssistantInstance(
            broker_port=args.broker_port or broker.port, broker_host=args.broker_host,
            mqtt_rooms=rooms, room_topic=args.room_topic, state_dir=args.state_dir,
            venv=args.venv, port=args.port, log_level=args.log_level, timeout=args.timeout,
            discovery_prefix=args.discovery_prefix, allow_pip=args.allow_pip)
        if args.state_dir:
            os.makedirs(args.state_dir, exist_ok=True)
            try:
                os.remove(os.path.join(args.state_dir, "ready.json"))
            except FileNotFoundError:
                pass
        log(f"starting Home Assistant in {ha.state_dir} on {ha.url}")
        info = ha.start()
        info["own_broker"] = broker is not None
        _print(info)
        log(f"ready in {ha.timings['total_s']}s; SIGTERM to stop")

        def check():
            ha._alive()
            if broker and broker.proc.poll() is not None:
                raise HarnessError("mosquitto exited")
        _serve_until_stopped(check)
        return 0
    except _Stop:
        log("stopping")
        return 0
    except HarnessError as err:
        log(f"error: {err}")
        return 1
    finally:
        # Ignore further signals while cleaning up so hass is always stopped.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if ha:
            ha.stop()
        if broker:
            broker.stop()


def cmd_broker(args) -> int:
    _install_stop_handlers()
    broker = Mosquitto(args.port)
    try:
        broker.start()
        _print({"host": "127.0.0.1", "port": broker.port, "pid": broker.proc.pid})

        def check():
            if broker.proc.poll() is not None:
                raise HarnessError("mosquitto exited")
        _serve_until_stopped(check)
        return 0
    except _Stop:
        return 0
    except HarnessError as err:
        log(f"error: {err}")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        broker.stop()


def cmd_states(args) -> int:
    url, token = _conn(args)
    if args.entity:
        s = get_state(url, token, args.entity)
        _print(s)
        return 0 if s is not None else 3
    _print(get_states(url, token))
    return 0


def cmd_registry(args) -> int:
    url, token = _conn(args)
    entries = entity_registry(url, token)
    if args.platform:
        entries = [e for e in entries if e.get("platform") == args.platform]
    if args.brief:
        entries = [{k: e.get(k) for k in ("entity_id", "name", "original_name", "unique_id",
                                          "platform", "device_id", "disabled_by")}
                   for e in entries]
    _print(entries)
    return 0


def cmd_watch(args) -> int:
    url, token = _conn(args)
    watch(url, token, args.entity, args.seconds, _print, initial=args.initial)
    return 0


def cmd_wait(args) -> int:
    url, token = _conn(args)
    try:
        _print(wait_for_state(url, token, args.entity, args.state, args.timeout))
        return 0
    except HarnessError as err:
        log(str(err))
        return 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("start", help="start HA, onboard, add MQTT; print a JSON line; run until SIGTERM")
    s.add_argument("--broker-port", type=int, help="MQTT broker port (omit: start a mosquitto)")
    s.add_argument("--broker-host", default="127.0.0.1")
    s.add_argument("--mqtt-room", action="append", default=[], metavar="DEVICE_ID[=NAME][@TOPIC]",
                   help="add an mqtt_room sensor (default timeouts; state_topic TOPIC, else --room-topic); repeatable")
    s.add_argument("--room-topic", default="room_presence")
    s.add_argument("--state-dir", help="keep config and ready.json here (default: a temp dir, removed)")
    s.add_argument("--port", type=int, help="HTTP port (default: a free one)")
    s.add_argument("--venv", default=DEFAULT_VENV)
    s.add_argument("--log-level", default="info")
    s.add_argument("--discovery-prefix", default="homeassistant")
    s.add_argument("--timeout", type=float, default=240.0, help="for each wait, seconds")
    s.add_argument("--allow-pip", action="store_true",
                   help="diagnostic: run hass without --skip-pip (it may pip-install from PyPI)")
    s.set_defaults(func=cmd_start)

    b = sub.add_parser("broker", help="run a throwaway mosquitto on 127.0.0.1 until SIGTERM")
    b.add_argument("--port", type=int)
    b.set_defaults(func=cmd_broker)

    def conn(sp):
        sp.add_argument("--url")
        sp.add_argument("--token")
        sp.add_argument("--state-dir")

    st = sub.add_parser("states", help="GET /api/states (or one entity) as JSON")
    conn(st)
    st.add_argument("--entity")
    st.set_defaults(func=cmd_states)

    r = sub.add_parser("registry", help="entity registry (websocket config/entity_registry/list)")
    conn(r)
    r.add_argument("--platform", help="only this platform, e.g. mqtt")
    r.add_argument("--brief", action="store_true", help="only ids, names, unique_id, platform")
    r.set_defaults(func=cmd_registry)

    w = sub.add_parser("watch", help="print state changes of one entity as JSON lines for N s")
    conn(w)
    w.add_argument("--entity", required=True)
    w.add_argument("--seconds", type=float, required=True)
    w.add_argument("--initial", action="store_true", help="first print the current state")
    w.set_defaults(func=cmd_watch)

    wt = sub.add_parser("wait", help="wait until an entity exists (and has --state)")
    conn(wt)
    wt.add_argument("--entity", required=True)
    wt.add_argument("--state")
    wt.add_argument("--timeout", type=float, default=30.0)
    wt.set_defaults(func=cmd_wait)

    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
