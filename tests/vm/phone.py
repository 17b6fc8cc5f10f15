#!/usr/bin/python3
"""A phone, for the real-BlueZ suite: it pairs with a box as a phone does from its Bluetooth
settings, so that `proximityctl irks enroll` on the box gets the phone's identity resolving key.

On ADAPTER it registers a pairing agent of its own (org.bluez.Agent1, capability NoInputNoOutput:
Just Works; not the default agent, so the box's bluetoothd asks proximityctl's agent for its side
of the pairing and this one only for the side this process starts), discovers (LE) until TARGET
appears, stops discovering (Linux makes no LE connection while discovery runs) and calls
Device1.Pair() on it: an outgoing pairing, as a phone makes one. In the style of BlueZ's
test/simple-agent and of foreign_peer.py.

    phone.py ADAPTER TARGET [TIMEOUT]       e.g. hci2 00:AA:01:00:00:00 60

TARGET is the box's address (as ADAPTER's bluetoothd shows the device). TIMEOUT (seconds, default
60) bounds the whole run. Prints, with the seconds since its start: each agent call, "found
TARGET", "pairing", then "paired" (and the device's Paired, Bonded, AddressType) or "pair failed:
ERROR: MESSAGE", or "timed out: ..." with what it saw. Exit status 0 when paired, 1 when the
pairing failed, 2 when it timed out, 3 when the set-up failed. It leaves the bond in place on
ADAPTER (the caller removes it).
"""
import sys
import time

import dbus
import dbus.exceptions
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

BLUEZ = "org.bluez"
AGENT = "org.bluez.Agent1"
AGENT_MANAGER = "org.bluez.AgentManager1"
ADAPTER = "org.bluez.Adapter1"
DEVICE = "org.bluez.Device1"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
PROPERTIES = "org.freedesktop.DBus.Properties"
AGENT_PATH = "/org/test/phone_agent"

START = time.monotonic()


def say(text):
    print(f"[{time.monotonic() - START:7.2f}] {text}", flush=True)


class Rejected(dbus.exceptions.DBusException):
    _dbus_error_name = "org.bluez.Error.Rejected"


class Agent(dbus.service.Object):
    """NoInputNoOutput: confirms what a phone's user would tap "Pair" on, types nothing."""

    @dbus.service.method(AGENT)
    def Release(self):
        say("agent: Release")

    @dbus.service.method(AGENT, in_signature="o")
    def RequestAuthorization(self, device):
        say(f"agent: RequestAuthorization {device}: accepted")

    @dbus.service.method(AGENT, in_signature="ou")
    def RequestConfirmation(self, device, passkey):
        say(f"agent: RequestConfirmation {device} {int(passkey):06d}: accepted")

    @dbus.service.method(AGENT, in_signature="ouq")
    def DisplayPasskey(self, device, passkey, entered):
        say(f"agent: DisplayPasskey {device} {int(passkey):06d} ({int(entered)} entered)")

    @dbus.service.method(AGENT, in_signature="os")
    def DisplayPinCode(self, device, pincode):
        say(f"agent: DisplayPinCode {device}: refused (LE only)")
        raise Rejected("no PIN codes")

    @dbus.service.method(AGENT, in_signature="o", out_signature="s")
    def RequestPinCode(self, device):
        say(f"agent: RequestPinCode {device}: refused (no input)")
        raise Rejected("no input")

    @dbus.service.method(AGENT, in_signature="o", out_signature="u")
    def RequestPasskey(self, device):
        say(f"agent: RequestPasskey {device}: refused (no input)")
        raise Rejected("no input")

    @dbus.service.method(AGENT, in_signature="os")
    def AuthorizeService(self, device, uuid):
        say(f"agent: AuthorizeService {device} {uuid}: accepted")

    @dbus.service.method(AGENT)
    def Cancel(self):
        say("agent: Cancel")


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        sys.exit(3)
    adapter, target = sys.argv[1], sys.argv[2].upper()
    timeout = int(sys.argv[3]) if len(sys.argv) == 4 else 60
    adapter_path = f"/org/bluez/{adapter}"
    device_path = f"{adapter_path}/dev_{target.replace(':', '_')}"
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    loop = GLib.MainLoop()
    status = [2]
    state = {"pairing": False, "seen": set()}

    def finish(code):
        status[0] = code
        loop.quit()

    try:
        adapter_object = bus.get_object(BLUEZ, adapter_path)
        adapter_props = dbus.Interface(adapter_object, PROPERTIES)
        adapter_iface = dbus.Interface(adapter_object, ADAPTER)
        settings = adapter_props.GetAll(ADAPTER)
        say(f"{adapter} {settings['Address']} ({settings.get('AddressType', '?')}), powered {bool(settings['Powered'])}, "
            f"pairable {bool(settings['Pairable'])}; target {target}")
        if not settings["Powered"]:
            adapter_props.Set(ADAPTER, "Powered", dbus.Boolean(True))
        # A phone bonds: without it (bluetoothd's Pairable false, the kernel's bondable off) the
        # pairing asks for no bond and no key is distributed. (In the suite the enroll's default
        # agent has made every adapter bondable already.)
        if not settings["Pairable"]:
            adapter_props.Set(ADAPTER, "Pairable", dbus.Boolean(True))
            say(f"{adapter}: Pairable set to true")
        Agent(bus, AGENT_PATH)
        manager = dbus.Interface(bus.get_object(BLUEZ, "/org/bluez"), AGENT_MANAGER)
        manager.RegisterAgent(AGENT_PATH, "NoInputNoOutput")
        say("agent registered (NoInputNoOutput, not the default agent)")
        adapter_iface.SetDiscoveryFilter({"Transport": dbus.String("le"), "DuplicateData": dbus.Boolean(False)})
    except dbus.exceptions.DBusException as error:
        say(f"set-up failed: {error.get_dbus_name()}: {error.get_dbus_message()}")
        sys.exit(3)

    def device_props():
        return dbus.Interface(bus.get_object(BLUEZ, device_path), PROPERTIES).GetAll(DEVICE)

    def paired():
        try:
            p = device_props()
            say(f"paired: Paired {bool(p.get('Paired'))}, Bonded {bool(p.get('Bonded', False))}, "
                f"AddressType {p.get('AddressType')}, Name {p.get('Name', '')!r}")
        except dbus.exceptions.DBusException as error:
            say(f"paired (the device's properties: {error.get_dbus_message()})")
        finish(0)

    def pair_failed(error):
        say(f"pair failed: {error.get_dbus_name()}: {error.get_dbus_message()}")
        finish(1)

    def pair():
        if state["pairing"]:
            return
        state["pairing"] = True
        say(f"found {target}")

        def stopped(*_):
            say("pairing")
            device = dbus.Interface(bus.get_object(BLUEZ, device_path), DEVICE)
            # Pair connects first; bluetoothd's own bound on a pairing is longer than ours.
            device.Pair(reply_handler=paired, error_handler=pair_failed, timeout=max(timeout - 1, 5))
        adapter_iface.StopDiscovery(reply_handler=stopped, error_handler=stopped)

    def added(path, interfaces):
        if DEVICE in interfaces:
            address = str(interfaces[DEVICE].get("Address", ""))
            if str(path).startswith(adapter_path + "/") and address not in state["seen"]:
                state["seen"].add(address)
                say(f"sees {address} {str(interfaces[DEVICE].get('Name', ''))!r}")
        if path == device_path:
            pair()

    bus.add_signal_receiver(added, dbus_interface=OBJECT_MANAGER, signal_name="InterfacesAdded")

    def timed_out():
        say(f"timed out after {timeout} s: {'pairing did not end' if state['pairing'] else target + ' not seen'}; "
            f"seen: {', '.join(sorted(state['seen'])) or 'nothing'}")
        finish(2)
        return False

    GLib.timeout_add_seconds(timeout, timed_out)

    def start():
        objects = dbus.Interface(bus.get_object(BLUEZ, "/"), OBJECT_MANAGER).GetManagedObjects()
        if dbus.ObjectPath(device_path) in objects:
            say(f"{target} already known to {adapter}")
            pair()
            return False
        adapter_iface.StartDiscovery(reply_handler=lambda: say("discovering"),
                                     error_handler=lambda e: (say(f"cannot discover: {e.get_dbus_message()}"), finish(3)))
        return False

    GLib.idle_add(start)
    loop.run()
    try:
        manager.UnregisterAgent(AGENT_PATH)
    except dbus.exceptions.DBusException:
        pass
    sys.exit(status[0])


if __name__ == "__main__":
    main()
