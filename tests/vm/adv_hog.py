#!/usr/bin/python3
"""Takes every advertising instance of one adapter, as another program on the box could.

Registers LEAdvertisement1 objects with BlueZ until it refuses one, prints "hogging N" and keeps
them until SIGTERM; bluetoothd drops them when this connection closes.

    adv_hog.py ADAPTER        e.g. hci2
"""
import signal
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib


class Advertisement(dbus.service.Object):
    def __init__(self, bus, index):
        self.path = f"/org/test/hog/ad{index}"
        self.index = index
        super().__init__(bus, self.path)

    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return {"Type": "broadcast", "LocalName": dbus.String(f"hog{self.index}")}

    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        return self.GetAll(interface)[name]

    @dbus.service.method("org.bluez.LEAdvertisement1")
    def Release(self):
        pass


def main():
    adapter = sys.argv[1]
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    manager = dbus.Interface(bus.get_object("org.bluez", f"/org/bluez/{adapter}"), "org.bluez.LEAdvertisingManager1")
    loop = GLib.MainLoop()
    kept = []

    # Asynchronous calls: bluetoothd reads each advertisement's properties back from this process
    # before it answers, so the main loop must run meanwhile.
    def register_next():
        ad = Advertisement(bus, len(kept))

        def registered():
            kept.append(ad)
            register_next() if len(kept) < 32 else done()

        def refused(error):
            print(f"refused after {len(kept)}: {error.get_dbus_name()}: {error.get_dbus_message()}", flush=True)
            done()

        manager.RegisterAdvertisement(ad.path, {}, reply_handler=registered, error_handler=refused, timeout=60)

    def done():
        print(f"hogging {len(kept)}", flush=True)

    register_next()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    loop.run()


if __name__ == "__main__":
    main()
