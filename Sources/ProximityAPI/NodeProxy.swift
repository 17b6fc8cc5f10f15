import DBusKit

/// Why a client could not reach a node, or lost it. The descriptions are the lines
/// `proximityctl` prints.
public enum NodeConnectionError: Error, Sendable, CustomStringConvertible {
    /// The bus itself cannot be reached.
    case cannotConnect(bus: BusAddress, DBusError)
    /// The bus did not answer `GetNameOwner`.
    case cannotAskOwner(bus: BusAddress, name: BusName, DBusError)
    /// Nobody owns the node's name.
    case notRunning(bus: BusAddress, name: BusName)
    /// The node left the bus (or was replaced by another process) while a client followed it.
    case nodeLeft(bus: BusAddress, name: BusName)
    /// The connection to the bus closed while a client followed the node.
    case disconnected(bus: BusAddress)

    public var description: String {
        switch self {
        case .cannotConnect(let bus, let error): "cannot connect to the \(bus) bus: \(error.message)"
        case .cannotAskOwner(let bus, let name, let error): "cannot ask the \(bus) bus who owns \(name): \(error)"
        case .notRunning(let bus, let name): "proximityd is not running on the \(bus) bus (\(name) has no owner)"
        case .nodeLeft(let bus, let name): "\(name) left the \(bus) bus"
        case .disconnected(let bus): "the connection to the \(bus) bus closed"
        }
    }
}

/// A client's handle on one node: its bus name on one connection, with one async method per
/// member of `org.proximityd.Node1`.
///
/// Calls throw the `DBusError` the node or the bus answered (`org.proximityd.Error.*`,
/// `org.freedesktop.DBus.Error.AccessDenied`, `ServiceUnknown` once the node is gone, …).
public struct NodeProxy: Sendable {
    public let connection: DBusConnection
    /// Where the connection goes: for messages.
    public let bus: BusAddress
    /// The node's well-known name (`org.proximityd`, or the `--bus-name` it was started with).
    public let name: BusName
    /// The unique name that owned ``name`` when the proxy was made.
    public let owner: BusName
    /// Per call.
    public var timeout: Duration = .seconds(25)

    /// Connects to `bus` and checks that a node owns `name`. On failure the connection is closed
    /// again and the error says which step failed.
    public static func connect(to bus: BusAddress, name: BusName = ProximityBus.defaultBusName)
        async throws(NodeConnectionError) -> NodeProxy {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: bus)
        } catch {
            throw .cannotConnect(bus: bus, error)
        }
        do {
            return try await find(on: connection, bus: bus, name: name)
        } catch {
            await connection.close()
            throw error
        }
    }

    /// The node `name` on an open connection (which the caller keeps owning), if someone owns the
    /// name.
    public static func find(on connection: DBusConnection, bus: BusAddress, name: BusName = ProximityBus.defaultBusName)
        async throws(NodeConnectionError) -> NodeProxy {
        let owner: BusName?
        do {
            owner = try await connection.nameOwner(of: name)
        } catch {
            throw .cannotAskOwner(bus: bus, name: name, error as? DBusError ?? DBusError(.failed, "\(error)"))
        }
        guard let owner else { throw .notRunning(bus: bus, name: name) }
        return NodeProxy(connection: connection, bus: bus, name: name, owner: owner)
    }

    /// Closes the connection (the one ``connect(to:name:)`` opened).
    public func close() async {
        await connection.close()
    }

    /// Calls one of the methods of the node's interfaces at ``ProximityBus/rootPath``, as
    /// `ProximityBus` declares it: `try await node.call(ProximityBus.Node1.setPeerName, "phone", "Anna's phone")`.
    /// Every method is callable this way; the named functions below are shorthands.
    public func call<each A: DBusRepresentable, R: DBusReply>(_ method: DBusMethodSpec<repeat each A, R>,
                                                              _ arguments: repeat each A) async throws -> R.Value {
        try await connection.call(method, destination: name, path: ProximityBus.rootPath, repeat each arguments, timeout: timeout)
    }

    // MARK: - Node1

    /// `Properties.GetAll` of `Node1`.
    public func properties() async throws -> NodeProperties {
        NodeProperties(try await connection.getAllProperties(destination: name, path: ProximityBus.rootPath,
                                                             interface: ProximityBus.Node1.interface, timeout: timeout))
    }

    /// `GetPeers`: the peers of the last tick, sorted by path.
    public func peers() async throws -> [PeerProxy] {
        try await call(ProximityBus.Node1.getPeers).map(peer(at:))
    }

    /// Every peer object with its properties, from one `GetManagedObjects` (one round trip, one
    /// consistent moment), keyed by path.
    public func peerProperties() async throws -> [ObjectPath: PeerProperties] {
        peerObjects(in: try await managedObjects().body)
    }

    /// `GetRanging`: identifier → zone, as of the last tick.
    public func ranging() async throws -> [String: String] {
        try await call(ProximityBus.Node1.getRanging)
    }

    /// `GetIdentities`: Bluetooth address → identity of the peer nodes identified so far.
    public func identities() async throws -> [String: String] {
        try await call(ProximityBus.Node1.getIdentities)
    }

    /// `SetMeasuredPower`: the RSSI at 1 m to use for one peer (root and group `proximityd`).
    public func setMeasuredPower(_ power: Int16, for identifier: String) async throws {
        try await call(ProximityBus.Node1.setMeasuredPower, identifier, power)
    }

    /// `SetPeerName`: the display name of one peer (root and group `proximityd`); "" removes it.
    /// `org.proximityd.Error.NotPermitted` when the config file names the peer.
    public func setPeerName(_ name: String, for identifier: String) async throws {
        try await call(ProximityBus.Node1.setPeerName, identifier, name)
    }

    /// `AddIRK`: recognise the device whose identity resolving key is `key` (32 hexadecimal
    /// digits) as the peer `irk:<name>` (root and group `proximityd`). Replaces a key of the same
    /// name given over the bus; `org.proximityd.Error.NotPermitted` when the config file's `irks:`
    /// has the name.
    public func addIRK(_ name: String, key: String) async throws {
        try await call(ProximityBus.Node1.addIRK, name, key)
    }

    /// `RemoveIRK`: `org.proximityd.Error.DoesNotExist` if no IRK of that name was added over the bus.
    public func removeIRK(_ name: String) async throws {
        try await call(ProximityBus.Node1.removeIRK, name)
    }

    /// `ResetMeasuredPower`: `org.proximityd.Error.DoesNotExist` if none was set.
    public func resetMeasuredPower(for identifier: String) async throws {
        try await call(ProximityBus.Node1.resetMeasuredPower, identifier)
    }

    /// `StartRecording`: from the next report on, this connection receives a `Samples` signal at
    /// each report with every sample of `peers` (none: every peer). Subscribe with
    /// ``recordedBatches()`` first. Calling it again replaces the peers.
    public func startRecording(_ peers: [String]) async throws {
        try await call(ProximityBus.Node1.startRecording, peers)
    }

    /// `StopRecording`: `org.proximityd.Error.DoesNotExist` if this connection was not recording.
    public func stopRecording() async throws {
        try await call(ProximityBus.Node1.stopRecording)
    }

    /// The `Samples` signals the node sends this connection, from now on (call before
    /// ``startRecording(_:)``).
    public func recordedBatches() async throws -> AsyncStream<RecordedBatch> {
        let samples = try await connection.subscribe(MatchRule(sender: name, path: ProximityBus.rootPath,
                                                               interface: ProximityBus.Node1.interface,
                                                               member: ProximityBus.Node1.samples))
        return Self.decoded([samples], RecordedBatch.init)
    }

    /// Sets `ClearInterval` (seconds, above 0 and at most 3600; root and group `proximityd`).
    public func setClearInterval(_ seconds: Double) async throws {
        try await connection.setProperty(destination: name, path: ProximityBus.rootPath, interface: ProximityBus.Node1.interface,
                                         name: NodeProperties.Key.clearInterval.rawValue, value: .double(seconds),
                                         timeout: timeout)
    }

    // MARK: - Peers

    public func peer(at path: ObjectPath) -> PeerProxy {
        PeerProxy(node: self, path: path)
    }

    public func peer(identifier: String) -> PeerProxy {
        peer(at: ProximityBus.peerPath(identifier))
    }

    // MARK: - The object manager

    /// `GetManagedObjects` at ``ProximityBus/rootPath``, the whole reply (its sender and serial
    /// place it among the node's signals).
    func managedObjects() async throws -> DBusMessage {
        try await connection.callMessage(destination: name, path: ProximityBus.rootPath, interface: .objectManager,
                                         member: "GetManagedObjects", timeout: timeout)
    }

    /// The `Peer1` objects of a `GetManagedObjects` reply (the node's other objects, its
    /// advertisement and GATT application, are left out).
    func peerObjects(in body: [DBusValue]) -> [ObjectPath: PeerProperties] {
        var out: [ObjectPath: PeerProperties] = [:]
        for entry in body.first?.dictEntries ?? [] {
            guard let path = entry.key.objectPath, path.isDescendant(of: ProximityBus.peersPath, orEqual: false) else { continue }
            for interface in entry.value.dictEntries ?? [] where interface.key.string == ProximityBus.Peer1.interface.rawValue {
                out[path] = PeerProperties(Lenient.properties(interface.value))
            }
        }
        return out
    }
}

/// One `org.proximityd.Peer1` object of a node.
public struct PeerProxy: Sendable {
    public let node: NodeProxy
    public let path: ObjectPath

    /// The identifier the path encodes.
    public var identifier: String { path.decodedLastElement }

    /// `Properties.GetAll` of `Peer1`; `org.freedesktop.DBus.Error.UnknownObject` once the peer
    /// left the table.
    public func properties() async throws -> PeerProperties {
        PeerProperties(try await node.connection.getAllProperties(destination: node.name, path: path,
                                                                  interface: ProximityBus.Peer1.interface,
                                                                  timeout: node.timeout))
    }
}
