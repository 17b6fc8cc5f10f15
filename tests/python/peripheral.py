"""A BlueZ GATT peripheral posing as a proximityd node, for the test kit's outsiders (cloner.py,
relay.py): the general service with a node's three characteristics, an advertisement of the
general service UUID, and their registration on an adapter, the way BlueZ's own
test/example-advertisement and test/example-gatt-server do (dbus-python, GLib main loop).

Not proximityd's code: what a third party would write with BlueZ's documented interfaces.
"""
import dbus
import dbus.exceptions
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


def say(line):
    print(line, flush=True)


class NotSupported(dbus.DBusException):
    _dbus_error_name = "org.bluez.Error.NotSupported"


class InvalidOffset(dbus.DBusException):
    _dbus_error_name = "org.bluez.Error.InvalidOffset"


def reader(options):
    """The reader's or writer's object path as BlueZ names it (/org/bluez/hciN/dev_XX_…)."""
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


class NodeService(dbus.service.Object):
    """The general service, its identity, hello and challenge characteristics answered by
    `identity(options)`, `hello(data, options)` and `challenge(options)`."""

    def __init__(self, bus, app, general, identity, hello, challenge):
        self.path = app + "/service0"
        self.general = general
        super().__init__(bus, self.path)
        self.characteristics = [
            Characteristic(bus, 0, self, IDENTITY, ["read"], read=identity),
            Characteristic(bus, 1, self, HELLO, ["write"], write=hello),
            Characteristic(bus, 2, self, CHALLENGE, ["read"], read=challenge),
        ]

    def properties(self):
        return {SERVICE: {"UUID": self.general, "Primary": True}}


class Application(dbus.service.Object):
    def __init__(self, bus, path, service):
        super().__init__(bus, path)
        self.service = service

    @dbus.service.method(OBJECT_MANAGER, out_signature="a{oa{sa{sv}}}")
    def GetManagedObjects(self):
        objects = {dbus.ObjectPath(self.service.path): self.service.properties()}
        for c in self.service.characteristics:
            objects[dbus.ObjectPath(c.path)] = c.properties()
        return objects


class Advertisement(dbus.service.Object):
    def __init__(self, bus, path, general):
        super().__init__(bus, path)
        self.general = general

    @dbus.service.method(PROPERTIES, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        if interface != ADVERTISEMENT:
            raise dbus.exceptions.DBusException("no such interface", name="org.freedesktop.DBus.Error.InvalidArgs")
        return {"Type": "peripheral", "ServiceUUIDs": dbus.Array([self.general], signature="s")}

    @dbus.service.method(ADVERTISEMENT)
    def Release(self):
        say("released")


def serve(bus, app, app_path, ad, ad_path, loop):
    """Registers `app` and `ad` (exported at `app_path`, `ad_path`) on the bus's adapter (says "registered" once both are), runs `loop`
    until SIGTERM, SIGINT or a failed registration; the exit status."""
    objects = dbus.Interface(bus.get_object(BLUEZ, "/"), OBJECT_MANAGER).GetManagedObjects()
    adapter = next((path for path, interfaces in objects.items()
                    if GATT_MANAGER in interfaces and ADVERTISING_MANAGER in interfaces), None)
    if adapter is None:
        say("error no adapter with GattManager1 and LEAdvertisingManager1")
        return 1
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
        dbus.ObjectPath(app_path), dbus.Dictionary({}, signature="sv"),
        reply_handler=done("application"), error_handler=failed("application"))
    dbus.Interface(adapter_object, ADVERTISING_MANAGER).RegisterAdvertisement(
        dbus.ObjectPath(ad_path), dbus.Dictionary({}, signature="sv"),
        reply_handler=done("advertisement"), error_handler=failed("advertisement"))
    for number in (2, 15):  # SIGINT, SIGTERM
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, number, loop.quit)
    loop.run()
    return status[0]
