import Foundation
import ProximityAPIValues
import ProximityCore

/// The ranging report the node publishes once a second: every peer in the table, nearest first.
public struct NodeReport: Sendable, Hashable {
    public var time: Timestamp
    /// Seconds since the Unix epoch at ``time``.
    public var epoch: Double
    /// Nearest first.
    public var peers: [PeerSnapshot]
    /// Peers reported unknown for the first time because they fell silent.
    public var silenced: [PeerID]
    /// Peers that left the table in this report.
    public var removed: [PeerID]

    public init(time: Timestamp, epoch: Double, peers: [PeerSnapshot], silenced: [PeerID], removed: [PeerID]) {
        self.time = time
        self.epoch = epoch
        self.peers = peers
        self.silenced = silenced
        self.removed = removed
    }

    /// Seconds since the Unix epoch of `t`, a time of the report's clock.
    public func epoch(_ t: Timestamp) -> Double { epoch - (time - t) }

    /// Identifier → zone: the seed's `foundDevices`.
    public var zones: [PeerID: Proximity] {
        Dictionary(uniqueKeysWithValues: peers.map { ($0.identifier, $0.proximity) })
    }
}

/// What the engine publishes. Subscribers (the bus exporter; later the region monitor's, the
/// alert engine's and MQTT's publishers) each get every event in order, through a bounded buffer.
public enum NodeEvent: Sendable, Hashable {
    /// The once-a-second ranging report.
    case report(NodeReport)
    /// A peer node's identity was learnt at `address` (read over GATT, or from its hello).
    case peerIdentified(PeerID, address: String, introduced: Bool)
    /// The adapter link changed what the node shows as `Advertising` and `Discovering`.
    case link(advertising: Bool, discovering: Bool)
    /// The link's health changed (`Node1.Health`, `HealthDetail`): `ok`, `recovering` or
    /// `failed`, and why.
    case health(state: String, detail: String)
    /// `ClearInterval` changed (set over the bus, or by a reload).
    case clearInterval(Double)
    /// `RSSIOffset` changed (by a reload).
    case rssiOffset(Double)
    /// `ZoneDistances` changed (by a reload).
    case zoneDistances(ZoneThresholds)
    /// `PeerNames` changed (`SetPeerName`, or a reload): every display name now, numbered in the
    /// change series so the call waits until the bus shows it.
    case peerNames([PeerID: String], sequence: UInt64)
    /// `IRKs` changed (`AddIRK`, `RemoveIRK`, or a reload): each IRK's name and source, numbered
    /// in the change series.
    case irks([String: String], sequence: UInt64)
    /// Region monitoring changed: regions defined or removed, states determined, entered and
    /// exited, and with each report the ranging per region. One event per step of the engine, so
    /// thousands of regions changing at once are one event in a subscriber's buffer.
    case regions(RegionChanges)
    /// The alert engine after a step: every alert target as it is now, the offers and removals it
    /// made, the alert offered or in progress, and the strategy keys. One event per step.
    case alerts(AlertChanges)
    /// Tracking, the profile, the rules and the event log after a step: the whole profile when it
    /// changed, and the signals in order (each `Logged` once its entry is on disk).
    case profile(ProfileChanges)
    /// With each report while clients record (`Node1.StartRecording`): the samples of the recorded
    /// peers since the report before, what the report said of them, and who gets which.
    case recording(RecordingBatch)
}

/// What the recording clients get with one report: each its own peers' samples and reports, as a
/// `Node1.Samples` signal sent to it alone.
public struct RecordingBatch: Sendable, Hashable {
    /// A client recording, and the peers it asked for (nil: every peer).
    public struct Recorder: Sendable, Hashable {
        /// Its unique bus name.
        public var client: String
        public var peers: Set<PeerID>?
        /// When it started, seconds since the Unix epoch: it gets no sample from before.
        public var since: Double

        public init(client: String, peers: Set<PeerID>?, since: Double = 0) {
            self.client = client
            self.peers = peers
            self.since = since
        }

        public func wants(_ peer: String) -> Bool { peers?.contains(PeerID(peer)) ?? true }
    }

    /// The report's time, seconds since the Unix epoch.
    public var time: Double
    /// Every recorded peer's samples since the report before, in the order the table took them.
    public var samples: [RecordedSample]
    /// Every recorded peer the report holds or removed.
    public var reports: [RecordedReport]
    public var recorders: [Recorder]

    public init(time: Double, samples: [RecordedSample], reports: [RecordedReport], recorders: [Recorder]) {
        self.time = time
        self.samples = samples
        self.reports = reports
        self.recorders = recorders
    }

    /// What `recorder` gets.
    public func batch(for recorder: Recorder) -> RecordedBatch {
        RecordedBatch(time: time, samples: samples.filter { $0.time >= recorder.since && recorder.wants($0.peer) },
                      reports: reports.filter { recorder.wants($0.peer) })
    }
}

/// What one step did to the profile: its attributes when they changed, and the step's signals.
public struct ProfileChanges: Sendable, Hashable {
    /// In the same series as ``RegionChanges/sequence``.
    public var sequence: UInt64
    public var attributes: [String: String]?
    /// `Tracked`, `Cleared`, `RuleFired` and `Logged`, in order.
    public var signals: [ProfileSignal]

    public init(sequence: UInt64 = 0, attributes: [String: String]? = nil, signals: [ProfileSignal] = []) {
        self.sequence = sequence
        self.attributes = attributes
        self.signals = signals
    }
}

/// What one step of the alert engine left: the whole picture of the targets (few: alerts ×
/// matching peers), so a subscriber shows exactly this, and the offers and removals of the step
/// in order.
public struct AlertChanges: Sendable, Hashable {
    /// An offer (`AlertReady`, with the target's distance in metres) or a removal.
    public enum Notice: Sendable, Hashable {
        case ready(AlertTargetKey, distance: Double)
        case removed(AlertTargetKey, reason: String)
    }

    /// In the same series as ``RegionChanges/sequence``.
    public var sequence: UInt64
    /// Every alert target.
    public var targets: [AlertTargetKey: AlertProperties]
    public var notices: [Notice]
    /// The alert offered or in progress.
    public var current: AlertTargetKey?
    /// The strategy keys alerts may name now.
    public var strategies: [String]

    public init(sequence: UInt64 = 0, targets: [AlertTargetKey: AlertProperties], notices: [Notice] = [], current: AlertTargetKey?,
                strategies: [String]) {
        self.sequence = sequence
        self.targets = targets
        self.notices = notices
        self.current = current
        self.strategies = strategies
    }
}

/// What one step of the engine did to the monitored regions, in order: `removed`, then `defined`,
/// then `events`, then `ranging`.
public struct RegionChanges: Sendable, Hashable {
    /// Increases with every `RegionChanges` the engine publishes; a command's caller waits for
    /// the bus exporter to have applied its sequence before it answers.
    public var sequence: UInt64
    /// Regions stopped.
    public var removed: [String] = []
    /// Regions started or redefined, with their state.
    public var defined: [RegionStatus] = []
    /// States determined, enters and exits.
    public var events: [RegionEvent] = []
    /// With a report: every region that has present peers (the others have none). Nil otherwise.
    public var ranging: [RegionRanging]?

    public init(sequence: UInt64, removed: [String] = [], defined: [RegionStatus] = [], events: [RegionEvent] = [],
                ranging: [RegionRanging]? = nil) {
        self.sequence = sequence
        self.removed = removed
        self.defined = defined
        self.events = events
        self.ranging = ranging
    }
}
