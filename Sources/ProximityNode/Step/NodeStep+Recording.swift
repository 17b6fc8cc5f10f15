import Logging
import ProximityAPIValues
import ProximityCore

/// Who records samples (`Node1.StartRecording`), and the samples taken since the last report.
struct RecordingState: Sendable {
    struct Client: Sendable {
        /// Nil: every peer.
        var peers: Set<PeerID>?
        /// Seconds since the Unix epoch when it (last) started: it gets no sample from before.
        var since: Double
        /// The client's Unix user, and whether the node always serves it (root, its own user,
        /// group proximityd): the others share the slots, a few each.
        var uid: UInt32
        var privileged: Bool
    }

    /// By unique bus name.
    var clients: [String: Client] = [:]
    /// The peers some client records, and whether one records every peer.
    private(set) var peers: Set<PeerID> = []
    private(set) var everyPeer = false
    /// The recorded peers' samples since the last report, in the order the table took them.
    var samples: [RecordedSample] = []
    /// Samples left out of this report's batch because it was full.
    var dropped = 0

    /// Whether a sample of `id` is recorded: the check on every sample, cheap when nobody records.
    func wants(_ id: PeerID) -> Bool { !clients.isEmpty && (everyPeer || peers.contains(id)) }

    mutating func recompute() {
        everyPeer = clients.values.contains { $0.peers == nil }
        peers = clients.values.reduce(into: Set<PeerID>()) { $0.formUnion($1.peers ?? []) }
    }
}

/// Recording: the samples the ranging table takes for the peers clients asked for, sent to those
/// clients alone with each report (`Node1.Samples`, by the exporter), so a user can measure the
/// node on their own radio (`proximityctl record`, `ranging-bench --replay`) and calibrate a peer
/// (`proximityctl calibrate`).
extension NodeStep {
    /// The most samples one report's batch holds (all clients together); the rest are dropped
    /// and the drop is logged.
    static let maxRecordedSamplesPerReport = 50_000

    /// Keeps the sample the table just took for `id` at `t`, as the table took it (its RSSI and
    /// measured power); nothing if the table had no place for it.
    mutating func recordSample(_ id: PeerID, at t: Timestamp, time: NodeTime) {
        guard let peer = table.peers[id], peer.lastSeen == t else { return }
        guard recording.samples.count < Self.maxRecordedSamplesPerReport else {
            recording.dropped += 1
            return
        }
        recording.samples.append(RecordedSample(peer: id.rawValue, time: time.epoch(t), rssi: peer.rssi, measuredPower: peer.measuredPower))
    }

    /// After the report: the batch for the recording clients (every report, also when nothing was
    /// heard, so a client knows the report times).
    mutating func recordingBatch(removed: [PeerID], at time: NodeTime) -> [NodeEffect] {
        guard !recording.clients.isEmpty else {
            recording.samples = []
            return []
        }
        var effects: [NodeEffect] = []
        var reports: [RecordedReport] = []
        for (id, peer) in table.peers where peer.details != nil && recording.wants(id) {
            reports.append(RecordedReport(peer: id.rawValue, zone: peer.proximity.rawValue, distance: peer.distance,
                                          measuredPower: peer.measuredPower))
        }
        for id in removed where recording.wants(id) {
            reports.append(RecordedReport(peer: id.rawValue, zone: RecordedReport.removed, distance: -1, measuredPower: 0))
        }
        reports.sort { $0.peer < $1.peer }
        if recording.dropped > 0 {
            effects.append(.log(LogLine(.warning, "too many samples to record in one report: some were left out",
                                        ["dropped": "\(recording.dropped)", "limit": "\(Self.maxRecordedSamplesPerReport)"])))
            recording.dropped = 0
        }
        let recorders = recording.clients.map { RecordingBatch.Recorder(client: $0.key, peers: $0.value.peers, since: $0.value.since) }
        effects.append(.publish(.recording(RecordingBatch(time: time.epoch, samples: recording.samples, reports: reports,
                                                          recorders: recorders.sorted { $0.client < $1.client }))))
        recording.samples = []
        return effects
    }

    /// `StartRecording` by `client` (its unique name), of Unix user `uid`: `peers` (empty: every
    /// peer) from now on. Again: the new peers replace the old.
    ///
    /// Slots: ``RecordingLimits/maxRecorders`` for the privileged (root, the node's user, group
    /// proximityd), and as many again for everyone else, at most
    /// ``RecordingLimits/maxRecordersPerUser`` a user; so no user can lock the others out, and
    /// nobody can lock out an operator.
    mutating func startRecording(_ peers: [PeerID], for client: String, uid: UInt32, privileged: Bool,
                                 into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        if recording.clients[client] == nil {
            let sharing = recording.clients.values.filter { $0.privileged == privileged }
            if sharing.count >= RecordingLimits.maxRecorders {
                throw NodeRefusal(.limitReached, privileged
                                  ? "at most \(RecordingLimits.maxRecorders) clients of root and group proximityd may record at once"
                                  : "at most \(RecordingLimits.maxRecorders) clients outside group proximityd may record at once")
            }
            if !privileged, sharing.filter({ $0.uid == uid }).count >= RecordingLimits.maxRecordersPerUser {
                throw NodeRefusal(.limitReached,
                                  "user \(uid) records from \(RecordingLimits.maxRecordersPerUser) clients already " +
                                      "(the most for a user outside group proximityd)")
            }
        }
        recording.clients[client] = .init(peers: peers.isEmpty ? nil : Set(peers), since: time.epoch, uid: uid, privileged: privileged)
        recording.recompute()
        outcome.effects.append(.log(LogLine(.info, "recording samples", [
            "dbus.sender": "\(client)",
            "peers": "\(peers.isEmpty ? "every peer" : peers.map(\.rawValue).sorted().joined(separator: ","))"])))
        outcome.effects += watch(client)
    }

    mutating func stopRecording(for client: String, into outcome: inout StepOutcome) throws(NodeRefusal) {
        guard recording.clients.removeValue(forKey: client) != nil else {
            throw NodeRefusal(.doesNotExist, "\(client) is not recording")
        }
        recording.recompute()
        outcome.effects.append(.log(LogLine(.info, "stopped recording samples", ["dbus.sender": "\(client)"])))
    }
}

extension NodeCommand {
    public static func startRecording(_ peers: [PeerID], client: String, uid: UInt32, privileged: Bool) -> NodeCommand {
        NodeCommand("StartRecording") { step, outcome, time throws(NodeRefusal) in
            try step.startRecording(peers, for: client, uid: uid, privileged: privileged, into: &outcome, at: time)
        }
    }

    public static func stopRecording(client: String) -> NodeCommand {
        NodeCommand("StopRecording") { step, outcome, _ throws(NodeRefusal) in try step.stopRecording(for: client, into: &outcome) }
    }
}
