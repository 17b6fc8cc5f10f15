import DBusKit
import Foundation

/// A hello: a peer that connected to this node wrote its identity to the hello characteristic.
public struct GattHello: Sendable, Hashable {
    /// The writer as BlueZ names it (`options["device"]`): `/org/bluez/hciN/dev_XX_…`.
    public var device: ObjectPath
    /// The identity it gave.
    public var identity: UUID
    /// Whether it proved it (the trusted protocol), or only said it (the open one).
    public var verified: Bool
    /// Which key proved it (its fingerprint), so that a hello opened with a key a reload has
    /// just replaced is not taken under the new one.
    public var key: String?

    public init(device: ObjectPath, identity: UUID, verified: Bool, key: String? = nil) {
        self.device = device
        self.identity = identity
        self.verified = verified
        self.key = key
    }
}

/// What the identity, challenge and hello characteristics answer: the open protocol
/// (``OpenIdentityService``), or the trusted one (the node's, with the fleet's key).
public protocol GattIdentityService: Sendable {
    /// The identity characteristic's whole value for the reader `device` (BlueZ's path; nil when
    /// BlueZ did not say). `fresh`: a read at offset 0, which starts a new value; reads at an
    /// offset continue the last one.
    func identity(for device: ObjectPath?, fresh: Bool) throws(DBusError) -> [UInt8]
    /// The challenge characteristic's value for `device` (a read at offset 0 makes a new one).
    func challenge(for device: ObjectPath, fresh: Bool) throws(DBusError) -> [UInt8]
    /// A hello `device` wrote: the identity it gives, or an error for BlueZ to answer with.
    func hello(_ value: [UInt8], from device: ObjectPath) throws(DBusError) -> GattHello
}

/// The open protocol, as the seeds' scheme has it: the identity to anyone who reads, a hello is
/// the writer's identity's 16 bytes (unverified), and no challenge.
public struct OpenIdentityService: GattIdentityService {
    public let value: [UInt8]

    public init(identity: UUID) {
        value = GattApplication.identityValue(identity)
    }

    public func identity(for device: ObjectPath?, fresh: Bool) -> [UInt8] { value }

    public func challenge(for device: ObjectPath, fresh: Bool) throws(DBusError) -> [UInt8] {
        throw DBusError(GattApplication.notSupportedError, "this node is not in a trusted fleet: it has no challenge")
    }

    public func hello(_ value: [UInt8], from device: ObjectPath) throws(DBusError) -> GattHello {
        guard value.count == 16 else {
            throw DBusError(GattApplication.invalidValueLengthError, "a hello is an identity's 16 bytes, not \(value.count)")
        }
        let b = value
        let uuid = UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]))
        return GattHello(device: device, identity: uuid, verified: false)
    }
}

/// The node's exported GATT application: one primary service (the general UUID) with three
/// characteristics, whose values a ``GattIdentityService`` gives:
///
/// - the identity (``ProximityUUIDs/identityCharacteristic``, read-only): in the open protocol the
///   node's specific UUID as 36 lowercase ASCII characters;
/// - the hello (``ProximityUUIDs/helloCharacteristic``, write with response), where a node that
///   connected to identify this one introduces itself, so one link identifies both;
/// - the challenge (``ProximityUUIDs/challengeCharacteristic``, read-only): the trusted protocol's
///   fresh challenge for the reader; the open protocol answers it with `NotSupported`.
///
/// The tree, with an object manager at the root as `RegisterApplication` requires:
///
/// ```
/// /org/proximityd_bluez/gatt                  org.freedesktop.DBus.ObjectManager
/// /org/proximityd_bluez/gatt/service0         org.bluez.GattService1         UUID, Primary true
/// /org/proximityd_bluez/gatt/service0/char0   org.bluez.GattCharacteristic1  UUID, Service, Flags ["read"]
/// /org/proximityd_bluez/gatt/service0/char1   org.bluez.GattCharacteristic1  UUID, Service, Flags ["write"]
/// /org/proximityd_bluez/gatt/service0/char2   org.bluez.GattCharacteristic1  UUID, Service, Flags ["read"]
/// ```
///
/// `ReadValue` honours `offset`: 36 bytes do not fit one ATT read on a 23-byte MTU (22 bytes),
/// so the peer's BlueZ reads on with offsets 22 and 36 … An offset past the end is refused with
/// `org.bluez.Error.InvalidOffset`, which BlueZ turns into the ATT error Invalid Offset. All three
/// characteristics answer only the owner of `org.bluez` (``BlueZCallers``).
public final class GattApplication: Sendable {
    public static let defaultRoot: ObjectPath = BlueZExports.gatt
    /// The error an offset past the end gets (BlueZ maps it to ATT "Invalid Offset").
    public static let invalidOffsetError: ErrorName = "org.bluez.Error.InvalidOffset"
    /// The error a hello of the wrong length gets (ATT "Invalid Attribute Value Length").
    public static let invalidValueLengthError: ErrorName = "org.bluez.Error.InvalidValueLength"
    /// The error of a characteristic the protocol in force does not offer (ATT "Request Not Supported").
    public static let notSupportedError: ErrorName = "org.bluez.Error.NotSupported"
    /// The error of a hello that does not prove membership (ATT "Insufficient Authorization").
    public static let notAuthorizedError: ErrorName = "org.bluez.Error.NotAuthorized"

    public let root: ObjectPath
    public let servicePath: ObjectPath
    public let characteristicPath: ObjectPath
    public let helloPath: ObjectPath
    public let challengePath: ObjectPath
    /// One element per accepted hello.
    public let hellos: AsyncStream<GattHello>
    private let objects: [DBusObject]

    private init(root: ObjectPath, servicePath: ObjectPath, characteristicPath: ObjectPath, helloPath: ObjectPath,
                 challengePath: ObjectPath,
                 hellos: AsyncStream<GattHello>, objects: [DBusObject]) {
        self.root = root
        self.servicePath = servicePath
        self.characteristicPath = characteristicPath
        self.helloPath = helloPath
        self.challengePath = challengePath
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

    static func offset(_ options: [String: DBusValue], limit: Int) throws(DBusError) -> Int {
        guard let given = options["offset"]?.unwrapped else { return 0 }
        guard let wide = given.integer else {
            throw DBusError("org.bluez.Error.InvalidArguments", "offset must be an unsigned integer")
        }
        guard wide >= 0, wide <= Int64(limit) else { throw DBusError(invalidOffsetError, "Invalid offset") }
        return Int(wide)
    }

    /// Checks a `WriteValue` on the hello characteristic (at offset 0, from a device BlueZ names)
    /// and has `service` read it.
    public static func hello(_ value: [UInt8], options: [String: DBusValue],
                             service: any GattIdentityService) throws(DBusError) -> GattHello {
        guard try offset(options, limit: 0) == 0 else { throw DBusError(invalidOffsetError, "Invalid offset") }
        guard let device = options["device"]?.unwrapped.objectPath else {
            throw DBusError("org.bluez.Error.InvalidArguments", "no device in the options")
        }
        return try service.hello(value, from: device)
    }

    /// `ReadValue` of a value `make` gives for the reader: a read at offset 0 makes a new one.
    static func read(options: [String: DBusValue], _ make: (ObjectPath?, Bool) throws(DBusError) -> [UInt8]) throws(DBusError) -> [UInt8] {
        let device = options["device"]?.unwrapped.objectPath
        let fresh = options["offset"]?.unwrapped.integer.map { $0 == 0 } ?? true
        return try read(try make(device, fresh), options: options)
    }

    /// Exports the tree below `root` on `connection`. Register it with ``register(with:)``.
    public static func export(on connection: DBusConnection, at root: ObjectPath = defaultRoot,
                              serviceUUID: String, service identityService: any GattIdentityService,
                              characteristicUUID: String = ProximityUUIDs.identityCharacteristic,
                              helloUUID: String = ProximityUUIDs.helloCharacteristic,
                              challengeUUID: String = ProximityUUIDs.challengeCharacteristic,
                              callers: BlueZCallers? = nil) async throws -> GattApplication {
        let callers = callers ?? BlueZCallers(connection: connection)
        let servicePath = root.appending(escaped: "service0")
        let characteristicPath = servicePath.appending(escaped: "char0")
        let helloPath = servicePath.appending(escaped: "char1")
        let challengePath = servicePath.appending(escaped: "char2")
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
                return [.bytes(try read(options: call.arguments.first?.stringKeyedDictionary ?? [:], identityService.identity(for:fresh:)))]
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
                sink.yield(try hello(written, options: call.arguments[1].stringKeyedDictionary ?? [:], service: identityService))
                return []
            },
        ], properties: [
            DBusProperty("UUID", .string, .string(helloUUID.lowercased()), changeSignal: .const),
            DBusProperty("Service", .objectPath, .objectPath(servicePath), changeSignal: .const),
            DBusProperty("Flags", .array(.string), .strings(["write"]), changeSignal: .const),
        ])], at: helloPath)
        let challengeCharacteristic = try await connection.export([DBusInterface(BlueZService.gattCharacteristicInterface, methods: [
            DBusMethod("ReadValue", inputs: [options], outputs: [DBusArgument("value", .array(.byte))]) { call in
                try await callers.require(call)
                return [.bytes(try read(options: call.arguments.first?.stringKeyedDictionary ?? [:]) { (device, fresh) throws(DBusError) in
                    guard let device else { throw DBusError("org.bluez.Error.InvalidArguments", "no device in the options") }
                    return try identityService.challenge(for: device, fresh: fresh)
                })]
            },
        ], properties: [
            DBusProperty("UUID", .string, .string(challengeUUID.lowercased()), changeSignal: .const),
            DBusProperty("Service", .objectPath, .objectPath(servicePath), changeSignal: .const),
            DBusProperty("Flags", .array(.string), .strings(["read"]), changeSignal: .const),
        ])], at: challengePath)
        return GattApplication(root: root, servicePath: servicePath, characteristicPath: characteristicPath, helloPath: helloPath,
                               challengePath: challengePath, hellos: hellos,
                               objects: [challengeCharacteristic, helloCharacteristic, characteristic, service])
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
