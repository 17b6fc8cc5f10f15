import Foundation
import Logging
import ProximityAPIValues
import ProximityCore
import ProximityTrust

// What goes into ``NodeStep`` (time, BlueZ's news, commands) and what comes out (effects): plain
// values, so the step is tested without a bus, a disk or a clock.

/// The time a step runs at: the monotonic time the stages use, and the Unix time of the same
/// instant (for the log, the bus's timestamps and the wall-clock gates of alerts).
public struct NodeTime: Sendable, Hashable {
    public var now: Timestamp
    /// Seconds since the Unix epoch at ``now``.
    public var epoch: Double

    public init(now: Timestamp, epoch: Double) {
        self.now = now
        self.epoch = epoch
    }

    /// Seconds since the Unix epoch of `t` (a time of the same clock).
    public func epoch(_ t: Timestamp) -> Double { epoch - (now - t) }

    /// Microseconds since the Unix epoch of `t`, as the bus shows times.
    public func epochMicroseconds(_ t: Timestamp) -> UInt64 { UInt64(max(0, epoch(t) * 1_000_000)) }

    /// The wall clock's day of the week and minute, in the node's time zone (`TZ`).
    public var local: LocalTime {
        let c = Calendar.current.dateComponents([.weekday, .hour, .minute], from: Date(timeIntervalSince1970: epoch))
        // Calendar's weekday: 1 Sunday … 7 Saturday; ISO: 1 Monday … 7 Sunday.
        return LocalTime(weekday: ((c.weekday ?? 2) + 5) % 7 + 1, minute: (c.hour ?? 0) * 60 + (c.minute ?? 0))
    }
}

/// Why a command changed nothing, in the node's words; `Export/` names it on the bus
/// (`org.proximityd.Error.*`).
public struct NodeRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        case invalidArguments, doesNotExist, notPermitted, limitReached, alreadyExists, notOffered, invalidConfiguration, failed
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// A file of the state directory as the step wants it written.
public enum StateFile: Sendable {
    case settings(NodeSettings)
    case regions([RegionStatus])
    case alerts(bus: [Alert], engine: AlertEngine.Saved)
    case profile(SavedProfile)
    case peers([String: IdentityResolver.Remembered])

    /// What it holds, for errors and logs: "the regions".
    public var what: String {
        switch self {
        case .settings: "the setting"
        case .regions: "the regions"
        case .alerts: "the alerts"
        case .profile: "the profile"
        case .peers: "the peers"
        }
    }

    var kind: StateFileKind {
        switch self {
        case .settings: .settings
        case .regions: .regions
        case .alerts: .alerts
        case .profile: .profile
        case .peers: .peers
        }
    }
}

public enum StateFileKind: Sendable, Hashable { case settings, regions, alerts, profile, peers }

/// A line for the node's log.
public struct LogLine: Sendable {
    public var level: Logger.Level
    public var message: String
    public var metadata: Logger.Metadata

    public init(_ level: Logger.Level, _ message: String, _ metadata: Logger.Metadata = [:]) {
        self.level = level
        self.message = message
        self.metadata = metadata
    }
}

/// One item of a profile step, in order: a signal, or an entry for the event log (which becomes
/// a `Logged` signal once it is on disk).
public enum ProfileItem: Sendable, Hashable {
    case signal(ProfileSignal)
    case log(LogEntryValue)
}

/// A question for a strategy a client registered: the targets it decides, as they are now.
public struct StrategyQuestion: Sendable {
    public var key: String
    public var client: StrategyClient
    public var generation: Int
    public var targets: [(key: AlertTargetKey, target: AlertTarget, parameters: AlertParameters)]
}

/// Where a strategy a client registered lives: the client's unique bus name and the object's
/// path, as text (the bus edge checked both).
public struct StrategyClient: Sendable, Hashable {
    public var owner: String
    public var path: String

    public init(owner: String, path: String) {
        self.owner = owner
        self.path = path
    }
}

/// What a step asks the executor to do, in order.
public enum NodeEffect: Sendable {
    /// Write a file; a failure is logged (and the step told: ``NodeStep/saveFailed(_:)``).
    case save(StateFile)
    case publish(NodeEvent)
    /// Append the entries to the event log, then publish the profile's step with a `Logged`
    /// signal for each entry written.
    case profile(sequence: UInt64, attributes: [String: String]?, items: [ProfileItem])
    /// Flush the event log's last entries if they are a second old.
    case syncEventLog
    case log(LogLine)
    /// A BlueZ call the adapter link asked for; its result comes back as a ``NodeInput``.
    case bluez(AdapterLink.Action, generation: Int)
    /// Connect to a peer to identify it; the result comes back as ``NodeInput/identified(_:_:)``.
    case identify(IdentificationScheduler.Connect)
    /// Ask a strategy client; the answer comes back as ``NodeCommand/strategyAnswered(_:generation:_:)``
    /// or ``NodeCommand/strategyFailed(_:generation:because:)``.
    case ask(StrategyQuestion)
    /// Tell a strategy client it was dropped (`Release`); its answer does not matter.
    case release(StrategyClient)
    /// Watch a client (a unique name) leave the bus: ``NodeCommand/clientLeft(_:because:)``.
    case watch(client: String)
    /// The fleet key changed (a reload): the GATT characteristics and the identifications from
    /// now on use these settings.
    case trust(TrustSettings)
}

/// What BlueZ and the adapter told the node.
public enum NodeInput: Sendable {
    case adapterSeen(powered: Bool, discovering: Bool, address: String)
    case adapterRemoved
    case bluezGone
    case bluezRestarted
    /// BlueZ released the advertisement.
    case released
    case registrationEnded(failure: String?, generation: Int)
    case discoveryEnded(failure: String?, generation: Int)
    /// A device as BlueZ shows it: `observation` (its RSSI only with a new sample, its frame only
    /// when it changed), `frame` always, and its alias.
    case sighting(Observation, frame: AdvertisedFrame, alias: String?)
    /// A connection to identify a peer ended.
    case identified(address: String, IdentificationResult)
    /// A peer wrote its identity to this node's hello characteristic.
    case introduced(UUID, address: String, verified: Bool = false, key: String? = nil)
    /// A connection could not even be started (no BlueZ path for the address).
    case identificationRejected(address: String)
}

/// What clients ask the node to do (`Export/` turns bus calls into these), and the results of
/// the calls it made for a strategy or a watch: a change of the step, made by the engine on a
/// copy that it keeps once the files the outcome names are written.
///
/// Each command is declared next to what it does, in its stage's file (`NodeStep+Regions.swift`
/// has `.startMonitoring(_:)`, …), as a static function that makes it: adding one touches that
/// file alone, no enumeration and no dispatch elsewhere.
public struct NodeCommand: Sendable {
    /// A name for logs and tests (`SetPeerName`).
    public let name: String
    let change: @Sendable (inout NodeStep, inout StepOutcome, NodeTime) throws(NodeRefusal) -> Void

    public init(_ name: String,
                _ change: @escaping @Sendable (inout NodeStep, inout StepOutcome, NodeTime) throws(NodeRefusal) -> Void) {
        self.name = name
        self.change = change
    }
}

/// What a command or a reload did: the files that must be written before it counts (a failure
/// writes back the earlier ones and changes nothing), then the effects, and the sequence a
/// caller waits for the bus to show.
public struct StepOutcome: Sendable {
    public var commit: [StateFile] = []
    public var effects: [NodeEffect] = []
    public var sequence: UInt64 = 0
    /// `RequestState`'s answer.
    public var regionState: RegionState?

    public init() {}
}
