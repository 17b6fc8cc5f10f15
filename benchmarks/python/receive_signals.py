#!/usr/bin/env python3
"""Receive the dbuskit-bench signal stream with dbus-fast (asyncio) and report how fast it decoded it.

Started by `dbuskit-bench signals`. It connects to --address, installs the match rule (AddMatch
returns before anything else happens), prints "ready", then decodes every BlueZ-style
PropertiesChanged (sa{sv}as) that arrives, reading the RSSI int16 and the ManufacturerData bytes
out of each. The emitter's closing Done signal (or a disconnect, or --timeout) ends the run; the
script then prints one JSON line: received, first/last (CLOCK_MONOTONIC seconds, comparable with the
bench's own clock), CPU seconds used between the first signal and the end, and the sum of the RSSI
values it decoded.
"""

import argparse
import asyncio
import importlib.metadata
import json
import resource
import sys
import time

from dbus_fast import Message, MessageType
from dbus_fast.aio import MessageBus

COMPANY_ID = 0x004C


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Receiver:
    __slots__ = ("received", "first", "last", "cpu_at_first", "rssi_sum", "data_bytes",
                 "malformed", "done", "sent", "finished")

    def __init__(self, finished: asyncio.Future) -> None:
        self.received = 0
        self.first = None
        self.last = None
        self.cpu_at_first = None
        self.rssi_sum = 0
        self.data_bytes = 0
        self.malformed = 0
        self.done = False
        self.sent = None
        self.finished = finished

    def handle(self, msg: Message) -> None:
        if msg.message_type is not MessageType.SIGNAL:
            return
        member = msg.member
        if member == "PropertiesChanged":
            try:
                changed = msg.body[1]
                self.rssi_sum += changed["RSSI"].value
                self.data_bytes += len(changed["ManufacturerData"].value[COMPANY_ID].value)
            except (KeyError, IndexError, TypeError, AttributeError):
                self.malformed += 1
            now = time.monotonic()
            if self.first is None:
                self.first = now
                self.cpu_at_first = cpu_seconds()
            self.last = now
            self.received += 1
        elif member == "Done":
            self.done = True
            self.sent = msg.body[0]
            if not self.finished.done():
                self.finished.set_result("done")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="D-Bus address of the bus")
    parser.add_argument("--match", required=True, help="match rule to install with AddMatch")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    args = parser.parse_args()

    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    receiver = Receiver(finished)
    bus = await MessageBus(bus_address=args.address).connect()
    bus.add_message_handler(receiver.handle)
    reply = await bus.call(Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                                   interface="org.freedesktop.DBus", member="AddMatch",
                                   signature="s", body=[args.match]))
    if reply.message_type is MessageType.ERROR:
        print(f"AddMatch failed: {reply.error_name}: {reply.body}", file=sys.stderr)
        return 1
    print("ready", flush=True)

    def disconnected(_future: asyncio.Future) -> None:
        if not finished.done():
            finished.set_result("disconnected")

    asyncio.ensure_future(bus.wait_for_disconnect()).add_done_callback(disconnected)
    try:
        reason = await asyncio.wait_for(finished, args.timeout)
    except asyncio.TimeoutError:
        reason = "timeout"
    cpu = cpu_seconds() - receiver.cpu_at_first if receiver.cpu_at_first is not None else 0.0
    print(json.dumps({
        "subscriber": "dbus-fast",
        "library": f"dbus-fast {importlib.metadata.version('dbus-fast')}, Python {sys.version.split()[0]}",
        "received": receiver.received,
        "first": receiver.first,
        "last": receiver.last,
        "cpuSeconds": cpu,
        "rssiSum": receiver.rssi_sum,
        "dataBytes": receiver.data_bytes,
        "malformed": receiver.malformed,
        "sawDone": receiver.done,
        "end": reason,
    }), flush=True)
    if reason != "disconnected":
        bus.disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
