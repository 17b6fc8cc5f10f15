import DBusKit

/// The names of the node's D-Bus API (`docs/dbus-api.md`).
public enum NodeAPI {
    public static let rootPath: ObjectPath = "/org/proximityd"
    public static let node1: InterfaceName = "org.proximityd.Node1"
}

/// The current state of the node as `org.proximityd.Node1` shows it.
public struct NodeStatus: Sendable, Equatable {
    public var identifier: String
    public var serviceUUID: String
    public var name: String
    public var advertising: Bool
    public var discovering: Bool
}

extension NodeAPI {
    /// The declaration of `org.proximityd.Node1`. `dbus/org.proximityd.Node1.xml` is this
    /// declaration's introspection, checked by a test against the running daemon.
    public static func node1Interface(status: NodeStatus, peers: @escaping @Sendable () async -> [ObjectPath]) -> DBusInterface {
        DBusInterface(node1, methods: [
            DBusMethod("GetPeers", outputs: [DBusArgument("peers", .array(.objectPath))]) { _ in
                [.array(element: .objectPath, await peers().map { .objectPath($0) })]
            },
        ], properties: [
            DBusProperty("Identifier", .string, .string(status.identifier), changeSignal: .const),
            DBusProperty("ServiceUUID", .string, .string(status.serviceUUID), changeSignal: .const),
            DBusProperty("Name", .string, .string(status.name), changeSignal: .const),
            DBusProperty("Advertising", .boolean, .boolean(status.advertising)),
            DBusProperty("Discovering", .boolean, .boolean(status.discovering)),
        ])
    }
}
