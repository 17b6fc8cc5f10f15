#!/usr/bin/python3
"""A strategy agent for proximityd (docs/alerts.md, "Strategies decided by a client").

The strategy "crowd": an alert's condition holds for a target when the target is in the alert's
range (by its comparison, as the default strategy decides) and at least MIN_CROWD targets of that
alert are in range at once. Alerts use it with Strategy "crowd" (strategy: crowd in the config
file).

    crowd-strategy.py                      # the system bus (root or group proximityd)
    crowd-strategy.py unix:path=/tmp/box1/bus

Needs python3-dbus and python3-gi (Debian).
"""
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

KEY = "crowd"
PATH = "/org/example/crowd"
MIN_CROWD = 2
ZONES = {"immediate": 0, "near": 1, "far": 2}  # "unknown" is never in range


def in_range(target):
    zone, wanted = ZONES.get(target["Proximity"]), ZONES[target["Range"]]
    if not target["Detected"] or zone is None:
        return False
    return {"=": zone == wanted, "<=": zone <= wanted, ">=": zone >= wanted}[target["Comparison"]]


class NotPermitted(dbus.DBusException):
    _dbus_error_name = "org.proximityd.Error.NotPermitted"


class Crowd(dbus.service.Object):
    def __init__(self, bus, node):
        super().__init__(bus, PATH)
        self.node = node  # the node's unique name: anyone on the bus can call this object

    @dbus.service.method("org.proximityd.AlertStrategy1", in_signature="a{oa{sv}}", out_signature="a{ob}",
                         sender_keyword="sender")
    def Evaluate(self, targets, sender=None):
        if sender != self.node:
            raise NotPermitted("only the node may ask")
        crowd = {}
        for target in targets.values():
            if in_range(target):
                crowd[target["Alert"]] = crowd.get(target["Alert"], 0) + 1
        return dbus.Dictionary({path: in_range(t) and crowd[t["Alert"]] >= MIN_CROWD for path, t in targets.items()},
                               signature="ob")

    @dbus.service.method("org.proximityd.AlertStrategy1", in_signature="", out_signature="", sender_keyword="sender")
    def Release(self, sender=None):
        if sender != self.node:
            raise NotPermitted("only the node may release")
        print("crowd: the node dropped the strategy", file=sys.stderr)
        loop.quit()


def failed(error):
    print(f"crowd: {error.get_dbus_name()}: {error.get_dbus_message()}", file=sys.stderr)
    loop.quit()


DBusGMainLoop(set_as_default=True)
bus = dbus.bus.BusConnection(sys.argv[1]) if len(sys.argv) > 1 else dbus.SystemBus()
strategy = Crowd(bus, bus.get_name_owner("org.proximityd"))
loop = GLib.MainLoop()
# Asynchronously: the node introspects PATH during the call, so this process must keep serving.
bus.get_object("org.proximityd", "/org/proximityd").RegisterStrategy(
    dbus.ObjectPath(PATH), KEY, dbus_interface="org.proximityd.AlertManager1",
    reply_handler=lambda: print(f"crowd: registered as {KEY!r}", file=sys.stderr), error_handler=failed)
try:
    loop.run()
except KeyboardInterrupt:
    pass
