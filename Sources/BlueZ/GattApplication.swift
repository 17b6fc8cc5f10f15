import DBusKit
import Foundation

/// A hello: a peer that connected to this node wrote its identity to the hello characteristic.
public struct GattHello: Sendable, Hashable {
    /// The writer as BlueZ names it (`options["device"]`): `/org/bluez/hciN/dev_XX_…`.
    public var device: ObjectPath
    /// The bytes written: 16 for an identity (checked by the application).
    public var value: [UInt8]
}

/// The node's exported GATT application: one primary service (the general UUID) with two
/// characteristics:
///
/// - the identity (``ProximityUUIDs/identityCharacteristic``, read-only), the node's specific
///   UUID as 36 lowercase ASCII characters;
/// - the hello (``ProximityUUIDs/helloCharacteristic``, write with response), where a node that
///   connected to identify this one writes its own identity (16 bytes), so one link identifies both.
///
/// The tree, with an object manager at the root as `RegisterApplication` requires:
///
/// ```
/// /org/proximityd/gatt                    org.freedesktop.DBus.ObjectManager
/// /org/proximityd/gatt/service0           org.bluez.GattService1         UUID, Primary true
/// /org/proximityd/gatt/service0/char0     org.bluez.GattCharacteristic1  UUID, Service, Flags ["read"]
/// /org/proximityd/gatt/service0/char1     org.bluez.GattCharacteristic1  UUID, Service, Flags ["write"]
/// ```
///
/// `ReadValue` honours `offset`: 36 bytes do not fit one ATT read on a 23-byte MTU (22 bytes),
/// so the peer's BlueZ reads on with offsets 22 and 36 … An offset past the end is refused with
/// `org.bluez.Error.InvalidOffset`, which BlueZ turns into the ATT error Invalid Offset. Both
/// characteristics answer only the owner of `org.bluez` (``BlueZCallers``).
public final class GattApplication: Sendable {
    public static let defaultRoot: ObjectPath = "/org/proximityd/gatt"
    /// The error an offset past the end gets (BlueZ maps it to ATT "Invalid Offset").
    public static let invalidOffsetError: ErrorName = "org.bluez.Error.InvalidOffset"
    /// The error a hello of the wrong length gets (ATT "Invalid Attribute Value Length").
    public static let invalidValueLengthError: ErrorName = "org.bluez.Error.InvalidValueLength"

    public let root: ObjectPath
    public let servicePath: ObjectPath
    public let characteristicPath: ObjectPath
    public let helloPath: ObjectPath
    /// The identity characteristic's value.
    public let value: [UInt8]
    /// One element per accepted hello.
    public let hellos: AsyncStream<GattHello>
    private let objects: [DBusObject]

    private init(root: ObjectPath, servicePath: ObjectPath, characteristicPath: ObjectPath, helloPath: ObjectPath,
                 value: [UInt8], hellos: AsyncStream<GattHello>, objects: [DBusObject]) {
        self.root = root
        self.servicePath = servicePath
        self.characteristicPath = characteristicPath
        self.helloPath = helloPath
        self.value = value
        self.hellos = hellos
        self.objects = objects
    }

    /// The identity as the characteristic serves it: the lowercase textual UUID in UTF-8.
    public static func identityValue(_ identity: UUID) -> [UInt8] {
        Array(identity.uuidString.lowercased().utf8)
    }

    /// A hello's value: the identity's 16 bytes.
    public static func helloValue(_ identity: UUID) -> [UInt8] {
        withUnsafeBytes(of: identity.uuid) { Array($0) }
    }

    /// `ReadValue`'s answer for `options`: the value from `offset` (a `q`, 0 when absent) on.
    public static func read(_ value: [UInt8], options: [String: DBusValue]) throws(DBusError) -> [UInt8] {
        Array(value[try offset(options, limit: value.count)...])
    }

    private static func offset(_ options: [String: DBusValue], limit: Int) throws(DBusError) -> Int {
        guard let given = options["offset"]?.unwrapped else { return 0 }
        guard let wide = given.integer else {
            throw DBusError("org.bluez.Error.InvalidArguments", "offset must be an unsigned integer")
        }
        guard wide >= 0, wide <= Int64(limit) else { throw DBusError(invalidOffsetError, "Invalid offset") }
        return Int(wide)
    }

    /// Checks a `WriteValue` on the hello characteristic: at offset 0, exactly 16 bytes, from a
    /// device BlueZ names.
    public static func hello(_ value: [UInt8], options: [String: DBusValue]) throws(DBusError) -> GattHello {
        guard try offset(options, limit: 0) == 0 else { throw DBusError(invalidOffsetError, "Invalid offset") }
        guard value.count == 16 else {
            throw DBusError(invalidValueLengthError, "a hello is an identity's 16 bytes, not \(value.count)")
        }
        guard let device = options["device"]?.unwrapped.objectPath else {
            throw DBusError("org.bluez.Error.InvalidArguments", "no device in the options")
        }
        return GattHello(device: device, value: value)
    }

    /// Exports the tree below `root` on `connection`. Register it with ``register(with:)``.
    public static func export(on connection: DBusConnection, at root: ObjectPath = defaultRoot,
                              serviceUUID: String, identity: UUID,
                              characteristicUUID: String = ProximityUUIDs.identityCharacteristic,
                              helloUUID: String = ProximityUUIDs.helloCharacteristic,
                              callers: BlueZCallers? = nil) async throws -> GattApplication {
        let callers = callers ?? BlueZCallers(connection: connection)
        let servicePath = root.appending(escaped: "service0")
        let characteristicPath = servicePath.appending(escaped: "char0")
        let helloPath = servicePath.appending(escaped: "char1")
        let value = identityValue(identity)
        let (hellos, sink) = AsyncStream.makeStream(of: GattHello.self, bufferingPolicy: .bufferingNewest(256))
        try await connection.addObjectManager(at: root)
        let service = try await connection.export([DBusInterface(BlueZService.gattServiceInterface, properties: [
            DBusProperty("UUID", .string, .string(serviceUUID.lowercased()), changeSignal: .const),
            DBusProperty("Primary", .boolean, .boolean(true), changeSignal: .const),
            DBusProperty("Includes", .array(.objectPath), .array(element: .objectPath, []), changeSignal: .const),
        ])], at: servicePath)
        let options = DBusArgument("options", .dictionary(key: .string, value: .variant))
        let characteristic = try await connection.export([DBusInterface(BlueZService.gattCharacteristicInterface, methods: [
            DBusMethod("ReadValue", inputs: [options], outputs: [DBusArgument("value", .array(.byte))]) { call in
                try await callers.require(call)
                return [.bytes(try read(value, options: call.arguments.first?.stringKeyedDictionary ?? [:]))]
            },
        ], properties: [
            DBusProperty("UUID", .string, .string(characteristicUUID.lowercased()), changeSignal: .const),
            DBusProperty("Service", .objectPath, .objectPath(servicePath), changeSignal: .const),
            DBusProperty("Flags", .array(.string), .strings(["read"]), changeSignal: .const),
        ])], at: characteristicPath)
        let helloCharacteristic = try await connection.export([DBusInterface(BlueZService.gattCharacteristicInterface, methods: [
            DBusMethod("WriteValue", inputs: [DBusArgument("value", .array(.byte)), options]) { call in
                try await callers.require(call)
                let written = call.arguments[0].bytes ?? []
                sink.yield(try hello(written, options: call.arguments[1].stringKeyedDictionary ?? [:]))
                return []
            },
        ], properties: [
            DBusProperty("UUID", .string, .string(helloUUID.lowercased()), changeSignal: .const),
            DBusProperty("Service", .objectPath, .objectPath(servicePath), changeSignal: .const),
            DBusProperty("Flags", .array(.string), .strings(["write"]), changeSignal: .const),
        ])], at: helloPath)
        return GattApplication(root: root, servicePath: servicePath, characteristicPath: characteristicPath, helloPath: helloPath,
                               value: value, hellos: hellos, objects: [helloCharacteristic, characteristic, service])
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
