#!/usr/bin/env python3
"""Receive the dbuskit-bench signal stream with dbus-python and a GLib main loop; report how fast it decoded it.

The dbus-python twin of receive_signals.py (same arguments, same "ready" line, same JSON result).
Run it with an interpreter that has python3-dbus and python3-gi, such as Debian's /usr/bin/python3.
add_signal_receiver installs the match rule with a blocking AddMatch, so "ready" is printed only
once the bus routes the stream to us. Each PropertiesChanged is decoded by dbus-python into Python
values; the handler reads the RSSI and the ManufacturerData bytes.
"""

import argparse
import json
import resource
import sys
import time

import dbus
import dbus.bus
import dbus.mainloop.glib
from gi.repository import GLib

COMPANY_ID = 0x004C


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def match_keywords(rule: str) -> dict:
    """The keyword arguments of add_signal_receiver for a rule such as type='signal',path='/x'."""
    keys = {"path": "path", "interface": "dbus_interface", "member": "signal_name", "sender": "bus_name"}
    out = {}
    for part in rule.split(","):
        key, _, value = part.partition("=")
        if key in keys:
            out[keys[key]] = value.strip("'")
    return out


class Receiver:
    def __init__(self, loop: GLib.MainLoop) -> None:
        self.loop = loop
        self.received = 0
        self.first = None
        self.last = None
        self.cpu_at_first = None
        self.rssi_sum = 0
        self.data_bytes = 0
        self.malformed = 0
        self.done = False
        self.end = "timeout"

    def handle(self, *args, member=None):
        if member == "PropertiesChanged":
            try:
                changed = args[1]
                self.rssi_sum += int(changed["RSSI"])
                self.data_bytes += len(changed["ManufacturerData"][COMPANY_ID])
            except (KeyError, IndexError, TypeError):
                self.malformed += 1
            now = time.monotonic()
            if self.first is None:
                self.first = now
                self.cpu_at_first = cpu_seconds()
            self.last = now
            self.received += 1
        elif member == "Done":
            self.done = True
            self.end = "done"
            self.loop.quit()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="D-Bus address of the bus")
    parser.add_argument("--match", required=True, help="match rule to install")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    args = parser.parse_args()

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    loop = GLib.MainLoop()
    receiver = Receiver(loop)
    bus = dbus.bus.BusConnection(args.address)

    def disconnected(_connection):
        receiver.end = "disconnected"
        loop.quit()

    bus.call_on_disconnection(disconnected)
    bus.add_signal_receiver(receiver.handle, member_keyword="member", **match_keywords(args.match))
    print("ready", flush=True)
    GLib.timeout_add(int(args.timeout * 1000), loop.quit)
    loop.run()
    cpu = cpu_seconds() - receiver.cpu_at_first if receiver.cpu_at_first is not None else 0.0
    print(json.dumps({
        "subscriber": "dbus-python",
        "library": f"dbus-python {dbus.__version__}, Python {sys.version.split()[0]}",
        "received": receiver.received,
        "first": receiver.first,
        "last": receiver.last,
        "cpuSeconds": cpu,
        "rssiSum": receiver.rssi_sum,
        "dataBytes": receiver.data_bytes,
        "malformed": receiver.malformed,
        "sawDone": receiver.done,
        "end": receiver.end,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
