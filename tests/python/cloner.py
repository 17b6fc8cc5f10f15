#!/usr/bin/python3
"""A cloner: a BlueZ peripheral, not proximityd's code, that passes itself off as a node by serving
an identity it copied.

Registers on the adapter of the bus given (a box of bluez-sim, or a bluetoothd), the way BlueZ's
own test/example-advertisement and test/example-gatt-server do (dbus-python, GLib main loop):

- an advertisement (LEAdvertisement1, peripheral) with the general service UUID, as a node's;
- a GATT application with the general service and an open node's three characteristics: the
  identity (5830b129-…, read) serving IDENTITY as an open node serves its own (36 lowercase ASCII
  characters), the hello (5830b12a-…, write, any value taken) and the challenge (5830b12b-…,
  read, answering NotSupported as an open node does).

Prints one line per event on stdout, flushed: "registered" once both are registered, then
"read identity DEVICE", "read challenge DEVICE", "hello DEVICE HEX" (DEVICE: the reader's or
writer's object path as BlueZ names it, /org/bluez/hciN/dev_XX_…), "released".

    cloner.py --address BUS_ADDRESS --identity UUID [--service-uuid UUID]

Uses Debian's python3-dbus and python3-gi (scripts/setup.sh). Ends on SIGTERM or SIGINT.
"""
import argparse
import sys
import uuid

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

import peripheral
from peripheral import NotSupported, offset, reader, say

APP = "/org/example/cloner"
AD = "/org/example/cloner/advertisement0"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", required=True, help="the bus bluetoothd (bluez-sim's box) is on")
    parser.add_argument("--identity", required=True, type=uuid.UUID, help="the identity to serve (copied from a node)")
    parser.add_argument("--service-uuid", default=peripheral.GENERAL, help="the general service UUID")
    args = parser.parse_args()
    general = args.service_uuid.lower()

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.address)
    loop = GLib.MainLoop()
    value = list(str(args.identity).lower().encode("ascii"))

    def read_identity(options):
        if offset(options) == 0:
            say(f"read identity {reader(options)}")
        return value

    def read_challenge(options):
        say(f"read challenge {reader(options)}")
        raise NotSupported("this node is not in a trusted fleet: it has no challenge")

    def hello(data, options):
        say(f"hello {reader(options)} {data.hex()}")

    service = peripheral.NodeService(bus, APP, general, read_identity, hello, read_challenge)
    app = peripheral.Application(bus, APP, service)
    ad = peripheral.Advertisement(bus, AD, general)
    status = peripheral.serve(bus, app, APP, ad, AD, loop)
    del app, ad
    return status


if __name__ == "__main__":
    sys.exit(main())
