import DBusKit

/// What a phone needs to find a box in its Bluetooth settings and pair with it: the GATT side of
/// `proximityctl irks enroll`.
///
/// iOS lists in Settings › Bluetooth the LE peripherals that offer a service it knows, not a
/// generic one; like ESPresense's enrollment, the box offers the Heart Rate service (0x180D), with
/// a Heart Rate Measurement (0x2A37) that can only be read or subscribed to encrypted, and Device
/// Information (0x180A) with the manufacturer's name (0x2A29), also encrypted. The phone's first
/// access is answered "insufficient authentication" by bluetoothd, which is how a peripheral asks
/// for pairing (Apple's Accessory Design Guidelines); after it, the phone reads a constant 60 bpm.
/// Every call is taken from the owner of `org.bluez` only (``BlueZCallers``).
public final class PairingGattApplication: Sendable {
    public static let defaultRoot: ObjectPath = BlueZExports.enrollmentGatt
    public static let heartRateService = "0000180d-0000-1000-8000-00805f9b34fb"
    public static let heartRateMeasurement = "00002a37-0000-1000-8000-00805f9b34fb"
    public static let deviceInformationService = "0000180a-0000-1000-8000-00805f9b34fb"
    public static let manufacturerName = "00002a29-0000-1000-8000-00805f9b34fb"

    public let root: ObjectPath
    private let objects: [DBusObject]

    private init(root: ObjectPath, objects: [DBusObject]) {
        self.root = root
        self.objects = objects
    }

    public static func export(on connection: DBusConnection, at root: ObjectPath = defaultRoot,
                              callers: BlueZCallers? = nil) async throws -> PairingGattApplication {
        let callers = callers ?? BlueZCallers(connection: connection)
        try await connection.addObjectManager(at: root)
        let options = DBusArgument("options", .dictionary(key: .string, value: .variant))
        var objects: [DBusObject] = []
        func service(_ name: String, _ uuid: String) async throws -> ObjectPath {
            let path = root.appending(escaped: name)
            objects.append(try await connection.export([DBusInterface(BlueZService.gattServiceInterface, properties: [
                DBusProperty("UUID", .string, .string(uuid), changeSignal: .const),
                DBusProperty("Primary", .boolean, .boolean(true), changeSignal: .const),
                DBusProperty("Includes", .array(.objectPath), .array(element: .objectPath, []), changeSignal: .const),
            ])], at: path))
            return path
        }
        func characteristic(_ service: ObjectPath, _ uuid: String, flags: [String], value: [UInt8]) async throws {
            var methods = [
                DBusMethod("ReadValue", inputs: [options], outputs: [DBusArgument("value", .array(.byte))]) { call in
                    try await callers.require(call)
                    return [.bytes(try GattApplication.read(value, options: call.arguments.first?.stringKeyedDictionary ?? [:]))]
                },
            ]
            if flags.contains("notify") {
                methods.append(DBusMethod("StartNotify") { call in
                    try await callers.require(call)
                    return []
                })
                methods.append(DBusMethod("StopNotify") { call in
                    try await callers.require(call)
                    return []
                })
            }
            objects.append(try await connection.export([DBusInterface(BlueZService.gattCharacteristicInterface,
                                                                      methods: methods, properties: [
                DBusProperty("UUID", .string, .string(uuid), changeSignal: .const),
                DBusProperty("Service", .objectPath, .objectPath(service), changeSignal: .const),
                DBusProperty("Flags", .array(.string), .strings(flags), changeSignal: .const),
            ])], at: service.appending(escaped: "char0")))
        }
        let heartRate = try await service("service0", heartRateService)
        try await characteristic(heartRate, heartRateMeasurement, flags: ["encrypt-read", "notify"], value: [0x00, 60])
        let information = try await service("service1", deviceInformationService)
        try await characteristic(information, manufacturerName, flags: ["encrypt-read"], value: Array("proximityd".utf8))
        return PairingGattApplication(root: root, objects: objects.reversed())
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
