import BlueZ
import DBusKit

/// A client's `org.bluez.LEAdvertisement1`, parsed the way BlueZ 5.66's `src/advertising.c`
/// parses it from the properties it reads over D-Bus.
///
/// BlueZ's rules, kept as they are:
/// - a property absent is skipped: a missing `Type` means broadcast (type 0);
/// - a property of the wrong type, a `Type` other than "broadcast"/"peripheral", an unparsable
///   UUID, `LocalName` together with `Includes` "local-name", `Appearance` together with
///   "appearance", a `SecondaryChannel` (the simulated controller has no extended advertising),
///   intervals out of range or `MinInterval` > `MaxInterval`, a `TxPower` outside −127…20, a
///   broadcast advertisement with flags, a `Timeout` shorter than `DiscoverableTimeout`, and a
///   payload over the legacy 31 bytes all fail with `org.bluez.Error.Failed`
///   "Failed to parse advertisement.";
/// - unknown `Includes` strings are ignored (BlueZ only looks up the ones it knows).
struct AdvertisementSpec: Sendable, Hashable {
    enum Kind: String, Sendable { case broadcast, peripheral }

    var type: Kind = .broadcast
    var serviceUUIDs: [BluetoothUUID] = []
    var solicitUUIDs: [BluetoothUUID] = []
    var manufacturerData: [UInt16: [UInt8]] = [:]
    var serviceData: [BluetoothUUID: [UInt8]] = [:]
    var includes: Set<String> = []
    var localName: String?
    var appearance: UInt16?
    var duration: UInt16 = 0
    var timeout: UInt16 = 0
    var data: [UInt8: [UInt8]] = [:]
    /// The Flags AD this advertisement sets itself (from `Discoverable`), nil if none.
    var flags: UInt8?
    var discoverableTimeout: UInt16 = 0
    var minInterval: UInt32 = 0
    var maxInterval: UInt32 = 0

    /// The legacy advertising payload limit.
    static let maxLength = LegacyAdvertisingPayload.maxLength
    static let knownIncludes = ["tx-power", "appearance", "local-name"]
    /// AD types `bt_ad_add_data` refuses because BlueZ fills them from other properties.
    static let rejectedDataTypes: Set<UInt8> = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0d,
                                                0x14, 0x15, 0x16, 0x19, 0x1f, 0x20, 0x21, 0xff]

    static let parseError = BlueZError.failed("Failed to parse advertisement.")

    /// Parses `properties` (as `Properties.GetAll` returned them). `adapterDiscoverable` is the
    /// adapter's `Discoverable`, which decides whether the kernel adds discoverable flags.
    static func parse(_ properties: [String: DBusValue], adapterDiscoverable: Bool) throws(BlueZError) -> AdvertisementSpec {
        var spec = AdvertisementSpec()
        func uuids(_ value: DBusValue) throws(BlueZError) -> [BluetoothUUID] {
            guard case .array(let element, let items) = value else { throw parseError }
            // BlueZ walks the array while its elements are strings: other elements end the list.
            guard element == .string else { return [] }
            var out: [BluetoothUUID] = []
            for item in items {
                guard let s = item.string, let u = BluetoothUUID(s) else { throw parseError }
                if !out.contains(u) { out.append(u) }
            }
            return out
        }
        func bytes(_ value: DBusValue) throws(BlueZError) -> [UInt8] {
            guard let b = value.unwrapped.bytes else { throw parseError }
            return b
        }
        // The order of BlueZ's parser table matters: Includes before LocalName and Appearance,
        // Type before Discoverable.
        if let v = properties["Type"] {
            guard let s = v.string, let kind = Kind(rawValue: s) else { throw parseError }
            spec.type = kind
        }
        if let v = properties["ServiceUUIDs"] { spec.serviceUUIDs = try uuids(v) }
        if let v = properties["SolicitUUIDs"] { spec.solicitUUIDs = try uuids(v) }
        if let v = properties["ManufacturerData"] {
            guard case .dictionary(let k, _, let entries) = v, k == .uint16 else { throw parseError }
            for e in entries {
                guard case .uint16(let id) = e.key else { throw parseError }
                let b = try bytes(e.value)
                guard b.count <= maxLength - 4 else { throw parseError }
                spec.manufacturerData[id] = b
            }
        }
        if let v = properties["ServiceData"] {
            guard case .dictionary(let k, _, let entries) = v, k == .string else { throw parseError }
            for e in entries {
                guard let s = e.key.string, let u = BluetoothUUID(s) else { throw parseError }
                let b = try bytes(e.value)
                guard b.count <= maxLength - 2 - u.wireSize else { throw parseError }
                spec.serviceData[u] = b
            }
        }
        if let v = properties["Includes"] {
            guard case .array(let element, let items) = v else { throw parseError }
            if element == .string {
                for item in items {
                    if let s = item.string, knownIncludes.contains(s) { spec.includes.insert(s) }
                }
            }
        }
        if let v = properties["LocalName"] {
            guard let s = v.string, !spec.includes.contains("local-name") else { throw parseError }
            spec.localName = s.isEmpty ? nil : s
        }
        if let v = properties["Appearance"] {
            guard case .uint16(let a) = v, !spec.includes.contains("appearance") else { throw parseError }
            spec.appearance = a
        }
        if let v = properties["Duration"] {
            guard case .uint16(let d) = v else { throw parseError }
            spec.duration = d
        }
        if let v = properties["Timeout"] {
            guard case .uint16(let t) = v else { throw parseError }
            spec.timeout = t
        }
        if let v = properties["Data"] {
            guard case .dictionary(let k, _, let entries) = v, k == .byte else { throw parseError }
            for e in entries {
                guard case .byte(let type) = e.key, !rejectedDataTypes.contains(type) else { throw parseError }
                let b = try bytes(e.value)
                guard b.count <= maxLength - 2 else { throw parseError }
                spec.data[type] = b
            }
        }
        if let v = properties["Discoverable"] {
            guard let discoverable = v.bool else { throw parseError }
            if discoverable {
                spec.flags = 0x02 | 0x04
            } else if spec.type != .broadcast {
                spec.flags = 0x04
            }
        }
        if let v = properties["DiscoverableTimeout"] {
            guard case .uint16(let t) = v else { throw parseError }
            spec.discoverableTimeout = t
        }
        if properties["SecondaryChannel"] != nil {
            // No extended advertising on the simulated controller: no secondary channel is
            // supported, so BlueZ's parser refuses every value.
            throw parseError
        }
        func interval(_ v: DBusValue) throws(BlueZError) -> UInt32 {
            guard case .uint32(let ms) = v else { throw parseError }
            let units = Double(ms) / 0.625
            guard units >= 0x20, units <= 0xFFFFFF else { throw parseError }
            return UInt32(units)
        }
        if let v = properties["MinInterval"] { spec.minInterval = try interval(v) }
        if let v = properties["MaxInterval"] { spec.maxInterval = try interval(v) }
        if let v = properties["TxPower"] {
            guard case .int16(let p) = v, (-127...20).contains(p) else { throw parseError }
        }
        return try finish(spec, adapterDiscoverable: adapterDiscoverable)
    }

    /// The checks after the properties are parsed, and the payload size (`refresh_legacy_adv`).
    private static func finish(_ spec: AdvertisementSpec, adapterDiscoverable: Bool) throws(BlueZError) -> AdvertisementSpec {
        if spec.flags != nil && spec.type == .broadcast { throw parseError }  // "Broadcast cannot set flags"
        if spec.timeout > 0 && spec.timeout < spec.discoverableTimeout { throw parseError }
        if spec.minInterval > spec.maxInterval { throw parseError }
        guard spec.payload.fits(adapterDiscoverable: adapterDiscoverable) else { throw parseError }
        return spec
    }

    /// The payload as BlueZ sizes it: the one rule, ``LegacyAdvertisingPayload`` (the BlueZ
    /// client's, which sizes the node's own advertisement with it).
    var payload: LegacyAdvertisingPayload {
        LegacyAdvertisingPayload(peripheral: type == .peripheral, serviceUUIDs: serviceUUIDs, solicitUUIDs: solicitUUIDs,
                                 manufacturerData: manufacturerData, serviceData: serviceData, data: data, setsFlags: flags != nil,
                                 appearance: appearance != nil, includes: includes)
    }

    /// What a scanner receives, given the adapter's current alias and `Discoverable`.
    func report(adapterAlias: String, adapterDiscoverable: Bool) -> AdvertisingReport {
        var r = AdvertisingReport()
        r.serviceUUIDs = serviceUUIDs.map(\.full)
        r.manufacturerData = manufacturerData
        r.serviceData = Dictionary(uniqueKeysWithValues: serviceData.map { ($0.key.full, $0.value) })
        r.name = localName ?? (includes.contains("local-name") ? adapterAlias : nil)
        r.txPower = includes.contains("tx-power") ? 0 : nil
        r.appearance = appearance ?? (includes.contains("appearance") ? 0 : nil)
        if let flags {
            r.flags = flags
        } else if type == .peripheral && adapterDiscoverable {
            r.flags = 0x02 | 0x04
        }
        r.connectable = type == .peripheral
        return r
    }
}

// MARK: - LEAdvertisingManager1

extension Air {
    func advertisingManagerProperties(_ b: Box) -> [String: DBusValue] {
        let active = b.advertisements.count + b.pendingAdvertisements.count
        return [
            "ActiveInstances": .byte(UInt8(active)),
            "SupportedInstances": .byte(UInt8(max(0, Self.maxAdvertisements - active))),
            "SupportedIncludes": .strings(AdvertisementSpec.knownIncludes),
        ]
    }

    func announceInstances(_ name: String) {
        guard let b = boxes[name], let tree = b.tree else { return }
        tree.update(b.adapterPath, BlueZ.advertisingManagerInterface, set: advertisingManagerProperties(b))
    }

    /// `RegisterAdvertisement`: reads the client's object with `Properties.GetAll`, as
    /// bluetoothd's GDBusClient does for an object without an object manager, and parses it.
    func registerAdvertisement(_ ctx: BoxContext, sender: String, path: ObjectPath) async throws {
        guard var b = live(ctx), let tree = b.tree else { throw BlueZError.failed("Failed to register advertisement") }
        let key = sender + " " + path.rawValue
        if b.advertisements.contains(where: { $0.owner == sender && $0.path == path }) || b.pendingAdvertisements.contains(key) {
            throw BlueZError.alreadyExists
        }
        if b.advertisements.count + b.pendingAdvertisements.count >= Self.maxAdvertisements {
            throw BlueZError.notPermitted("Maximum advertisements reached")
        }
        b.pendingAdvertisements.insert(key)
        boxes[ctx.box] = b
        defer { if live(ctx) != nil { boxes[ctx.box]?.pendingAdvertisements.remove(key) } }

        let properties: [String: DBusValue]
        do {
            guard let destination = try? BusName(sender) else { throw BlueZError.invalidArguments }
            properties = try await tree.connection.getAllProperties(destination: destination, path: path,
                                                                    interface: BlueZ.advertisementInterface, timeout: .seconds(5))
        } catch {
            throw BlueZError.failed("Failed to register advertisement")
        }
        guard var current = live(ctx) else { throw BlueZError.failed("Failed to register advertisement") }
        let spec = try AdvertisementSpec.parse(properties, adapterDiscoverable: current.adapter.discoverable)
        let used = Set(current.advertisements.map(\.instance))
        let instance = (1...Self.maxAdvertisements).first { !used.contains($0) } ?? Self.maxAdvertisements
        var rng = current.rng.derived("advertisement:\(instance):\(nextToken())")
        let now = clock.now
        let first = now + rng.uniform(0...radio.parameters.advertisingInterval)
        let expires = spec.timeout > 0 ? now + Double(spec.timeout) : nil
        current.pendingAdvertisements.remove(key)
        current.advertisements.append(RegisteredAdvertisement(owner: sender, path: path, spec: spec, instance: instance,
                                                              nextEvent: first, rng: rng, expires: expires))
        boxes[ctx.box] = current
        if let expires {
            timers.append(Timer(time: expires, action: .advertisementTimeout(box: ctx.box, generation: ctx.generation,
                                                                             owner: sender, path: path)))
        }
        announceInstances(ctx.box)
    }

    /// `UnregisterAdvertisement`: BlueZ removes the advertisement without calling `Release`.
    func unregisterAdvertisement(_ ctx: BoxContext, sender: String, path: ObjectPath) throws(BlueZError) {
        guard var b = live(ctx), let i = b.advertisements.firstIndex(where: { $0.owner == sender && $0.path == path }) else {
            throw .doesNotExist
        }
        b.advertisements.remove(at: i)
        boxes[ctx.box] = b
        announceInstances(ctx.box)
    }

    func advertisingManagerTemplate(_ ctx: BoxContext) -> InterfaceTemplate {
        InterfaceTemplate(name: BlueZ.advertisingManagerInterface, methods: [
            DBusMethod("RegisterAdvertisement", inputs: [DBusArgument("advertisement", .objectPath),
                                                         DBusArgument("options", .dictionary(key: .string, value: .variant))]) { call in
                guard let path = call.arguments[0].objectPath else { throw BlueZError.invalidArguments }
                try await ctx.handle { try await ctx.air.registerAdvertisement(ctx, sender: call.sender?.rawValue ?? "", path: path) }
                return []
            },
            DBusMethod("UnregisterAdvertisement", inputs: [DBusArgument("service", .objectPath)]) { call in
                guard let path = call.arguments[0].objectPath else { throw BlueZError.invalidArguments }
                try await ctx.handle { try await ctx.air.unregisterAdvertisement(ctx, sender: call.sender?.rawValue ?? "", path: path) }
                return []
            },
        ], properties: [
            .init("ActiveInstances", .byte),
            .init("SupportedInstances", .byte),
            .init("SupportedIncludes", .array(.string)),
        ])
    }
}
