import DBusKit
import Foundation

/// The node's exported GATT application: one primary service (the general UUID) with one
/// read-only characteristic (``ProximityUUIDs/identityCharacteristic``) whose value is the node's
/// identity, its specific UUID as 36 lowercase ASCII characters.
///
/// The tree, with an object manager at the root as `RegisterApplication` requires:
///
/// ```
/// /org/proximityd/gatt                    org.freedesktop.DBus.ObjectManager
/// /org/proximityd/gatt/service0           org.bluez.GattService1         UUID, Primary true
/// /org/proximityd/gatt/service0/char0     org.bluez.GattCharacteristic1  UUID, Service, Flags ["read"]
/// ```
///
/// `ReadValue` honours `offset`: 36 bytes do not fit one ATT read on a 23-byte MTU (22 bytes),
/// so the peer's BlueZ reads on with offsets 22 and 36 … An offset past the end is refused with
/// `org.bluez.Error.InvalidOffset`, which BlueZ turns into the ATT error Invalid Offset.
public final class GattApplication: Sendable {
    public static let defaultRoot: ObjectPath = "/org/proximityd/gatt"
    /// The error an offset past the end gets (BlueZ maps it to ATT "Invalid Offset").
    public static let invalidOffsetError: ErrorName = "org.bluez.Error.InvalidOffset"

    public let root: ObjectPath
    public let servicePath: ObjectPath
    public let characteristicPath: ObjectPath
    /// The identity characteristic's value.
    public let value: [UInt8]
    private let objects: [DBusObject]

    private init(root: ObjectPath, servicePath: ObjectPath, characteristicPath: ObjectPath, value: [UInt8], objects: [DBusObject]) {
        self.root = root
        self.servicePath = servicePath
        self.characteristicPath = characteristicPath
        self.value = value
        self.objects = objects
    }

    /// The identity as the characteristic serves it: the lowercase textual UUID in UTF-8.
    public static func identityValue(_ identity: UUID) -> [UInt8] {
        Array(identity.uuidString.lowercased().utf8)
    }

    /// `ReadValue`'s answer for `options`: the value from `offset` (a `q`, 0 when absent) on.
    public static func read(_ value: [UInt8], options: [String: DBusValue]) throws(DBusError) -> [UInt8] {
        var offset = 0
        if let given = options["offset"]?.unwrapped {
            guard let wide = given.integer else {
                throw DBusError("org.bluez.Error.InvalidArguments", "offset must be an unsigned integer")
            }
            guard wide >= 0, wide <= Int64(value.count) else { throw DBusError(invalidOffsetError, "Invalid offset") }
            offset = Int(wide)
        }
        return Array(value[offset...])
    }

    /// Exports the tree below `root` on `connection`. Register it with ``register(with:)``.
    public static func export(on connection: DBusConnection, at root: ObjectPath = defaultRoot,
                              serviceUUID: String, identity: UUID,
                              characteristicUUID: String = ProximityUUIDs.identityCharacteristic) async throws -> GattApplication {
        let servicePath = root.appending(escaped: "service0")
        let characteristicPath = servicePath.appending(escaped: "char0")
        let value = identityValue(identity)
        try await connection.addObjectManager(at: root)
        let service = try await connection.export([DBusInterface(BlueZService.gattServiceInterface, properties: [
            DBusProperty("UUID", .string, .string(serviceUUID.lowercased()), changeSignal: .const),
            DBusProperty("Primary", .boolean, .boolean(true), changeSignal: .const),
            DBusProperty("Includes", .array(.objectPath), .array(element: .objectPath, []), changeSignal: .const),
        ])], at: servicePath)
        let characteristic = try await connection.export([DBusInterface(BlueZService.gattCharacteristicInterface, methods: [
            DBusMethod("ReadValue", inputs: [DBusArgument("options", .dictionary(key: .string, value: .variant))],
                       outputs: [DBusArgument("value", .array(.byte))]) { call in
                let options = call.arguments.first?.stringKeyedDictionary ?? [:]
                return [.bytes(try read(value, options: options))]
            },
        ], properties: [
            DBusProperty("UUID", .string, .string(characteristicUUID.lowercased()), changeSignal: .const),
            DBusProperty("Service", .objectPath, .objectPath(servicePath), changeSignal: .const),
            DBusProperty("Flags", .array(.string), .strings(["read"]), changeSignal: .const),
        ])], at: characteristicPath)
        return GattApplication(root: root, servicePath: servicePath, characteristicPath: characteristicPath, value: value,
                               objects: [characteristic, service])
    }

    /// `RegisterApplication` with an adapter.
    public func register(with manager: GattManager) async throws {
        try await manager.registerApplication(root)
    }

    /// `UnregisterApplication` with an adapter.
    public func unregister(from manager: GattManager) async throws {
        try await manager.unregisterApplication(root)
    }

    /// Removes the objects from the bus, children first.
    public func unexport() async {
        for object in objects { await object.unexport() }
    }
}
