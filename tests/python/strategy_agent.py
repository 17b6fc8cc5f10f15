#!/usr/bin/python3
"""An alert strategy outside proximityd, over D-Bus (org.proximityd.AlertStrategy1).

Registers under KEY and answers each Evaluate: a target's condition holds when it is detected and
its alert's identifier is one of --valid (or, with no --valid, every detected target). Prints one
line per event on stdout, flushed: "registered", "evaluate N" (N targets), "released".

    strategy_agent.py --address ADDRESS --key crowd [--valid ALERT …] [--hang]

--hang: never answer Evaluate (the node must drop the strategy after its timeout).
Uses dbus-python (Debian's python3-dbus) and a GLib main loop (python3-gi).
"""
import argparse
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

STRATEGY = "org.proximityd.AlertStrategy1"
MANAGER = "org.proximityd.AlertManager1"
PATH = "/org/example/strategy"


def say(line):
    print(line, flush=True)


class NotPermitted(dbus.DBusException):
    _dbus_error_name = "org.proximityd.Error.NotPermitted"


class Strategy(dbus.service.Object):
    def __init__(self, bus, node, valid, hang):
        super().__init__(bus, PATH)
        self.node = node  # the node's unique name: the only caller answered
        self.valid = set(valid)
        self.hang = hang

    @dbus.service.method(STRATEGY, in_signature="a{oa{sv}}", out_signature="a{ob}",
                         async_callbacks=("reply", "error"), sender_keyword="sender")
    def Evaluate(self, targets, reply, error, sender=None):
        if sender != self.node:
            say("refused %s" % sender)
            error(NotPermitted("only the node may ask"))
            return
        say("evaluate %d" % len(targets))
        if self.hang:
            return  # never replies
        verdicts = {}
        for path, info in targets.items():
            alert = str(info.get("Alert", ""))
            verdicts[path] = dbus.Boolean(bool(info.get("Detected", False)) and (not self.valid or alert in self.valid))
        reply(dbus.Dictionary(verdicts, signature="ob"))

    @dbus.service.method(STRATEGY, in_signature="", out_signature="", sender_keyword="sender")
    def Release(self, sender=None):
        if sender != self.node:
            raise NotPermitted("only the node may release")
        say("released")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", required=True, help="the bus the node is on")
    parser.add_argument("--name", default="org.proximityd", help="the node's bus name")
    parser.add_argument("--key", required=True)
    parser.add_argument("--valid", action="append", default=[], help="alert identifiers whose targets are valid")
    parser.add_argument("--hang", action="store_true")
    args = parser.parse_args()

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(args.address)
    Strategy(bus, bus.get_name_owner(args.name), args.valid, args.hang)
    manager = dbus.Interface(bus.get_object(args.name, "/org/proximityd"), MANAGER)
    loop = GLib.MainLoop()

    def registered():
        say("registered")

    def failed(e):
        say("error %s: %s" % (e.get_dbus_name(), e.get_dbus_message()))
        loop.quit()

    manager.RegisterStrategy(dbus.ObjectPath(PATH), args.key, reply_handler=registered, error_handler=failed)
    loop.run()
    return 1


if __name__ == "__main__":
    sys.exit(main())
