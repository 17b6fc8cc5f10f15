import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Synchronization
import Testing

func iBeacon(_ name: String, _ address: String, at position: Position, minor: UInt16 = 1) -> BeaconSpec {
    BeaconSpec(name: name, address: address,
               frame: .iBeacon(uuid: UUID(uuidString: "f7826da6-4fa2-4e98-8024-bc5b71e0893e")!, major: 1, minor: minor, measuredPower: -59),
               trajectory: Trajectory(fixed: position))
}

let adapterPath: ObjectPath = "/org/bluez/hci0"
let betaPath: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_02"
let alphaPath: ObjectPath = "/org/bluez/hci0/dev_AA_00_00_00_00_01"
let serviceUUID = "b89491c9-43dd-4d75-bf16-dff381aed967"

extension SignalLog {
    /// Subscribes `connection` to everything org.bluez and the bus send.
    static func bluez(_ connection: DBusConnection) async throws -> SignalLog {
        SignalLog(try await connection.subscribe(MatchRule(sender: BlueZ.service)))
    }
}

extension DBusMessage {
    func isInterfacesAdded(_ path: ObjectPath) -> Bool {
        member == "InterfacesAdded" && body.first?.objectPath == path
    }
    func isInterfacesRemoved(_ path: ObjectPath) -> Bool {
        member == "InterfacesRemoved" && body.first?.objectPath == path
    }
    /// `PropertiesChanged` of `interface` at `path`.
    func isChange(_ path: ObjectPath, _ interface: InterfaceName = BlueZ.deviceInterface) -> Bool {
        member == "PropertiesChanged" && self.path == path && body.first?.string == interface.rawValue
    }
    var changed: [String: DBusValue] { (body.count > 1 ? body[1].stringKeyedDictionary : nil)?.mapValues(\.unwrapped) ?? [:] }
    var invalidated: [String] { (body.count > 2 ? body[2].arrayElements : nil)?.compactMap(\.string) ?? [] }
    /// The properties of `interface` in an `InterfacesAdded`.
    func added(_ interface: InterfaceName) -> [String: DBusValue]? {
        guard body.count > 1, let ifaces = body[1].stringKeyedDictionary else { return nil }
        return ifaces[interface.rawValue]?.stringKeyedDictionary?.mapValues(\.unwrapped)
    }
}

extension DBusConnection {
    func bluez(_ path: ObjectPath, _ interface: InterfaceName, _ member: MemberName, _ arguments: [DBusValue] = [],
               timeout: Duration = .seconds(10)) async throws -> [DBusValue] {
        try await call(destination: BlueZ.service, path: path, interface: interface, member: member, arguments, timeout: timeout)
    }

    func adapter(_ member: MemberName, _ arguments: [DBusValue] = []) async throws {
        _ = try await bluez(adapterPath, BlueZ.adapterInterface, member, arguments)
    }
}

/// Expects `body` to fail with the D-Bus error `name` (and, if given, `message`).
func expectError(_ name: String, _ message: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
                 _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected \(name), got success", sourceLocation: sourceLocation)
    } catch let error as DBusError {
        #expect(error.name.rawValue == name, sourceLocation: sourceLocation)
        if let message { #expect(error.message == message, sourceLocation: sourceLocation) }
    } catch {
        Issue.record("expected \(name), got \(error)", sourceLocation: sourceLocation)
    }
}

/// A client's `org.bluez.LEAdvertisement1`, exported by a test, recording `Release`.
final class TestAdvertisement: Sendable {
    let path: ObjectPath
    let object: DBusObject

    init(on connection: DBusConnection, path: ObjectPath = "/org/test/adv0", properties: [String: DBusValue]) async throws {
        self.path = path
        let released = EventRecorder<ContinuousClock.Instant>()
        let declared = properties.sorted { $0.key < $1.key }.map { DBusProperty($0.key, $0.value.type, $0.value) }
        object = try await connection.export([DBusInterface(BlueZ.advertisementInterface, methods: [
            DBusMethod("Release") { _ in
                released.record(.now)
                return []
            },
        ], properties: declared)], at: path)
        self.released = released
    }
    /// Each `Release` call, when it came.
    private let released: EventRecorder<ContinuousClock.Instant>
    var releases: Int { released.count }
    func waitForReleases(_ n: Int) async throws {
        try await released.require("release \(n)", from: n - 1, timeout: .seconds(5)) { _ in true }
    }

    /// Registers it with a box's adapter.
    func register(_ connection: DBusConnection) async throws {
        _ = try await connection.bluez(adapterPath, BlueZ.advertisingManagerInterface, "RegisterAdvertisement",
                                       [.objectPath(path), .vardict([:])])
    }
}

/// The peripheral advertisement proximityd registers: connectable, the general service UUID.
func peripheralAdvertisement(discoverable: Bool = false, name: String? = nil) -> [String: DBusValue] {
    var p: [String: DBusValue] = ["Type": .string("peripheral"), "ServiceUUIDs": .strings([serviceUUID])]
    if discoverable { p["Discoverable"] = .boolean(true) }
    if let name { p["LocalName"] = .string(name) }
    return p
}

/// A GATT application like proximityd's: one primary service, one read-only characteristic whose
/// value is `identity`, honouring `offset`. Records the options of every ReadValue.
final class TestGattApplication: Sendable {
    let root: ObjectPath = "/org/test/app"
    let identity: [UInt8]
    private final class Reads: Sendable {
        let mutex = Mutex<[[String: DBusValue]]>([])
    }
    private let reads = Reads()
    var readOptions: [[String: DBusValue]] { reads.mutex.withLock { $0 } }

    init(on connection: DBusConnection, identity: String, characteristicUUID: String = "8e0d1bd0-4a4b-4c4c-9d9d-1f1f1f1f1f1f") async throws {
        self.identity = Array(identity.utf8)
        try await connection.addObjectManager(at: root)
        _ = try await connection.export([DBusInterface(BlueZ.gattServiceInterface, properties: [
            DBusProperty("UUID", .string, .string(serviceUUID)),
            DBusProperty("Primary", .boolean, .boolean(true)),
        ])], at: "/org/test/app/service0")
        let value = self.identity
        let reads = self.reads
        _ = try await connection.export([DBusInterface(BlueZ.gattCharacteristicInterface, methods: [
            DBusMethod("ReadValue", inputs: [DBusArgument("options", .dictionary(key: .string, value: .variant))],
                       outputs: [DBusArgument("value", .array(.byte))]) { call in
                let options = call.arguments[0].stringKeyedDictionary?.mapValues(\.unwrapped) ?? [:]
                reads.mutex.withLock { $0.append(options) }
                let offset = Int(options["offset"]?.integer ?? 0)
                guard offset <= value.count else {
                    throw DBusError("org.bluez.Error.InvalidOffset", "Invalid offset")
                }
                return [.bytes(value[offset...])]
            },
        ], properties: [
            DBusProperty("UUID", .string, .string(characteristicUUID)),
            DBusProperty("Service", .objectPath, .objectPath("/org/test/app/service0")),
            DBusProperty("Flags", .array(.string), .strings(["read"])),
        ])], at: "/org/test/app/service0/char0")
    }

    func register(_ connection: DBusConnection) async throws {
        _ = try await connection.bluez(adapterPath, BlueZ.gattManagerInterface, "RegisterApplication",
                                       [.objectPath(root), .vardict([:])])
    }
}
