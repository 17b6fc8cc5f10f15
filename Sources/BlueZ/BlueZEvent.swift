import DBusKit

/// What changed in BlueZ's object tree, as ``BlueZObjectMirror`` publishes it, in the order it
/// happened.
///
/// Device and adapter events carry the typed view *after* the change, so a consumer never has to
/// query the mirror to act on one. Remote GATT objects produce no events; look them up with
/// ``BlueZObjectMirror/characteristics(under:)`` once the device's `ServicesResolved` is true.
public enum BlueZEvent: Sendable, Hashable {
    case adapterAdded(AdapterInfo)
    /// `changed` names the properties that were set or invalidated (`Powered`, `Discovering`, …).
    case adapterChanged(AdapterInfo, changed: Set<String>)
    case adapterRemoved(ObjectPath)
    case deviceAdded(DeviceInfo)
    /// `changed` names the properties that were announced (set or invalidated). Under a discovery
    /// filter BlueZ announces `RSSI` at every report, even unchanged: each event whose `changed`
    /// holds `RSSI` is one sample.
    case deviceChanged(DeviceInfo, changed: Set<String>)
    case deviceRemoved(ObjectPath)
    /// `org.bluez` lost its owner (bluetoothd stopped or crashed). The mirror is empty: every
    /// adapter and device is gone, without a removal event for each, and every advertisement and
    /// GATT application registered with that bluetoothd is forgotten.
    case bluezGone
    /// `org.bluez` has a new owner and the mirror was rebuilt from its objects. The adapter and
    /// device added events of the new tree follow. Anything registered with the previous
    /// bluetoothd (advertisements, applications, discovery filters) must be registered again.
    case bluezRestarted
}
