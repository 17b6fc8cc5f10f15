import DBusKit
import ProximityAPI
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
            // A constant property never changes while exported (a beacon's frame fields, FirstSeen).
            let changed = peer.properties.changes(since: previous.properties).filter {
                PeerProperties.Key(rawValue: $0.key)?.descriptor.isConst == false
            }
            if !changed.isEmpty { update[peer.identifier] = changed }
        }
        unexport = remaining.sorted()
    }

    var isEmpty: Bool { unexport.isEmpty && update.isEmpty && export.isEmpty }
}

extension PeerState {
    /// The peer as `org.proximityd.Peer1` shows it (ProximityAPI spells the names and types).
    var properties: PeerProperties {
        let (major, minor) = beacon?.majorMinor.map { (Optional($0.major), Optional($0.minor)) } ?? (nil, nil)
        let (namespace, instance) = beacon?.namespaceAndInstance.map { (Optional($0.namespace), Optional($0.instance)) } ?? (nil, nil)
        return PeerProperties(
            identifier: identifier.rawValue, kind: kind.rawValue, address: address, name: name, rssi: rssi,
            smoothedRSSI: smoothedRSSI, measuredPower: measuredPower, distance: distance, proximity: proximity.rawValue,
            firstSeen: firstSeen, lastSeen: lastSeen, major: major, minor: minor, namespace: namespace, instance: instance,
            url: beacon?.url)
    }
}
