import DBusKit

/// The faults users of BlueZ scanners meet on boxes nobody looks at, for the node's watchdog to be
/// tested against (docs/simulator.md, "Faults"):
///
/// - **a deaf scanner**: discovery goes on showing `Discovering: true` and delivers nothing, until
///   the adapter is powered off and on (as a controller reset clears a wedged firmware) or the
///   fault is cleared;
/// - **an adapter unplugged** (a USB dongle off the bus): its object goes (`InterfacesRemoved`),
///   with its devices, advertisements (released) and applications, and its links drop; bluetoothd
///   stays. **Replugged**, it comes back, under the same `hciN` or another, off, and bluetoothd
///   powers it shortly after (`AutoEnable`), as after a restart.
extension Air {
    /// Makes `box`'s scanner deaf, or clears that.
    public func setDeaf(box name: String, _ deaf: Bool) throws(ControlError) {
        guard boxes[name] != nil else { throw .unknownBox(name) }
        boxes[name]?.deaf = deaf
        if deaf {
            boxes[name]?.pendingReports = []
            boxes[name]?.batchDue = nil
        }
    }

    /// Takes `box`'s adapter off its bluetoothd, as a dongle pulled out.
    public func unplug(box name: String) throws(ControlError) {
        guard var b = boxes[name] else { throw .unknownBox(name) }
        guard let tree = b.tree else { throw .invalidArguments("\(name)'s bluetoothd is not running") }
        guard b.plugged else { throw .invalidArguments("\(name)'s adapter is unplugged already") }
        dropConnections(involving: name)
        b = boxes[name]!
        let releases = b.advertisements.map { ($0.owner, $0.path) }
        tree.removeSubtree(b.adapterPath)
        b.plugged = false
        b.deaf = false
        b.clearAdapter()
        b.adapter.powered = false
        boxes[name] = b
        removeAdvertisementTimers(name)
        for (owner, path) in releases { Self.release(owner: owner, path: path, on: tree.connection) }
    }

    /// Puts `box`'s adapter back, as `adapter` (`hciN`) when given: off at first, powered by
    /// bluetoothd shortly after.
    public func replug(box name: String, as adapter: String? = nil) throws(ControlError) {
        guard var b = boxes[name] else { throw .unknownBox(name) }
        guard let tree = b.tree else { throw .invalidArguments("\(name)'s bluetoothd is not running") }
        guard !b.plugged else { throw .invalidArguments("\(name)'s adapter is plugged in") }
        if let adapter, !adapter.isEmpty {
            guard BoxSpec.isValidAdapter(adapter) else { throw .invalidArguments("\"\(adapter)\" is not an adapter name (hci0 … hci999)") }
            b.spec.adapter = adapter
        }
        b.plugged = true
        b.adapter = Box.freshAdapter(b.spec)
        b.adapter.powered = false
        b.autoEnabling = true
        boxes[name] = b
        timers.append(Timer(time: clock.now + Self.autoEnableDelay, action: .autoEnable(box: name, generation: b.generation)))
        let ctx = BoxContext(air: self, box: name, generation: b.generation)
        tree.add(b.adapterPath, [
            (adapterTemplate(ctx), b.adapter.properties(uuids: adapterUUIDs(b))),
            (gattManagerTemplate(ctx), [:]),
            (advertisingManagerTemplate(ctx), advertisingManagerProperties(b)),
        ])
        restoreBonds(name)
    }

    /// bluetoothd shows the devices it has bonds with, from its storage, as it takes an adapter.
    func restoreBonds(_ name: String) {
        guard let b = boxes[name] else { return }
        for bond in b.bonds.values.sorted(by: { $0.identity < $1.identity }) {
            var dev = DeviceState(address: bond.identity, adapter: b.spec.adapter, now: clock.now)
            dev.addressType = bond.identityType
            dev.paired = true
            dev.temporary = false
            boxes[name]?.devices[bond.identity] = dev
            publish(box: name, dev, isNew: true)
        }
    }
}
