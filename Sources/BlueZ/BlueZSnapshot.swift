import DBusKit

/// BlueZ's object tree at one moment: one `GetManagedObjects`, decoded as the mirror decodes it,
/// with the mirror's typed views. For one-shot clients (`proximityctl doctor`) that do not follow
/// changes; a node uses ``BlueZObjectMirror``.
public struct BlueZSnapshot: Sendable {
    /// Every object with every interface and property (variants unwrapped).
    public var objects: [ObjectPath: BlueZObjectMirror.Interfaces]

    public init(objects: [ObjectPath: BlueZObjectMirror.Interfaces]) {
        self.objects = objects
    }

    /// Calls `GetManagedObjects` on `service`. Throws the call's `DBusError`, or
    /// `org.freedesktop.DBus.Error.InvalidSignature` if the reply is not `a{oa{sa{sv}}}`.
    public static func take(on connection: DBusConnection, service: BusName = BlueZService.name,
                            timeout: Duration = .seconds(10)) async throws -> BlueZSnapshot {
        let reply = try await connection.callMessage(destination: service, path: BlueZService.objectManagerPath,
                                                     interface: .objectManager, member: "GetManagedObjects", timeout: timeout)
        guard let objects = BlueZObjectMirror.decodeManagedObjects(reply.body) else {
            throw DBusError(.invalidSignature, "GetManagedObjects answered '\(reply.signature)', expected 'a{oa{sa{sv}}}'")
        }
        return BlueZSnapshot(objects: objects)
    }

    public func properties(at path: ObjectPath, interface: InterfaceName) -> BlueZObjectMirror.Properties? {
        objects[path]?[interface.rawValue]
    }

    /// The adapters, sorted by path.
    public var adapters: [AdapterInfo] {
        objects.keys.sorted().compactMap(adapter(at:))
    }

    public func adapter(at path: ObjectPath) -> AdapterInfo? {
        properties(at: path, interface: BlueZService.adapterInterface).map { AdapterInfo(path: path, properties: $0) }
    }

    /// The adapter's `LEAdvertisingManager1`, nil if it has none (not an LE adapter, or BlueZ
    /// older than 5.48 without `--experimental`).
    public func advertisingManager(at path: ObjectPath) -> AdvertisingManagerInfo? {
        properties(at: path, interface: BlueZService.advertisingManagerInterface).map { AdvertisingManagerInfo(path: path, properties: $0) }
    }

    public func devices(on adapter: ObjectPath? = nil) -> [DeviceInfo] {
        objects.keys.sorted().compactMap { path in
            properties(at: path, interface: BlueZService.deviceInterface).map { DeviceInfo(path: path, properties: $0) }
        }.filter { adapter == nil || $0.adapter == adapter }
    }
}
