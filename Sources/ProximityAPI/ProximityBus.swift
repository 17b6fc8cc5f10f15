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
        /// The peers of the last tick, sorted by path.
        public static let getPeers = DBusMethodSpec(interface, "GetPeers", reply: DBusOut("peers", [ObjectPath].self))
        /// Identifier → zone, as of the last tick.
        public static let getRanging = DBusMethodSpec(interface, "GetRanging", reply: DBusOut("zones", [String: String].self))
        /// Bluetooth address → identity of the peer nodes identified so far.
        public static let getIdentities = DBusMethodSpec(interface, "GetIdentities",
                                                         reply: DBusOut("identities", [String: String].self))
        /// The `Peer1` object of a peer in the table.
        public static let getPeer = DBusMethodSpec(interface, "GetPeer", DBusIn("identifier", String.self),
                                                   reply: DBusOut("peer", ObjectPath.self))
        /// A peer's display name; an empty name removes it.
        public static let setPeerName = DBusMethodSpec(interface, "SetPeerName", DBusIn("identifier", String.self),
                                                       DBusIn("name", String.self))
        /// The RSSI at 1 m to use for one peer.
        public static let setMeasuredPower = DBusMethodSpec(interface, "SetMeasuredPower", DBusIn("identifier", String.self),
                                                            DBusIn("power", Int16.self))
        /// Forgets one peer's `SetMeasuredPower`.
        public static let resetMeasuredPower = DBusMethodSpec(interface, "ResetMeasuredPower", DBusIn("identifier", String.self))
        /// A device to recognise by its identity resolving key (32 hexadecimal digits).
        public static let addIRK = DBusMethodSpec(interface, "AddIRK", DBusIn("name", String.self), DBusIn("key", String.self))
        /// Forgets a key added with `AddIRK`.
        public static let removeIRK = DBusMethodSpec(interface, "RemoveIRK", DBusIn("name", String.self))
        /// Reads the config file again, as `SIGHUP` does.
        public static let reload = DBusMethodSpec(interface, "Reload")
        /// The signal `FoundDevices(a{ss})`, once a second.
        public static let foundDevices: MemberName = "FoundDevices"
        /// The signal `PeerIdentified(s identifier, s address, b introduced)`: a peer node's
        /// identity learnt (read over GATT, or written by the peer to this node's hello), once it
        /// is saved.
        public static let peerIdentified: MemberName = "PeerIdentified"
        /// The caller receives `Samples` for these peers (none: every peer) until it calls
        /// `StopRecording()` or leaves the bus.
        public static let startRecording = DBusMethodSpec(interface, "StartRecording", DBusIn("peers", [String].self))
        public static let stopRecording = DBusMethodSpec(interface, "StopRecording")
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
        public static let startMonitoring = DBusMethodSpec(interface, "StartMonitoring", DBusIn("identifier", String.self),
                                                           DBusIn("matcher", DBusVardict.self))
        public static let stopMonitoring = DBusMethodSpec(interface, "StopMonitoring", DBusIn("identifier", String.self))
        public static let stopMonitoringAll = DBusMethodSpec(interface, "StopMonitoringAll")
        public static let requestState = DBusMethodSpec(interface, "RequestState", DBusIn("identifier", String.self),
                                                        reply: DBusOut("state", String.self))
        public static let getMonitoredRegions = DBusMethodSpec(interface, "GetMonitoredRegions",
                                                               reply: DBusOut("regions", [ObjectPath].self))
        /// A monitored region's object, so clients need not escape identifiers into paths.
        public static let getRegion = DBusMethodSpec(interface, "GetRegion", DBusIn("identifier", String.self),
                                                     reply: DBusOut("region", ObjectPath.self))
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
        public static let addAlert = DBusMethodSpec(interface, "AddAlert", DBusIn("identifier", String.self),
                                                    DBusIn("alert", DBusVardict.self))
        public static let removeAlert = DBusMethodSpec(interface, "RemoveAlert", DBusIn("identifier", String.self))
        /// Every alert's targets (`Alert1` objects).
        public static let getAlerts = DBusMethodSpec(interface, "GetAlerts", reply: DBusOut("alerts", [ObjectPath].self))
        /// Every alert as `AddAlert` takes it, with `Source`.
        public static let getDefinitions = DBusMethodSpec(interface, "GetDefinitions",
                                                          reply: DBusOut("alerts", [String: [String: DBusValue]].self))
        public static let registerStrategy = DBusMethodSpec(interface, "RegisterStrategy", DBusIn("strategy", ObjectPath.self),
                                                            DBusIn("key", String.self))
        public static let unregisterStrategy = DBusMethodSpec(interface, "UnregisterStrategy", DBusIn("strategy", ObjectPath.self))
        public static let accept = DBusMethodSpec(interface, "Accept", DBusIn("alert", ObjectPath.self))
        public static let decline = DBusMethodSpec(interface, "Decline", DBusIn("alert", ObjectPath.self))
        public static let done = DBusMethodSpec(interface, "Done", DBusIn("alert", ObjectPath.self))
        public static let setActionStatus = DBusMethodSpec(interface, "SetActionStatus", DBusIn("alert", ObjectPath.self),
                                                           DBusIn("status", String.self))
        /// One alert target's object, by the alert's and the peer's identifiers.
        public static let getAlert = DBusMethodSpec(interface, "GetAlert", DBusIn("alert", String.self), DBusIn("target", String.self),
                                                    reply: DBusOut("object", ObjectPath.self))
        /// `Accept`, `Decline`, `Done` and `SetActionStatus` with the identifiers instead of the
        /// object path.
        public static let acceptTarget = DBusMethodSpec(interface, "AcceptTarget", DBusIn("alert", String.self),
                                                        DBusIn("target", String.self))
        public static let declineTarget = DBusMethodSpec(interface, "DeclineTarget", DBusIn("alert", String.self),
                                                         DBusIn("target", String.self))
        public static let doneTarget = DBusMethodSpec(interface, "DoneTarget", DBusIn("alert", String.self), DBusIn("target", String.self))
        public static let setTargetActionStatus = DBusMethodSpec(interface, "SetTargetActionStatus", DBusIn("alert", String.self),
                                                                 DBusIn("target", String.self), DBusIn("status", String.self))
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
        /// Whether each target's condition holds.
        public static let evaluate = DBusMethodSpec(interface, "Evaluate", DBusIn("targets", [ObjectPath: [String: DBusValue]].self),
                                                    reply: DBusOut("verdicts", [ObjectPath: Bool].self))
        /// The node dropped the strategy (no reply expected).
        public static let release = DBusMethodSpec(interface, "Release")
        /// `Evaluate`'s argument and answer.
        public static var targetsType: DBusType { evaluate.inputs[0].type }
        public static var verdictsType: DBusType { evaluate.reply.arguments[0].type }
    }

    /// `org.proximityd.Profile1` at ``rootPath``: the profile, tracking and the rules.
    public enum Profile1 {
        public static let interface: InterfaceName = "org.proximityd.Profile1"
        /// Property `Attributes` (a{ss}).
        public static let attributes = "Attributes"
        public static let updateAttribute = DBusMethodSpec(interface, "UpdateAttribute", DBusIn("key", String.self),
                                                           DBusIn("value", String.self))
        public static let removeAttribute = DBusMethodSpec(interface, "RemoveAttribute", DBusIn("key", String.self))
        /// The seed's manual tracking.
        public static let trackBeacon = DBusMethodSpec(interface, "TrackBeacon", DBusIn("uuid", String.self), DBusIn("major", String.self),
                                                       DBusIn("minor", String.self), DBusIn("prox", UInt8.self),
                                                       DBusIn("data", DBusEntries<String>.self))
        public static let clearCurrentBeacon = DBusMethodSpec(interface, "ClearCurrentBeacon")
        /// The rule as JSON.
        public static let addRule = DBusMethodSpec(interface, "AddRule", DBusIn("identifier", String.self), DBusIn("rule", String.self))
        public static let removeRule = DBusMethodSpec(interface, "RemoveRule", DBusIn("identifier", String.self))
        /// Identifier → JSON, with `"source"`.
        public static let getRules = DBusMethodSpec(interface, "GetRules", reply: DBusOut("rules", [String: String].self))
        /// Whether the rule's condition holds on the profile now, and why.
        public static let testRule = DBusMethodSpec(interface, "TestRule", DBusIn("identifier", String.self),
                                                    reply: DBusOut2("holds", Bool.self, "explanation", [String].self))
        /// Signals `Tracked(a{ss} contextdata)`, `Cleared()`, `RuleFired(s rule, a{ss} data)`.
        public static let tracked: MemberName = "Tracked"
        public static let cleared: MemberName = "Cleared"
        public static let ruleFired: MemberName = "RuleFired"
    }

    /// `org.proximityd.EventLog1` at ``rootPath``: the durable event log.
    public enum EventLog1 {
        public static let interface: InterfaceName = "org.proximityd.EventLog1"
        public static let entryType: DBusType = .structure([.uint64, .double, .string, .string, .dictionary(key: .string, value: .string)])
        /// Entries after sequence `after` and at or after `since` (seconds since the Unix epoch;
        /// 0: any), oldest first.
        public static let getEvents = DBusMethodSpec(interface, "GetEvents", DBusIn("after", UInt64.self), DBusIn("since", Double.self),
                                                     DBusIn("limit", UInt32.self), reply: DBusValueOut("events", .array(entryType)))
        /// Signal `Logged(t seq, d time, s source, s type, a{ss} data)`: an entry, once on disk.
        public static let logged: MemberName = "Logged"
    }

    /// The methods of the node's own interfaces that every user may call on the system bus: the
    /// ones that only read, and the recording ones (a client gets only its own samples).
    /// `dbus/org.proximityd.conf` allows exactly these to users outside root and the group
    /// `proximityd` (a test checks), with `Properties.Get`/`GetAll`, `GetManagedObjects`,
    /// `Introspect` and `Peer`; every other method call is theirs alone.
    public static let methodsForEveryone: [(interface: InterfaceName, member: MemberName)] = [
        Node1.getPeers.member, Node1.getRanging.member, Node1.getIdentities.member, Node1.getPeer.member,
        Node1.startRecording.member, Node1.stopRecording.member,
        RegionMonitor1.getMonitoredRegions.member, RegionMonitor1.requestState.member, RegionMonitor1.getRegion.member,
        AlertManager1.getAlerts.member, AlertManager1.getDefinitions.member, AlertManager1.getAlert.member,
        Profile1.getRules.member, Profile1.testRule.member,
        EventLog1.getEvents.member,
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
