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
    var export: [PeerProperties] = []

    /// `peers`: a report's peers as `Peer1` shows them.
    init(from exported: [PeerID: PeerProperties], to peers: [PeerProperties]) {
        var remaining = Set(exported.keys)
        for peer in peers {
            let id = PeerID(peer.identifier)
            guard let previous = exported[id] else {
                export.append(peer)
                continue
            }
            remaining.remove(id)
            guard previous != peer else { continue }
            // A constant property never changes while exported (a beacon's frame fields, FirstSeen).
            let changed = peer.changes(since: previous).filter {
                PeerProperties.Key(rawValue: $0.key)?.descriptor.isConst == false
            }
            if !changed.isEmpty { update[id] = changed }
        }
        unexport = remaining.sorted()
    }

    var isEmpty: Bool { unexport.isEmpty && update.isEmpty && export.isEmpty }
}

extension PeerSnapshot {
    /// The peer as `org.proximityd.Peer1` shows it (ProximityAPI spells the names and types), its
    /// times in microseconds since the Unix epoch (`report` gives the epoch of its clock).
    func properties(in report: NodeReport) -> PeerProperties {
        let firstSeen = UInt64(max(0, report.epoch(firstSeen) * 1_000_000))
        let lastSeen = UInt64(max(0, report.epoch(lastSeen) * 1_000_000))
        let (major, minor) = beacon?.majorMinor.map { (Optional($0.major), Optional($0.minor)) } ?? (nil, nil)
        let (namespace, instance) = beacon?.namespaceAndInstance.map { (Optional($0.namespace), Optional($0.instance)) } ?? (nil, nil)
        return PeerProperties(
            identifier: identifier.rawValue, kind: kind.rawValue, address: address, name: name, rssi: rssi,
            smoothedRSSI: smoothedRSSI, measuredPower: measuredPower, distance: distance, proximity: proximity.rawValue,
            firstSeen: firstSeen, lastSeen: lastSeen, verified: verified, major: major, minor: minor, namespace: namespace,
            instance: instance, url: beacon?.url)
    }
}

/// The peers on the bus: one `Peer1` object per peer of the report, then `Node1.FoundDevices`.
extension BusExporter {
    func show(_ report: NodeReport) async {
        let peers = report.peers.map { $0.properties(in: report) }
        let plan = ExportPlan(from: exported.mapValues(\.properties), to: peers)
        for id in plan.unexport {
            if let gone = exported.removeValue(forKey: id) { await gone.object.unexport() }
        }
        for (id, changes) in plan.update {
            exported[id]?.object.set(changes, interface: ProximityBus.Peer1.interface)
        }
        for peer in peers {
            let id = PeerID(peer.identifier)
            if exported[id] != nil { exported[id]!.properties = peer }
        }
        for properties in plan.export {
            do {
                let object = try await connection.export([properties.interface], at: properties.path)
                exported[PeerID(properties.identifier)] = (object, properties)
            } catch {
                logger.error("cannot export a peer", metadata: ["peer.id": "\(properties.identifier)", "error": "\(error)"])
            }
        }
        let zones = Dictionary(uniqueKeysWithValues: report.peers.map { ($0.identifier.rawValue, $0.proximity.rawValue) })
        let paths = exported.values.map(\.object.path).sorted { $0.rawValue < $1.rawValue }
        publishedState.withLock { $0 = Published(zones: zones, paths: paths) }
        do {
            try nodeObject?.emit(ProximityBus.Node1.foundDevices, interface: ProximityBus.Node1.interface, [.stringMap(zones)])
        } catch {
            logger.error("cannot emit FoundDevices", metadata: ["error": "\(error)"])
        }
    }
}
