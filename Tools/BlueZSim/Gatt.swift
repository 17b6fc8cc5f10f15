import BlueZ
import DBusKit

/// A GATT application a client registered with `GattManager1.RegisterApplication`, read from its
/// `GetManagedObjects` and checked the way BlueZ 5.66's `src/gatt-database.c` checks it.
struct GattApplication: Sendable, Hashable {
    struct Descriptor: Sendable, Hashable {
        var path: ObjectPath
        var uuid: String
        var flags: [String]
    }
    struct Characteristic: Sendable, Hashable {
        var path: ObjectPath
        var uuid: String
        var flags: [String]
        var descriptors: [Descriptor]
        var notifies: Bool { flags.contains("notify") || flags.contains("indicate") }
    }
    struct Service: Sendable, Hashable {
        var path: ObjectPath
        var uuid: String
        var primary: Bool
        var characteristics: [Characteristic]
    }

    var owner: String
    var path: ObjectPath
    var services: [Service]

    static let characteristicFlags: Set<String> = [
        "broadcast", "read", "write-without-response", "write", "notify", "indicate", "authenticated-signed-writes",
        "extended-properties", "reliable-write", "writable-auxiliaries", "encrypt-read", "encrypt-write",
        "encrypt-authenticated-read", "encrypt-authenticated-write", "secure-read", "secure-write", "authorize",
    ]
    static let descriptorFlags: Set<String> = [
        "read", "write", "encrypt-read", "encrypt-write", "encrypt-authenticated-read", "encrypt-authenticated-write",
        "secure-read", "secure-write", "authorize",
    ]

    /// Builds the application from a `GetManagedObjects` reply. The errors are BlueZ's:
    /// `Failed` "No object received" (nothing under the path), "No valid service object found"
    /// (no service, or a characteristic without a known `Service` or valid `Flags`), and
    /// "Failed to create entry in database" (a service without a valid `UUID` or `Primary`, a
    /// characteristic without a valid `UUID`; the GAP and GATT services belong to BlueZ).
    static func parse(owner: String, path: ObjectPath, managedObjects: DBusValue) throws(BlueZError) -> GattApplication {
        guard case .dictionary(_, _, let entries) = managedObjects else { throw .failed("No object received") }
        var objects: [(ObjectPath, [String: [String: DBusValue]])] = []
        for entry in entries {
            guard let p = entry.key.objectPath, p.rawValue.hasPrefix(path.rawValue),
                  let interfaces = entry.value.dictEntries else { continue }
            var byInterface: [String: [String: DBusValue]] = [:]
            for i in interfaces {
                guard let name = i.key.string else { continue }
                byInterface[name] = (i.value.stringKeyedDictionary ?? [:]).mapValues(\.unwrapped)
            }
            objects.append((p, byInterface))
        }
        guard !objects.isEmpty else { throw .failed("No object received") }
        objects.sort { $0.0 < $1.0 }

        let invalid = BlueZError.failed("No valid service object found")
        let database = BlueZError.failed("Failed to create entry in database")
        var services: [Service] = []
        var rawServices: [(ObjectPath, [String: DBusValue])] = []
        for (p, i) in objects {
            if let props = i[BlueZ.gattServiceInterface.rawValue] { rawServices.append((p, props)) }
        }
        guard !rawServices.isEmpty else { throw invalid }
        var characteristics: [ObjectPath: [Characteristic]] = [:]
        var rawCharacteristics: [(ObjectPath, [String: DBusValue], ObjectPath)] = []
        let servicePaths = Set(rawServices.map(\.0))
        for (p, i) in objects {
            guard let props = i[BlueZ.gattCharacteristicInterface.rawValue] else { continue }
            guard let service = props["Service"]?.objectPath, servicePaths.contains(service),
                  let flags = props["Flags"].flatMap({ v -> [String]? in
                      guard case .array(.string, let items) = v else { return nil }
                      return items.compactMap(\.string)
                  }), flags.allSatisfy(characteristicFlags.contains) else { throw invalid }
            rawCharacteristics.append((p, props, service))
            _ = flags
        }
        var descriptors: [ObjectPath: [Descriptor]] = [:]
        for (p, i) in objects {
            guard let props = i[BlueZ.gattDescriptorInterface.rawValue] else { continue }
            guard let chrc = props["Characteristic"]?.objectPath, rawCharacteristics.contains(where: { $0.0 == chrc }) else {
                throw invalid
            }
            let flags: [String]
            if case .array(.string, let items)? = props["Flags"] { flags = items.compactMap(\.string) } else { throw invalid }
            guard flags.allSatisfy(descriptorFlags.contains) else { throw invalid }
            guard let s = props["UUID"]?.string, let u = BluetoothUUID(s) else { throw database }
            descriptors[chrc, default: []].append(Descriptor(path: p, uuid: u.full, flags: flags))
        }
        for (p, props, service) in rawCharacteristics {
            guard let s = props["UUID"]?.string, let u = BluetoothUUID(s) else { throw database }
            var flags: [String] = []
            if case .array(.string, let items)? = props["Flags"] { flags = items.compactMap(\.string) }
            characteristics[service, default: []].append(
                Characteristic(path: p, uuid: u.full, flags: flags, descriptors: descriptors[p] ?? []))
        }
        for (p, props) in rawServices {
            guard let s = props["UUID"]?.string, let u = BluetoothUUID(s),
                  u.full != "00001800" + BluetoothUUID.baseSuffix, u.full != "00001801" + BluetoothUUID.baseSuffix,
                  let primary = props["Primary"]?.bool else { throw database }
            services.append(Service(path: p, uuid: u.full, primary: primary, characteristics: characteristics[p] ?? []))
        }
        return GattApplication(owner: owner, path: path, services: services)
    }
}

/// One attribute of a peer's GATT database as a central sees it: an object on the central's bus
/// standing for an object of an application on the peripheral's bus.
struct RemoteAttribute: Sendable, Hashable {
    enum Kind: Sendable, Hashable { case service, characteristic, descriptor }
    var kind: Kind
    /// The application's owner and object on the peripheral's bus.
    var owner: String
    var appObject: ObjectPath
}

/// The objects bluetoothd's GATT client exports for a connected peer (`src/gatt-client.c`):
/// `service<hhhh>/char<hhhh>/desc<hhhh>` under the device, each named by its attribute handle in four hex digits.
struct RemoteGattLayout: Sendable {
    var objects: [(path: ObjectPath, template: InterfaceTemplate.Kind, values: [String: DBusValue], attribute: RemoteAttribute)] = []

    /// The first handle of the applications' services: BlueZ's own GAP (0x0001–0x0005) and GATT
    /// (0x0006–0x000d) services come first; they are claimed by bluetoothd and not exported.
    static let firstHandle: UInt16 = 0x000e

    init(device: ObjectPath, applications: [GattApplication], mtu: UInt16) {
        var handle = Self.firstHandle
        func path(_ parent: ObjectPath, _ prefix: String, _ h: UInt16) -> ObjectPath {
            let hex = String(h, radix: 16)
            return parent.appending(escaped: prefix + String(repeating: "0", count: max(0, 4 - hex.count)) + hex)
        }
        for app in applications {
            for service in app.services {
                let servicePath = path(device, "service", handle)
                var characteristicPaths: [ObjectPath] = []
                handle &+= 1
                var pending: [(ObjectPath, InterfaceTemplate.Kind, [String: DBusValue], RemoteAttribute)] = []
                for c in service.characteristics {
                    let chrcPath = path(servicePath, "char", handle)
                    characteristicPaths.append(chrcPath)
                    handle &+= 2  // declaration and value
                    var values: [String: DBusValue] = [
                        "UUID": .string(c.uuid), "Service": .objectPath(servicePath), "Flags": .strings(c.flags), "MTU": .uint16(mtu),
                    ]
                    if c.notifies { values["Notifying"] = .boolean(false) }
                    pending.append((chrcPath, .characteristic, values,
                                    RemoteAttribute(kind: .characteristic, owner: app.owner, appObject: c.path)))
                    if c.notifies {
                        // The Client Characteristic Configuration descriptor BlueZ adds.
                        handle &+= 1
                    }
                    for d in c.descriptors {
                        let descPath = path(chrcPath, "desc", handle)
                        handle &+= 1
                        pending.append((descPath, .descriptor, ["UUID": .string(d.uuid), "Characteristic": .objectPath(chrcPath)],
                                        RemoteAttribute(kind: .descriptor, owner: app.owner, appObject: d.path)))
                    }
                }
                objects.append((servicePath, .service, [
                    "UUID": .string(service.uuid), "Device": .objectPath(device), "Primary": .boolean(service.primary),
                    "Includes": .array(element: .objectPath, []),
                ], RemoteAttribute(kind: .service, owner: app.owner, appObject: service.path)))
                for p in pending { objects.append((p.0, p.1, p.2, p.3)) }
            }
        }
    }
}

extension InterfaceTemplate {
    enum Kind: Sendable { case service, characteristic, descriptor }
}

/// ATT errors between the two bluetoothds: the server turns an application's D-Bus error into an
/// ATT error code (`dbus_error_to_att_ecode`), the client turns the code into its D-Bus error
/// (`create_gatt_dbus_error`).
enum ATTError {
    static let invalidOffset: UInt8 = 0x07
    static let readNotPermitted: UInt8 = 0x02
    static let invalidValueLength: UInt8 = 0x0d
    static let authorization: UInt8 = 0x08
    static let requestNotSupported: UInt8 = 0x06
    static let unlikely: UInt8 = 0x0e

    static func code(fromApplicationError error: DBusError) -> UInt8 {
        switch error.name.rawValue {
        case "org.bluez.Error.Failed":
            if let v = UInt32(error.message.hasPrefix("0x") ? String(error.message.dropFirst(2)) : error.message,
                              radix: error.message.hasPrefix("0x") ? 16 : 10) {
                return (0x80...0x9f).contains(v) ? UInt8(v) : unlikely
            }
            return 0x80
        case "org.bluez.Error.NotSupported": return requestNotSupported
        case "org.bluez.Error.NotAuthorized": return authorization
        case "org.bluez.Error.InvalidValueLength": return invalidValueLength
        case "org.bluez.Error.InvalidOffset": return invalidOffset
        case "org.bluez.Error.NotPermitted": return readNotPermitted
        default: return unlikely
        }
    }

    static func clientError(_ code: UInt8) -> BlueZError {
        switch code {
        case readNotPermitted: return .notPermitted("Read not permitted")
        case 0x05, 0x0f, 0x0c: return .notPermitted("Not paired")
        case invalidOffset: return .invalidArguments("Invalid offset")
        case invalidValueLength: return .invalidArguments("Invalid Length")
        case authorization: return .notAuthorized
        case requestNotSupported: return .notSupported
        default:
            let hex = String(code, radix: 16)
            return .failed("Operation failed with ATT error: 0x" + (hex.count < 2 ? "0" + hex : hex))
        }
    }
}

// MARK: - GattManager1 and the remote objects

extension Air {
    /// `RegisterApplication`: reads the tree with `GetManagedObjects` on the application's path.
    func registerApplication(_ ctx: BoxContext, sender: String, path: ObjectPath) async throws {
        guard var b = live(ctx), let tree = b.tree else { throw BlueZError.failed("Failed to register application") }
        let key = sender + " " + path.rawValue
        if b.applications.contains(where: { $0.owner == sender && $0.path == path }) || b.pendingApplications.contains(key) {
            throw BlueZError.alreadyExists
        }
        b.pendingApplications.insert(key)
        boxes[ctx.box] = b
        defer { if live(ctx) != nil { boxes[ctx.box]?.pendingApplications.remove(key) } }
        let reply: DBusValue
        do {
            guard let destination = try? BusName(sender) else { throw BlueZError.invalidArguments }
            let values = try await tree.connection.call(destination: destination, path: path, interface: .objectManager,
                                                        member: "GetManagedObjects", timeout: .seconds(5))
            reply = values.first ?? .vardict([:])
        } catch {
            // No object manager there: GDBusClient gets no objects.
            throw BlueZError.failed("No object received")
        }
        let app = try GattApplication.parse(owner: sender, path: path, managedObjects: reply)
        guard live(ctx) != nil else { throw BlueZError.failed("Failed to register application") }
        boxes[ctx.box]?.pendingApplications.remove(key)
        boxes[ctx.box]?.applications.append(app)
        applicationsChanged(ctx.box)
    }

    func unregisterApplication(_ ctx: BoxContext, sender: String, path: ObjectPath) throws(BlueZError) {
        guard var b = live(ctx), let i = b.applications.firstIndex(where: { $0.owner == sender && $0.path == path }) else {
            throw .doesNotExist
        }
        b.applications.remove(at: i)
        boxes[ctx.box] = b
        applicationsChanged(ctx.box)
    }

    /// The box's services changed: its adapter's UUIDs, and what connected centrals see.
    func applicationsChanged(_ name: String) {
        announceAdapter(name)
        for key in connections.keys where key.peripheral == name {
            if let c = boxes[key.central], let p = boxes[name], c.devices[p.spec.address]?.servicesResolved == true {
                exportRemoteGatt(key)
            }
        }
    }

    /// `GattCharacteristic1.ReadValue` / `GattDescriptor1.ReadValue` on a peer's attribute: a long
    /// read, as `bt_gatt_client_read_long_value` does it, each ATT request becoming a
    /// `ReadValue` on the peer's application over the peer's bus, with the options bluetoothd's
    /// GATT server gives (`device`, `offset` when not 0, `link`, `mtu`).
    func readRemote(_ ctx: BoxContext, path: ObjectPath, options: DBusValue) async throws -> [UInt8] {
        var offset: UInt16 = 0
        for entry in options.dictEntries ?? [] {
            guard let key = entry.key.string?.lowercased() else { continue }
            if key == "offset" {
                guard case .uint16(let o) = entry.value.unwrapped else { throw BlueZError.invalidArguments }
                offset = o
            }
        }
        guard live(ctx) != nil,
              let (key, attribute) = connections.lazy.compactMap({ k, c in
                  k.central == ctx.box ? c.remote[path].map { (k, $0) } : nil
              }).first,
              let central = boxes[key.central], let peer = boxes[key.peripheral], let peerTree = peer.tree,
              let peerDevice = peer.devices[central.spec.address] else {
            throw BlueZError.failed("Not connected")
        }
        guard let destination = try? BusName(attribute.owner) else { throw BlueZError.failed("Not connected") }
        let interface = attribute.kind == .descriptor ? BlueZ.gattDescriptorInterface : BlueZ.gattCharacteristicInterface
        let mtu = settings.mtu
        let chunkLimit = Int(mtu) - 1
        var value: [UInt8] = []
        var at = Int(offset)
        while true {
            var opts: [String: DBusValue] = ["device": .objectPath(peerDevice.path), "link": .string("LE"), "mtu": .uint16(mtu)]
            if at > 0 { opts["offset"] = .uint16(UInt16(clamping: at)) }
            let reply: [DBusValue]
            do {
                reply = try await peerTree.connection.call(destination: destination, path: attribute.appObject,
                                                           interface: interface, member: "ReadValue", [.vardict(opts)],
                                                           timeout: .seconds(10))
            } catch let error as DBusError {
                if at > Int(offset) && error.name.rawValue == "org.bluez.Error.InvalidOffset" { break }
                throw ATTError.clientError(ATTError.code(fromApplicationError: error))
            }
            guard let bytes = reply.first?.bytes else { throw ATTError.clientError(ATTError.requestNotSupported) }
            let chunk = bytes.prefix(min(chunkLimit, 512))
            value += chunk
            at += chunk.count
            if chunk.count < chunkLimit || at >= 512 { break }
        }
        // The cached value BlueZ shows in `Value` after a read.
        if let tree = boxes[ctx.box]?.tree, tree.exists(path), connections[key] != nil {
            var cached = tree.value(path, interface, "Value")?.bytes ?? []
            if offset == 0 {
                cached = value
            } else {
                if cached.count < Int(offset) { cached += [UInt8](repeating: 0, count: Int(offset) - cached.count) }
                cached = Array(cached.prefix(Int(offset))) + value
            }
            tree.update(path, interface, set: ["Value": .bytes(cached)])
        }
        return value
    }

    /// `WriteValue` on a peer's attribute, passed to the peer's application.
    func writeRemote(_ ctx: BoxContext, path: ObjectPath, value: DBusValue, options: DBusValue) async throws {
        guard live(ctx) != nil,
              let (key, attribute) = connections.lazy.compactMap({ k, c in
                  k.central == ctx.box ? c.remote[path].map { (k, $0) } : nil
              }).first,
              let central = boxes[key.central], let peer = boxes[key.peripheral], let peerTree = peer.tree,
              let peerDevice = peer.devices[central.spec.address], let destination = try? BusName(attribute.owner) else {
            throw BlueZError.failed("Not connected")
        }
        var opts: [String: DBusValue] = ["device": .objectPath(peerDevice.path), "link": .string("LE"), "mtu": .uint16(settings.mtu)]
        for entry in options.dictEntries ?? [] {
            if let k = entry.key.string?.lowercased(), k == "offset" || k == "type" { opts[k] = entry.value.unwrapped }
        }
        let interface = attribute.kind == .descriptor ? BlueZ.gattDescriptorInterface : BlueZ.gattCharacteristicInterface
        do {
            _ = try await peerTree.connection.call(destination: destination, path: attribute.appObject, interface: interface,
                                                   member: "WriteValue", [value, .vardict(opts)], timeout: .seconds(10))
        } catch let error as DBusError {
            throw ATTError.clientError(ATTError.code(fromApplicationError: error) == ATTError.readNotPermitted
                                       ? 0x03 : ATTError.code(fromApplicationError: error))
        }
    }

    func gattManagerTemplate(_ ctx: BoxContext) -> InterfaceTemplate {
        InterfaceTemplate(name: BlueZ.gattManagerInterface, methods: [
            DBusMethod("RegisterApplication", inputs: [DBusArgument("application", .objectPath),
                                                       DBusArgument("options", .dictionary(key: .string, value: .variant))]) { call in
                guard let path = call.arguments[0].objectPath else { throw BlueZError.invalidArguments }
                try await ctx.handle { try await ctx.air.registerApplication(ctx, sender: call.sender?.rawValue ?? "", path: path) }
                return []
            },
            DBusMethod("UnregisterApplication", inputs: [DBusArgument("application", .objectPath)]) { call in
                guard let path = call.arguments[0].objectPath else { throw BlueZError.invalidArguments }
                try await ctx.handle { try await ctx.air.unregisterApplication(ctx, sender: call.sender?.rawValue ?? "", path: path) }
                return []
            },
        ])
    }

    func remoteGattTemplate(_ kind: InterfaceTemplate.Kind, _ ctx: BoxContext) -> InterfaceTemplate {
        let options = DBusArgument("options", .dictionary(key: .string, value: .variant))
        let read = DBusMethod("ReadValue", inputs: [options], outputs: [DBusArgument("value", .array(.byte))]) { call in
            [.bytes(try await ctx.handle { try await ctx.air.readRemote(ctx, path: call.path, options: call.arguments[0]) })]
        }
        let write = DBusMethod("WriteValue", inputs: [DBusArgument("value", .array(.byte)), options]) { call in
            try await ctx.air.writeRemote(ctx, path: call.path, value: call.arguments[0], options: call.arguments[1])
            return []
        }
        switch kind {
        case .service:
            return InterfaceTemplate(name: BlueZ.gattServiceInterface, properties: [
                .init("UUID", .string), .init("Device", .objectPath), .init("Primary", .boolean), .init("Includes", .array(.objectPath)),
            ])
        case .characteristic:
            return InterfaceTemplate(name: BlueZ.gattCharacteristicInterface, methods: [
                read, write,
                DBusMethod("AcquireWrite", inputs: [options], outputs: [DBusArgument("fd", .unixFD), DBusArgument("mtu", .uint16)]) { _ in
                    throw BlueZError.notSupported
                },
                DBusMethod("AcquireNotify", inputs: [options], outputs: [DBusArgument("fd", .unixFD), DBusArgument("mtu", .uint16)]) { _ in
                    throw BlueZError.notSupported
                },
                DBusMethod("StartNotify") { _ in throw BlueZError.notSupported },
                DBusMethod("StopNotify") { _ in throw BlueZError.failed("No notify session started") },
            ], properties: [
                .init("UUID", .string), .init("Service", .objectPath), .init("Value", .array(.byte)), .init("Notifying", .boolean),
                .init("Flags", .array(.string)), .init("MTU", .uint16),
            ])
        case .descriptor:
            return InterfaceTemplate(name: BlueZ.gattDescriptorInterface, methods: [read, write], properties: [
                .init("UUID", .string), .init("Characteristic", .objectPath), .init("Value", .array(.byte)),
            ])
        }
    }
}
