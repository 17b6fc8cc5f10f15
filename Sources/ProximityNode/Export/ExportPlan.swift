import DBusKit
import ProximityCore

/// What the bus exporter changes to make the exported `Peer1` objects show a report: the objects
/// to remove, the properties to update, the objects to add. Pure, so the diff is tested alone.
///
/// The exporter applies it in this order, then emits `FoundDevices`: a client that sees the
/// signal finds every object it names, and no object of a peer it no longer lists.
struct ExportPlan: Sendable, Equatable {
    var unexport: [PeerID] = []
    /// Only the properties that changed, by peer.
    var update: [PeerID: [String: DBusValue]] = [:]
    var export: [PeerState] = []

    init(from exported: [PeerID: PeerState], to report: NodeReport) {
        var remaining = Set(exported.keys)
        for peer in report.peers {
            guard let previous = exported[peer.identifier] else {
                export.append(peer)
                continue
            }
            remaining.remove(peer.identifier)
            guard previous != peer else { continue }
            let before = previous.busValues
            let changed = peer.busValues.filter { before[$0.key] != $0.value && !PeerState.constantProperties.contains($0.key) }
            if !changed.isEmpty { update[peer.identifier] = changed }
        }
        unexport = remaining.sorted()
    }

    var isEmpty: Bool { unexport.isEmpty && update.isEmpty && export.isEmpty }
}

extension PeerState {
    /// Properties that never change while the peer is exported.
    static let constantProperties: Set<String> = ["Identifier", "Kind", "FirstSeen", "Major", "Minor", "Namespace", "Instance", "URL"]

    /// The peer's `org.proximityd.Peer1` properties (`dbus/org.proximityd.Peer1.xml`). The
    /// kind-specific ones are present only for peers of that kind.
    var busValues: [String: DBusValue] {
        var values: [String: DBusValue] = [
            "Identifier": .string(identifier.rawValue),
            "Kind": .string(kind.rawValue),
            "Address": .string(address),
            "Name": .string(name),
            "RSSI": .int16(rssi),
            "SmoothedRSSI": .double(smoothedRSSI),
            "MeasuredPower": .int16(measuredPower),
            "Distance": .double(distance),
            "Proximity": .string(proximity.rawValue),
            "FirstSeen": .uint64(firstSeen),
            "LastSeen": .uint64(lastSeen),
        ]
        if let (major, minor) = beacon?.majorMinor {
            values["Major"] = .uint16(major)
            values["Minor"] = .uint16(minor)
        }
        if let (namespace, instance) = beacon?.namespaceAndInstance {
            values["Namespace"] = .string(namespace)
            values["Instance"] = .string(instance)
        }
        if let url = beacon?.url { values["URL"] = .string(url) }
        return values
    }
}
