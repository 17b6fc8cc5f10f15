@_exported import ProximityAPIValues
import DBusKit
import Foundation

/// The names of the node's D-Bus API (`docs/dbus-api.md`, `dbus/org.proximityd.*.xml`): the one
/// place they are spelt.
///
/// The daemon and its clients (`proximityctl`, scripts' helpers, tests) must take every bus name,
/// path, interface, member, property and error name of `org.proximityd` from this module
/// (`ProximityBus`, ``NodeProperties``, ``PeerProperties``), never write them again: a name
/// changed here is changed for both ends.
public enum ProximityBus {
    /// The well-known name a node owns by default (`proximityd run --bus-name` picks another, such
    /// as `org.proximityd.hci1`, so several nodes share one bus).
    public static let defaultBusName: BusName = "org.proximityd"
    /// The node itself (`Node1`) and the object manager of its tree.
    public static let rootPath: ObjectPath = "/org/proximityd"
    /// The parent of the `Peer1` objects.
    public static let peersPath: ObjectPath = "/org/proximityd/peers"
    /// The parent of the `Region1` objects.
    public static let regionsPath: ObjectPath = "/org/proximityd/regions"

    /// The parent of the `Alert1` objects: `/org/proximityd/alerts/<alert>/<target>`.
    public static let alertsPath: ObjectPath = "/org/proximityd/alerts"

    /// The *general* service UUID every node of a deployment advertises, so nodes find each other
    /// without knowing each other; `proximityd run --service-uuid` changes it for a private
    /// deployment. On the bus it is written lowercase (`Node1.ServiceUUID`).
    public static let defaultServiceUUID = UUID(uuidString: "b89491c9-43dd-4d75-bf16-dff381aed967")!

    /// The object path of a peer: its identifier escaped as one path element, the way
    /// `sd_bus_path_encode` does (`-` is `_2d`, `:` is `_3a`, a leading digit is escaped too).
    public static func peerPath(_ identifier: String) -> ObjectPath {
        peersPath.appending(escaped: identifier)
    }

    /// The object path of a monitored region: its identifier escaped as one path element, as
    /// ``peerPath(_:)`` does.
    public static func regionPath(_ identifier: String) -> ObjectPath {
        regionsPath.appending(escaped: identifier)
    }

    /// The object path of one alert's target: the alert's identifier and the peer's, each escaped
    /// as one path element.
    public static func alertPath(alert: String, target: String) -> ObjectPath {
        alertsPath.appending(escaped: alert).appending(escaped: target)
    }

    /// The alert and target identifiers of an ``alertPath(alert:target:)``; nil for another path.
    public static func alertTarget(of path: ObjectPath) -> (alert: String, target: String)? {
        guard let parent = path.parent, let grandparent = parent.parent, grandparent == alertsPath else { return nil }
        return (parent.decodedLastElement, path.decodedLastElement)
    }

    /// `org.proximityd.Node1` at ``rootPath``.
    public enum Node1 {
        public static let interface: InterfaceName = "org.proximityd.Node1"
        /// `GetPeers() -> ao`
        public static let getPeers: MemberName = "GetPeers"
        /// `GetRanging() -> a{ss}`
        public static let getRanging: MemberName = "GetRanging"
        /// `GetIdentities() -> a{ss}`
        public static let getIdentities: MemberName = "GetIdentities"
        /// `GetPeer(s identifier) -> o`: the `Peer1` object of a peer in the table.
        public static let getPeer: MemberName = "GetPeer"
        /// `SetPeerName(s identifier, s name)`: an empty name removes it.
        public static let setPeerName: MemberName = "SetPeerName"
        /// `SetMeasuredPower(sn)`
        public static let setMeasuredPower: MemberName = "SetMeasuredPower"
        /// `ResetMeasuredPower(s)`
        public static let resetMeasuredPower: MemberName = "ResetMeasuredPower"
        /// `AddIRK(s name, s key)`: a device to recognise by its identity resolving key.
        public static let addIRK: MemberName = "AddIRK"
        /// `RemoveIRK(s name)`: one added with `AddIRK`.
        public static let removeIRK: MemberName = "RemoveIRK"
        /// `Reload()`: reads the config file again, as `SIGHUP` does.
        public static let reload: MemberName = "Reload"
        /// The signal `FoundDevices(a{ss})`, once a second.
        public static let foundDevices: MemberName = "FoundDevices"
        /// The signal `PeerIdentified(s identifier, s address, b introduced)`: a peer node's
        /// identity learnt (read over GATT, or written by the peer to this node's hello), once it
        /// is saved.
        public static let peerIdentified: MemberName = "PeerIdentified"
        /// `StartRecording(as peers)`: the caller receives `Samples` for these peers (none: every
        /// peer) until it calls `StopRecording()` or leaves the bus.
        public static let startRecording: MemberName = "StartRecording"
        /// `StopRecording()`
        public static let stopRecording: MemberName = "StopRecording"
        /// The signal `Samples(d time, a(sddd) samples, a(ssdd) reports)`, sent once a report to
        /// each recording client only (unicast).
        public static let samples: MemberName = "Samples"
        /// The types of `Samples`' arguments: (peer, time, RSSI, measured power) and (peer, zone,
        /// distance, measured power).
        public static let samplesType: DBusType = .array(.structure([.string, .double, .double, .double]))
        public static let reportsType: DBusType = .array(.structure([.string, .string, .double, .double]))
        /// ``RecordingLimits``.
        public static let maxRecordedPeers = RecordingLimits.maxRecordedPeers
        public static let maxRecorders = RecordingLimits.maxRecorders
        public static let maxRecordersPerUser = RecordingLimits.maxRecordersPerUser
    }

    /// `org.proximityd.RegionMonitor1` at ``rootPath``: region monitoring commands.
    public enum RegionMonitor1 {
        public static let interface: InterfaceName = "org.proximityd.RegionMonitor1"
        /// `StartMonitoring(s identifier, a{sv} matcher)`
        public static let startMonitoring: MemberName = "StartMonitoring"
        /// `StopMonitoring(s identifier)`
        public static let stopMonitoring: MemberName = "StopMonitoring"
        /// `StopMonitoringAll()`
        public static let stopMonitoringAll: MemberName = "StopMonitoringAll"
        /// `RequestState(s identifier) -> s`
        public static let requestState: MemberName = "RequestState"
        /// `GetMonitoredRegions() -> ao`
        public static let getMonitoredRegions: MemberName = "GetMonitoredRegions"
        /// `GetRegion(s identifier) -> o`: a monitored region's object, so clients need not
        /// escape identifiers into paths.
        public static let getRegion: MemberName = "GetRegion"
    }

    /// `org.proximityd.Region1` at ``regionPath(_:)``: one monitored region.
    public enum Region1 {
        public static let interface: InterfaceName = "org.proximityd.Region1"
        /// `Entered()`
        public static let entered: MemberName = "Entered"
        /// `Exited()`
        public static let exited: MemberName = "Exited"
        /// `StateDetermined(s state)`
        public static let stateDetermined: MemberName = "StateDetermined"
        /// `Ranged(a(ssdn) peers)`: identifier, zone, distance (m), RSSI (dBm), nearest first.
        public static let ranged: MemberName = "Ranged"
        /// The type of `Ranged`'s argument.
        public static let rangedType: DBusType = .array(.structure([.string, .string, .double, .int16]))
    }

    /// `org.proximityd.AlertManager1` at ``rootPath``: alerts, strategies and the consumer.
    public enum AlertManager1 {
        public static let interface: InterfaceName = "org.proximityd.AlertManager1"
        /// `AddAlert(s identifier, a{sv} alert)`
        public static let addAlert: MemberName = "AddAlert"
        /// `RemoveAlert(s identifier)`
        public static let removeAlert: MemberName = "RemoveAlert"
        /// `GetAlerts() -> ao`: every alert's targets (`Alert1` objects).
        public static let getAlerts: MemberName = "GetAlerts"
        /// `GetDefinitions() -> a{sa{sv}}`: every alert as `AddAlert` takes it, with `Source`.
        public static let getDefinitions: MemberName = "GetDefinitions"
        /// `RegisterStrategy(o strategy, s key)`
        public static let registerStrategy: MemberName = "RegisterStrategy"
        /// `UnregisterStrategy(o strategy)`
        public static let unregisterStrategy: MemberName = "UnregisterStrategy"
        /// `Accept(o alert)`, `Decline(o alert)`, `Done(o alert)`
        public static let accept: MemberName = "Accept"
        public static let decline: MemberName = "Decline"
        public static let done: MemberName = "Done"
        /// `SetActionStatus(o alert, s status)`
        public static let setActionStatus: MemberName = "SetActionStatus"
        /// `GetAlert(s alert, s target) -> o`: one alert target's object, by the alert's and the
        /// peer's identifiers.
        public static let getAlert: MemberName = "GetAlert"
        /// `AcceptTarget(s alert, s target)`, `DeclineTarget(ss)`, `DoneTarget(ss)`,
        /// `SetTargetActionStatus(s alert, s target, s status)`: `Accept`, `Decline`, `Done` and
        /// `SetActionStatus` with the identifiers instead of the object path.
        public static let acceptTarget: MemberName = "AcceptTarget"
        public static let declineTarget: MemberName = "DeclineTarget"
        public static let doneTarget: MemberName = "DoneTarget"
        public static let setTargetActionStatus: MemberName = "SetTargetActionStatus"
        /// The signal `AlertReady(o alert, a{sv} content)`: an offer.
        public static let alertReady: MemberName = "AlertReady"
        /// The signal `AlertRemoved(o alert, s reason)`: an offer or an action taken back.
        public static let alertRemoved: MemberName = "AlertRemoved"
        /// Property `Current` (o): the alert offered or in progress, `/` when none.
        public static let current = "Current"
        /// Property `Strategies` (as): the strategy keys alerts may name now.
        public static let strategies = "Strategies"
    }

    /// `org.proximityd.Alert1` at ``alertPath(alert:target:)``: one alert for one target.
    public enum Alert1 {
        public static let interface: InterfaceName = "org.proximityd.Alert1"
    }

    /// `org.proximityd.AlertStrategy1`: exported by a client that decides alerts' conditions.
    public enum AlertStrategy1 {
        public static let interface: InterfaceName = "org.proximityd.AlertStrategy1"
        /// `Evaluate(a{oa{sv}} targets) -> a{ob}`: whether each target's condition holds.
        public static let evaluate: MemberName = "Evaluate"
        /// `Release()`: the node dropped the strategy (no reply expected).
        public static let release: MemberName = "Release"
        /// `Evaluate`'s argument and answer.
        public static let targetsType: DBusType = .dictionary(key: .objectPath, value: .dictionary(key: .string, value: .variant))
        public static let verdictsType: DBusType = .dictionary(key: .objectPath, value: .boolean)
    }

    /// `org.proximityd.Profile1` at ``rootPath``: the profile, tracking and the rules.
    public enum Profile1 {
        public static let interface: InterfaceName = "org.proximityd.Profile1"
        /// Property `Attributes` (a{ss}).
        public static let attributes = "Attributes"
        /// `UpdateAttribute(s key, s value)`, `RemoveAttribute(s key)`
        public static let updateAttribute: MemberName = "UpdateAttribute"
        public static let removeAttribute: MemberName = "RemoveAttribute"
        /// `TrackBeacon(s uuid, s major, s minor, y prox, a{ss} data)`: the seed's manual tracking.
        public static let trackBeacon: MemberName = "TrackBeacon"
        /// `ClearCurrentBeacon()`
        public static let clearCurrentBeacon: MemberName = "ClearCurrentBeacon"
        /// `AddRule(s identifier, s rule)`: the rule as JSON; `RemoveRule(s identifier)`;
        /// `GetRules() -> a{ss}` (identifier → JSON, with `"source"`); `TestRule(s identifier) -> (b, as)`.
        public static let addRule: MemberName = "AddRule"
        public static let removeRule: MemberName = "RemoveRule"
        public static let getRules: MemberName = "GetRules"
        public static let testRule: MemberName = "TestRule"
        /// Signals `Tracked(a{ss} contextdata)`, `Cleared()`, `RuleFired(s rule, a{ss} data)`.
        public static let tracked: MemberName = "Tracked"
        public static let cleared: MemberName = "Cleared"
        public static let ruleFired: MemberName = "RuleFired"
    }

    /// `org.proximityd.EventLog1` at ``rootPath``: the durable event log.
    public enum EventLog1 {
        public static let interface: InterfaceName = "org.proximityd.EventLog1"
        /// `GetEvents(t after, d since, u limit) -> a(tdssa{ss})`: entries after sequence `after`
        /// and at or after `since` (seconds since the Unix epoch; 0: any), oldest first.
        public static let getEvents: MemberName = "GetEvents"
        /// Signal `Logged(t seq, d time, s source, s type, a{ss} data)`: an entry, once on disk.
        public static let logged: MemberName = "Logged"
        public static let entryType: DBusType = .structure([.uint64, .double, .string, .string, .dictionary(key: .string, value: .string)])
    }

    /// The methods of the node's own interfaces that every user may call on the system bus: the
    /// ones that only read, and the recording ones (a client gets only its own samples).
    /// `dbus/org.proximityd.conf` allows exactly these to users outside root and the group
    /// `proximityd` (a test checks), with `Properties.Get`/`GetAll`, `GetManagedObjects`,
    /// `Introspect` and `Peer`; every other method call is theirs alone.
    public static let methodsForEveryone: [(interface: InterfaceName, member: MemberName)] = [
        (Node1.interface, Node1.getPeers), (Node1.interface, Node1.getRanging), (Node1.interface, Node1.getIdentities),
        (Node1.interface, Node1.getPeer), (Node1.interface, Node1.startRecording), (Node1.interface, Node1.stopRecording),
        (RegionMonitor1.interface, RegionMonitor1.getMonitoredRegions), (RegionMonitor1.interface, RegionMonitor1.requestState),
        (RegionMonitor1.interface, RegionMonitor1.getRegion),
        (AlertManager1.interface, AlertManager1.getAlerts), (AlertManager1.interface, AlertManager1.getDefinitions),
        (AlertManager1.interface, AlertManager1.getAlert),
        (Profile1.interface, Profile1.getRules), (Profile1.interface, Profile1.testRule),
        (EventLog1.interface, EventLog1.getEvents),
    ]

    /// `org.proximityd.Peer1` at ``peerPath(_:)``: properties only.
    public enum Peer1 {
        public static let interface: InterfaceName = "org.proximityd.Peer1"
    }

    /// The errors the node raises itself, `org.proximityd.Error.<Reason>`.
    public enum Errors {
        /// A well-typed but wrong value.
        public static let invalidArguments: ErrorName = "org.proximityd.Error.InvalidArguments"
        /// What the call names does not exist (no override to reset).
        public static let doesNotExist: ErrorName = "org.proximityd.Error.DoesNotExist"
        /// The node could not do it (a setting that could not be saved: nothing changed).
        public static let failed: ErrorName = "org.proximityd.Error.Failed"
        /// The call is not allowed on this object (a region of the config file, stopped over the
        /// bus).
        public static let notPermitted: ErrorName = "org.proximityd.Error.NotPermitted"
        /// A limit is reached (the number of regions).
        public static let limitReached: ErrorName = "org.proximityd.Error.LimitReached"
        /// Accept or Decline of an alert that is not on offer, Done of one neither offered nor in
        /// progress.
        public static let notOffered: ErrorName = "org.proximityd.Error.NotOffered"
        /// The name is taken (a strategy key another client registered, or a built-in one).
        public static let alreadyExists: ErrorName = "org.proximityd.Error.AlreadyExists"
        /// The object given to `RegisterStrategy` does not implement `AlertStrategy1`.
        public static let notAStrategy: ErrorName = "org.proximityd.Error.NotAStrategy"
        /// The config file cannot be used (`Reload()`); the message holds its
        /// `FILE:LINE:COLUMN: message` lines. Nothing changed.
        public static let invalidConfiguration: ErrorName = "org.proximityd.Error.InvalidConfiguration"
    }
}

/// One property of an interface of the node's API, as `dbus/org.proximityd.*.xml` declares it.
public struct PropertyDescriptor: Sendable, Hashable {
    /// The name on the bus (`RSSI`).
    public let name: String
    /// Its D-Bus type.
    public let type: DBusType
    /// Never changes while the object is exported (`EmitsChangedSignal` `const`); otherwise every
    /// change is announced with `PropertiesChanged`.
    public let isConst: Bool
    /// Clients may `Set` it.
    public let isWritable: Bool

    init(_ name: String, _ type: DBusType, const isConst: Bool = false, writable isWritable: Bool = false) {
        self.name = name
        self.type = type
        self.isConst = isConst
        self.isWritable = isWritable
    }
}

/// Lenient readers for property dictionaries from another process: a missing or wrongly typed
/// value reads as absent, never traps. Values may arrive wrapped in variants.
enum Lenient {
    static func string(_ value: DBusValue?) -> String? { value?.unwrapped.string }
    static func bool(_ value: DBusValue?) -> Bool? { value?.unwrapped.bool }
    static func double(_ value: DBusValue?) -> Double? { value?.unwrapped.double }
    /// Any integer type, if the value fits `T`.
    static func integer<T: FixedWidthInteger>(_ value: DBusValue?, as: T.Type = T.self) -> T? {
        if case .uint64(let wide)? = value?.unwrapped { return T(exactly: wide) }
        guard let wide = value?.unwrapped.integer else { return nil }
        return T(exactly: wide)
    }
    /// `a{sv}`, variants unwrapped; entries with another key type are skipped.
    static func properties(_ value: DBusValue?) -> [String: DBusValue] {
        var out: [String: DBusValue] = [:]
        for entry in value?.unwrapped.dictEntries ?? [] {
            guard let name = entry.key.string else { continue }
            out[name] = entry.value.unwrapped
        }
        return out
    }
    /// `a{ss}`; other entries skipped.
    static func stringMap(_ value: DBusValue?) -> [String: String] {
        var out: [String: String] = [:]
        for entry in value?.unwrapped.dictEntries ?? [] {
            guard let key = entry.key.string, let string = entry.value.unwrapped.string else { continue }
            out[key] = string
        }
        return out
    }
}
