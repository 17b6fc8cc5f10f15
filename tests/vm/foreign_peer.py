#!/usr/bin/python3
"""A foreign peer: a BLE peripheral that is not proximityd, for the real-BlueZ suite.

It advertises the general service UUID (connectable, through org.bluez.LEAdvertisingManager1) and
serves, through org.bluez.GattManager1, a GATT application with the general service and only the
identity characteristic: a read answers IDENTITY as ASCII text. It has no hello characteristic, so
a node must read it. In the style of BlueZ's test/example-gatt-server and
test/example-advertisement.

    foreign_peer.py ADAPTER IDENTITY        e.g. hci1 0f3c2b1e-...

Prints "registered the GATT application", then "advertising" once BlueZ took the advertisement,
and one line for each ReadValue BlueZ forwards ("read by DEVICE at OFFSET"). Runs until SIGTERM;
bluetoothd drops both registrations when this connection closes.
"""
import signal
import sys
import time

import dbus
import dbus.exceptions
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
GATT_MANAGER = "org.bluez.GattManager1"
ADVERTISING_MANAGER = "org.bluez.LEAdvertisingManager1"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
PROPERTIES = "org.freedesktop.DBus.Properties"
GATT_SERVICE = "org.bluez.GattService1"
GATT_CHARACTERISTIC = "org.bluez.GattCharacteristic1"
ADVERTISEMENT = "org.bluez.LEAdvertisement1"

# ProximityUUIDs (Sources/BlueZ/BlueZ.swift): the general service and the identity characteristic.
GENERAL_SERVICE = "b89491c9-43dd-4d75-bf16-dff381aed967"
IDENTITY_CHARACTERISTIC = "5830b129-79a9-4a7e-be31-5d76f8856c51"

START = time.monotonic()


def say(text):
    print(f"[{time.monotonic() - START:7.2f}] {text}", flush=True)


class InvalidArgsException(dbus.exceptions.DBusException):
    _dbus_error_name = "org.freedesktop.DBus.Error.InvalidArgs"


class InvalidOffsetException(dbus.exceptions.DBusException):
    _dbus_error_name = "org.bluez.Error.InvalidOffset"


class Application(dbus.service.Object):
    """org.bluez.GattApplication1: the object manager BlueZ reads the services from."""

    def __init__(self, bus, identity):
        self.path = "/org/test/foreign"
        super().__init__(bus, self.path)
        self.service = Service(bus, self.path + "/service0")
        self.characteristic = IdentityCharacteristic(bus, self.service, identity)

    @dbus.service.method(OBJECT_MANAGER, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        return {
            dbus.ObjectPath(self.service.path): self.service.get_properties(),
            dbus.ObjectPath(self.characteristic.path): self.characteristic.get_properties(),
        }


class Service(dbus.service.Object):
    def __init__(self, bus, path):
        self.path = path
        self.characteristics = []
        super().__init__(bus, path)

    def get_properties(self):
        return {GATT_SERVICE: {
            "UUID": GENERAL_SERVICE,
            "Primary": True,
            "Characteristics": dbus.Array([dbus.ObjectPath(c) for c in self.characteristics], signature="o"),
        }}

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != GATT_SERVICE:
            raise InvalidArgsException()
        return self.get_properties()[GATT_SERVICE]


class IdentityCharacteristic(dbus.service.Object):
    """Read only: the identity as ASCII text. No hello (write) characteristic exists."""

    def __init__(self, bus, service, identity):
        self.path = service.path + "/char0"
        self.service = service
        self.value = identity.encode("ascii")
        service.characteristics.append(self.path)
        super().__init__(bus, self.path)

    def get_properties(self):
        return {GATT_CHARACTERISTIC: {
            "Service": dbus.ObjectPath(self.service.path),
            "UUID": IDENTITY_CHARACTERISTIC,
            "Flags": dbus.Array(["read"], signature="s"),
        }}

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != GATT_CHARACTERISTIC:
            raise InvalidArgsException()
        return self.get_properties()[GATT_CHARACTERISTIC]

    @dbus.service.method(GATT_CHARACTERISTIC, in_signature="a{sv}", out_signature="ay")
    def ReadValue(self, options):
        offset = int(options.get("offset", 0))
        say(f"read by {options.get('device', '?')} at {offset} (mtu {int(options.get('mtu', 0))})")
        if offset > len(self.value):
            raise InvalidOffsetException()
        return dbus.Array(self.value[offset:], signature="y")


class Advertisement(dbus.service.Object):
    """org.bluez.LEAdvertisement1: connectable, the general service UUID and a short name."""

    def __init__(self, bus):
        self.path = "/org/test/foreign_advertisement0"
        super().__init__(bus, self.path)

    def get_properties(self):
        return {
            "Type": "peripheral",
            "ServiceUUIDs": dbus.Array([GENERAL_SERVICE], signature="s"),
            "LocalName": dbus.String("foreign"),
        }

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != ADVERTISEMENT:
            raise InvalidArgsException()
        return self.get_properties()

    @dbus.service.method(ADVERTISEMENT)
    def Release(self):
        say("advertisement released")


def main():
    adapter, identity = sys.argv[1], sys.argv[2].lower()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    adapter_object = bus.get_object(BLUEZ, f"/org/bluez/{adapter}")
    gatt_manager = dbus.Interface(adapter_object, GATT_MANAGER)
    advertising_manager = dbus.Interface(adapter_object, ADVERTISING_MANAGER)
    loop = GLib.MainLoop()
    application = Application(bus, identity)
    advertisement = Advertisement(bus)
    status = [0]

    def failed(what):
        def handler(error):
            say(f"cannot register the {what}: {error.get_dbus_name()}: {error.get_dbus_message()}")
            status[0] = 1
            loop.quit()
        return handler

    # Asynchronous calls: bluetoothd reads the objects back from this process before it answers,
    # so the main loop must run meanwhile. The application first, so that a node that finds the
    # advertisement finds the service too.
    def advertise():
        say("registered the GATT application")
        advertising_manager.RegisterAdvertisement(advertisement.path, {}, reply_handler=lambda: say("advertising"),
                                                  error_handler=failed("advertisement"), timeout=60)

    gatt_manager.RegisterApplication(application.path, {}, reply_handler=advertise,
                                     error_handler=failed("GATT application"), timeout=60)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    say(f"identity {identity} on {adapter}")
    loop.run()
    sys.exit(status[0])


if __name__ == "__main__":
    main()
