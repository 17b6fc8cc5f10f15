import DBusKit

/// A node's peers, kept current from its signals: what `proximityctl watch` shows, without
/// polling.
///
/// The algorithm is the one of the BlueZ client's object mirror (`docs/bluez-client.md`):
///
/// 1. **Match rules first.** `NameOwnerChanged` for the node's name, then the signals the node
///    sends below `/org/proximityd`: `InterfacesAdded` / `InterfacesRemoved` of its object
///    manager at `/org/proximityd` and `PropertiesChanged` of the `Peer1` objects below
///    `/org/proximityd/peers`. These come through **one** rule (the node as sender, path namespace
///    `/org/proximityd`), so they arrive in one stream in the order the node sent them: DBusKit
///    gives each subscription its own stream, two streams are not ordered with respect to each
///    other, and a `PropertiesChanged` must never be applied before the `InterfacesAdded` of its
///    object. The rule also passes `FoundDevices` and Node1's own `PropertiesChanged`, which are
///    ignored. DBusKit's `subscribe` returns once the bus has the rule, so nothing sent from then
///    on is missed.
/// 2. **Then one `GetManagedObjects`**: its `Peer1` objects become the table. Signals that arrive
///    meanwhile wait in the stream.
/// 3. **Signals that raced the snapshot** are placed by their serial: one sender numbers its
///    messages in the order it sends them, and the reply has a serial too. A signal sent after the
///    reply is applied. One sent before it is not (the snapshot holds its effect, and an older
///    value must not overwrite a newer one), except an `InterfacesAdded` of a peer the snapshot
///    lacks, for a server that builds its reply before sending the signals it had queued; that
///    peer's later changes and removal are then applied too.
/// 4. **The node leaving** (its name losing the owner that answered the snapshot) ends
///    ``follow()`` with ``NodeConnectionError/nodeLeft(bus:name:)``.
///
/// ```swift
/// let live = try await LivePeerTable.start(node)
/// // in a child task:  try await live.follow()
/// let peers = await live.peers
/// ```
public actor LivePeerTable {
    public nonisolated let node: NodeProxy
    private var table: [ObjectPath: PeerProperties]
    private let signals: DBusSignalStream
    private let ownerChanges: DBusSignalStream
    /// The unique name that answered the snapshot: only its signals count.
    private let owner: BusName
    private let snapshotSerial: UInt32
    /// A signal sent after the snapshot was seen: everything older is past.
    private var caughtUp = false
    /// Peers added by signals older than the snapshot (step 3).
    private var tentative: Set<ObjectPath> = []
    private var following = false

    private init(node: NodeProxy, table: [ObjectPath: PeerProperties], signals: DBusSignalStream,
                 ownerChanges: DBusSignalStream, owner: BusName, snapshotSerial: UInt32) {
        self.node = node
        self.table = table
        self.signals = signals
        self.ownerChanges = ownerChanges
        self.owner = owner
        self.snapshotSerial = snapshotSerial
    }

    /// Subscribes, then takes the snapshot (steps 1 and 2). Throws the bus's `DBusError` if a
    /// subscription fails, ``NodeConnectionError/nodeLeft(bus:name:)`` if the node is gone by
    /// the time of the snapshot.
    public static func start(_ node: NodeProxy) async throws -> LivePeerTable {
        let connection = node.connection
        let ownerChanges = try await connection.subscribe(MatchRule(
            sender: .bus, path: "/org/freedesktop/DBus", interface: .bus, member: "NameOwnerChanged", arg0: node.name.rawValue))
        let signals = try await connection.subscribe(MatchRule(sender: node.name, pathNamespace: ProximityBus.rootPath))
        let reply: DBusMessage
        do {
            reply = try await node.managedObjects()
        } catch let error as DBusError where error.name == .serviceUnknown || error.name == .nameHasNoOwner {
            throw NodeConnectionError.nodeLeft(bus: node.bus, name: node.name)
        }
        return LivePeerTable(node: node, table: node.peerObjects(in: reply.body), signals: signals, ownerChanges: ownerChanges,
                             owner: reply.sender ?? node.owner, snapshotSerial: reply.serial)
    }

    /// The peers now, keyed by object path.
    public var peers: [ObjectPath: PeerProperties] { table }

    /// Applies the node's signals as they arrive (steps 3 and 4). Returns when the task is
    /// cancelled; throws ``NodeConnectionError/nodeLeft(bus:name:)`` when the node leaves the
    /// bus and ``NodeConnectionError/disconnected(bus:)`` when the connection closes. Call it once.
    public func follow() async throws(NodeConnectionError) {
        precondition(!following, "LivePeerTable.follow() called twice")
        following = true
        let (signals, ownerChanges, name, owner) = (self.signals, self.ownerChanges, node.name.rawValue, owner.rawValue)
        let left = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await message in signals { await self.apply(message) }
                return false
            }
            group.addTask {
                for await message in ownerChanges {
                    if message.body.count == 3, message.body[0].string == name, message.body[1].string == owner { return true }
                }
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if left { throw .nodeLeft(bus: node.bus, name: node.name) }
        if Task.isCancelled { return }
        throw .disconnected(bus: node.bus)
    }

    private func apply(_ message: DBusMessage) {
        guard message.sender == owner else { return }
        // Serials wrap at 2³²: compare by distance.
        let older = !caughtUp && Int32(bitPattern: message.serial &- snapshotSerial) < 0
        if !older && !caughtUp {
            caughtUp = true
            tentative = []
        }
        let peer1 = ProximityBus.Peer1.interface.rawValue
        switch (message.interface, message.member) {
        case (.objectManager?, "InterfacesAdded"?):
            guard message.path == ProximityBus.rootPath, message.body.count >= 2, let path = message.body[0].objectPath,
                  path.isDescendant(of: ProximityBus.peersPath, orEqual: false),
                  let properties = message.body[1].dictEntries?.first(where: { $0.key.string == peer1 })?.value else { return }
            if older {
                guard table[path] == nil else { return }
                tentative.insert(path)
            }
            table[path] = PeerProperties(Lenient.properties(properties))
        case (.objectManager?, "InterfacesRemoved"?):
            guard message.path == ProximityBus.rootPath, message.body.count >= 2, let path = message.body[0].objectPath,
                  message.body[1].arrayElements?.contains(where: { $0.string == peer1 }) == true else { return }
            if older {
                guard tentative.remove(path) != nil else { return }
            }
            table[path] = nil
        case (.properties?, "PropertiesChanged"?):
            guard let path = message.path, message.body.count >= 2, message.body[0].string == peer1 else { return }
            if older && !tentative.contains(path) { return }
            let invalidated = message.body.count >= 3 ? (message.body[2].arrayElements ?? []).compactMap(\.string) : []
            table[path]?.apply(changed: Lenient.properties(message.body[1]), invalidated: invalidated)
        default:
            break
        }
    }
}
