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
import signal
import sys
import uuid

import dbus
import dbus.exceptions
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
PROPERTIES = "org.freedesktop.DBus.Properties"
GATT_MANAGER = "org.bluez.GattManager1"
ADVERTISING_MANAGER = "org.bluez.LEAdvertisingManager1"
SERVICE = "org.bluez.GattService1"
CHARACTERISTIC = "org.bluez.GattCharacteristic1"
ADVERTISEMENT = "org.bluez.LEAdvertisement1"

# proximityd's (docs/bluez-client.md): the general service UUID's default and its characteristics.
GENERAL = "b89491c9-43dd-4d75-bf16-dff381aed967"
IDENTITY = "5830b129-79a9-4a7e-be31-5d76f8856c51"
HELLO = "5830b12a-79a9-4a7e-be31-5d76f8856c51"
CHALLENGE = "5830b12b-79a9-4a7e-be31-5d76f8856c51"

APP = "/org/example/cloner"
AD = "/org/example/cloner/advertisement0"


def say(line):
    print(line, flush=True)


class NotSupported(dbus.DBusException):
    _dbus_error_name = "org.bluez.Error.NotSupported"


class InvalidOffset(dbus.DBusException):
    _dbus_error_name = "org.bluez.Error.InvalidOffset"


def reader(options):
    return str(options.get("device", "?"))


def offset(options):
    return int(options.get("offset", 0))


class Characteristic(dbus.service.Object):
    def __init__(self, bus, index, service, uuid_, flags, read=None, write=None):
        self.path = f"{service.path}/char{index}"
        self.uuid = uuid_
        self.flags = flags
        self.service = service
        self.on_read = read
        self.on_write = write
        super().__init__(bus, self.path)

    def properties(self):
        return {CHARACTERISTIC: {"Service": dbus.ObjectPath(self.service.path), "UUID": self.uuid,
                                 "Flags": dbus.Array(self.flags, signature="s")}}

    @dbus.service.method(CHARACTERISTIC, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        if self.on_read is None:
            raise NotSupported("not readable")
        value = self.on_read(options)
        at = offset(options)
        if at > len(value):
            raise InvalidOffset("Invalid offset")
        return dbus.Array(value[at:], signature="y")

    @dbus.service.method(CHARACTERISTIC, in_signature="aya{sv}")
    def WriteValue(self, value, options):
        if self.on_write is None:
            raise NotSupported("not writable")
        self.on_write(bytes(value), options)


class Service(dbus.service.Object):
    def __init__(self, bus, identity):
        self.path = APP + "/service0"
        super().__init__(bus, self.path)
        value = list(str(identity).lower().encode("ascii"))

        def read_identity(options):
            if offset(options) == 0:
                say(f"read identity {reader(options)}")
            return value

        def read_challenge(options):
            say(f"read challenge {reader(options)}")
            raise NotSupported("this node is not in a trusted fleet: it has no challenge")

        def hello(data, options):
            say(f"hello {reader(options)} {data.hex()}")

        self.characteristics = [
            Characteristic(bus, 0, self, IDENTITY, ["read"], read=read_identity),
            Characteristic(bus, 1, self, HELLO, ["write"], write=hello),
            Characteristic(bus, 2, self, CHALLENGE, ["read"], read=read_challenge),
        ]

    def properties(self):
        return {SERVICE: {"UUID": GENERAL, "Primary": True}}


class Application(dbus.service.Object):
    def __init__(self, bus, identity):
        super().__init__(bus, APP)
        self.service = Service(bus, identity)

    @dbus.service.method(OBJECT_MANAGER, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        objects = {dbus.ObjectPath(self.service.path): self.service.properties()}
        for c in self.service.characteristics:
            objects[dbus.ObjectPath(c.path)] = c.properties()
        return objects


class Advertisement(dbus.service.Object):
    def __init__(self, bus, loop):
        super().__init__(bus, AD)
        self.loop = loop

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != ADVERTISEMENT:
            raise dbus.exceptions.DBusException("no such interface", name="org.freedesktop.DBus.Error.InvalidArgs")
        return {"Type": "peripheral", "ServiceUUIDs": dbus.Array([GENERAL], signature="s")}

    @dbus.service.method(ADVERTISEMENT)
    def Release(self):
        say("released")


def main():
    global GENERAL
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", required=True, help="the bus bluetoothd (bluez-sim's box) is on")
    parser.add_argument("--identity", required=True, type=uuid.UUID, help="the identity to serve (copied from a node)")
    parser.add_argument("--service-uuid", default=GENERAL, help="the general service UUID")
    args = parser.parse_args()
    GENERAL = args.service_uuid.lower()

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.address)
    loop = GLib.MainLoop()
    objects = dbus.Interface(bus.get_object(BLUEZ, "/"), OBJECT_MANAGER).GetManagedObjects()
    adapter = next((path for path, interfaces in objects.items()
                    if GATT_MANAGER in interfaces and ADVERTISING_MANAGER in interfaces), None)
    if adapter is None:
        say("error no adapter with GattManager1 and LEAdvertisingManager1")
        return 1

    app = Application(bus, args.identity)
    ad = Advertisement(bus, loop)
    pending = {"application", "advertisement"}
    status = [0]

    def done(what):
        def reply():
            pending.discard(what)
            if not pending:
                say("registered")
        return reply

    def failed(what):
        def error(e):
            say(f"error {what}: {e.get_dbus_name()}: {e.get_dbus_message()}")
            status[0] = 1
            loop.quit()
        return error

    adapter_object = bus.get_object(BLUEZ, adapter)
    dbus.Interface(adapter_object, GATT_MANAGER).RegisterApplication(
        dbus.ObjectPath(APP), dbus.Dictionary({}, signature="sv"),
        reply_handler=done("application"), error_handler=failed("application"))
    dbus.Interface(adapter_object, ADVERTISING_MANAGER).RegisterAdvertisement(
        dbus.ObjectPath(AD), dbus.Dictionary({}, signature="sv"),
        reply_handler=done("advertisement"), error_handler=failed("advertisement"))
    for number in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, number, loop.quit)
    loop.run()
    del app, ad
    return status[0]


if __name__ == "__main__":
    sys.exit(main())
