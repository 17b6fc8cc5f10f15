import DBusKit

/// What one received advertising report carries (BlueZ `struct eir_data`, the parts used).
struct AdvertisingReport: Sendable, Hashable {
    var serviceUUIDs: [String] = []
    var manufacturerData: [UInt16: [UInt8]] = [:]
    var serviceData: [String: [UInt8]] = [:]
    var name: String?
    var txPower: Int16?
    var appearance: UInt16?
    /// The Flags AD: 0x01 limited, 0x02 general discoverable, 0x04 BR/EDR not supported.
    var flags: UInt8 = 0
    var connectable = false

    var isDiscoverable: Bool { flags & 0x03 != 0 }
}

/// One remote device as an adapter knows it (`struct btd_device`, the parts the simulator has).
struct DeviceState: Sendable {
    enum Link: Sendable, Hashable {
        case idle
        /// A `Connect` is waiting; the token tells a stale completion from the current one.
        case connecting(UInt64)
        case connected
    }

    var address: String
    var addressType = "public"
    var path: ObjectPath
    var adapterPath: ObjectPath
    var name: String?
    var alias: String?
    /// 0 means none, as in BlueZ (the property is absent then).
    var rssi: Int16 = 0
    var txPower: Int16?
    var appearance: UInt16?
    var uuids: [String] = []
    var manufacturerData: [UInt16: [UInt8]] = [:]
    var serviceData: [String: [UInt8]] = [:]
    var trusted = false
    var blocked = false
    /// Paired and bonded: the keys are stored (``Air/Box/bonds``).
    var paired = false
    var link = Link.idle
    var servicesResolved = false
    /// Removed `temporaryTimeout` after it was last heard, unless it connected once.
    var temporary = true
    var lastSeen: SimTime
    /// Was the last report connectable (`device_is_connectable`).
    var connectable = false

    var connected: Bool { link == .connected }

    /// BlueZ's RSSI change threshold without a discovery filter (`RSSI_THRESHOLD`).
    static let rssiThreshold: Int16 = 8
    /// `TemporaryTimeout` in main.conf.
    static let temporaryTimeout: SimTime = 30

    init(address: String, adapter: String, now: SimTime) {
        self.address = address
        self.path = BlueZ.devicePath(adapter: adapter, address: address)
        self.adapterPath = BlueZ.adapterPath(adapter)
        self.lastSeen = now
    }

    /// `device_set_rssi_with_delta`: returns whether `RSSI` is announced. With `delta` 0 (a
    /// discovery filter is set) every report is announced, even with the same value.
    mutating func setRSSI(_ value: Int16, delta: Int16) -> Bool {
        if value == 0 || rssi == 0 {
            if rssi == value { return false }
            rssi = value
            return true
        }
        if abs(Int(rssi) - Int(value)) < Int(delta) { return false }
        rssi = value
        return true
    }

    /// Device1's properties, the optional ones only when they exist.
    var properties: [String: DBusValue] {
        var p: [String: DBusValue] = [
            "Address": .string(address),
            "AddressType": .string(addressType),
            "Alias": .string(alias ?? name ?? BlueZ.defaultAlias(address)),
            "Paired": .boolean(paired),
            "Bonded": .boolean(paired),
            "Trusted": .boolean(trusted),
            "Blocked": .boolean(blocked),
            "LegacyPairing": .boolean(false),
            "Connected": .boolean(connected),
            "UUIDs": .strings(uuids),
            "Adapter": .objectPath(adapterPath),
            "ServicesResolved": .boolean(servicesResolved),
        ]
        if let name { p["Name"] = .string(name) }
        if let appearance { p["Appearance"] = .uint16(appearance) }
        if rssi != 0 { p["RSSI"] = .int16(rssi) }
        if let txPower { p["TxPower"] = .int16(txPower) }
        if !manufacturerData.isEmpty {
            p["ManufacturerData"] = .dictionary(key: .uint16, value: .variant, manufacturerData.keys.sorted().map {
                .init(.uint16($0), .variant(.bytes(manufacturerData[$0]!)))
            })
        }
        if !serviceData.isEmpty {
            p["ServiceData"] = .dictionary(key: .string, value: .variant, serviceData.keys.sorted().map {
                .init(.string($0), .variant(.bytes(serviceData[$0]!)))
            })
        }
        return p
    }

    static let optionalProperties = ["Name", "Appearance", "RSSI", "TxPower", "ManufacturerData", "ServiceData"]
}

// MARK: - Devices on the bus

extension Air {
    /// `Device1.Connect` (`dev_connect` for an LE device): the connection takes the radio model's
    /// latency; an attempt the model fails is reported as BlueZ ≥ 5.62 reports it (`Connected`
    /// goes true and back to false, then `Failed` "le-connection-abort-by-local"); a device that
    /// does not answer (not advertising connectable, off, out of range) fails the same way after
    /// the connection timeout.
    /// How often a pending `Connect` looks for its peer again (a controller initiating scans
    /// continuously; this is the simulator's granularity).
    static let initiatorRetry: SimTime = 0.1

    func connect(_ ctx: BoxContext, address: String) async throws {
        guard var b = live(ctx), b.adapter.powered else { throw BlueZError.notReady }
        guard var dev = b.devices[address] else { throw BlueZError.doesNotExist }
        switch dev.link {
        case .connecting: throw BlueZError.inProgress
        case .connected: return
        case .idle: break
        }
        let token = nextToken()
        dev.link = .connecting(token)
        dev.temporary = false
        b.devices[address] = dev
        let attempt = radio.connectionAttempt(using: &b.rng)
        boxes[ctx.box] = b
        stats.connectionAttempts += 1
        let start = clock.now

        func stillConnecting() -> DeviceState? {
            guard let d = live(ctx)?.devices[address], d.link == .connecting(token) else { return nil }
            return d
        }
        func giveUp(_ d: DeviceState) {
            var d = d
            d.link = .idle
            boxes[ctx.box]?.devices[address] = d
        }

        try? await clock.sleep(until: start + attempt.latency)
        guard stillConnecting() != nil else { throw BlueZError.failed(BlueZ.LEConnectionError.canceled) }
        // Like a controller, keep initiating until the peer is heard (it walks into range, powers
        // on, starts advertising) or the connect timeout passes.
        var reachable = reachablePeripheral(address, from: ctx.box, at: clock.now)
        while reachable == nil, clock.now < start + settings.connectTimeout {
            try? await clock.sleep(until: min(clock.now + Self.initiatorRetry, start + settings.connectTimeout))
            guard stillConnecting() != nil else { throw BlueZError.failed(BlueZ.LEConnectionError.canceled) }
            reachable = reachablePeripheral(address, from: ctx.box, at: clock.now)
        }
        guard let peer = reachable else {
            guard let d = stillConnecting() else { throw BlueZError.failed(BlueZ.LEConnectionError.canceled) }
            giveUp(d)
            throw BlueZError.failed(BlueZ.LEConnectionError.abortByLocal)
        }
        guard var d = stillConnecting() else { throw BlueZError.failed(BlueZ.LEConnectionError.canceled) }
        if attempt.fails {
            stats.injectedConnectionFailures += 1
            // The controller connected and the link was torn down at once: clients see Connected
            // flip, then the error.
            d.link = .connected
            boxes[ctx.box]?.devices[address] = d
            publish(box: ctx.box, d)
            boxes[ctx.box]?.tree?.seal(d.path, BlueZ.deviceInterface)
            d.link = .idle
            boxes[ctx.box]?.devices[address] = d
            publish(box: ctx.box, d)
            throw BlueZError.failed(BlueZ.LEConnectionError.abortByLocal)
        }
        establish(central: ctx.box, peripheral: peer, token: token)
    }

    /// `Device1.Disconnect`: cancels a pending `Connect`, or takes the link down after a short
    /// latency; a device that is not connected answers at once.
    func disconnect(_ ctx: BoxContext, address: String) async throws {
        guard let b = live(ctx), let dev = b.devices[address] else { return }
        if case .connecting = dev.link {
            var d = dev
            d.link = .idle
            boxes[ctx.box]?.devices[address] = d
            return
        }
        guard connectionKey(box: ctx.box, address: address) != nil else { return }
        try? await clock.sleep(for: settings.disconnectLatency)
        guard live(ctx) != nil, let key = connectionKey(box: ctx.box, address: address) else { return }
        dropConnection(key)
    }

    func setDeviceProperty(_ ctx: BoxContext, address: String, _ property: String, _ value: DBusValue) throws -> DBusValue {
        guard var dev = live(ctx)?.devices[address] else { throw BlueZError.doesNotExist }
        switch (property, value) {
        case ("Alias", .string(let s)): dev.alias = s.isEmpty ? nil : s
        case ("Trusted", .boolean(let on)): dev.trusted = on
        case ("Blocked", .boolean(let on)): dev.blocked = on
        default: throw BlueZError.invalidArguments
        }
        boxes[ctx.box]?.devices[address] = dev
        publish(box: ctx.box, dev)
        return dev.properties[property] ?? value
    }

    func deviceTemplate(_ ctx: BoxContext, address: String) -> InterfaceTemplate {
        func setter(_ name: String) -> DBusProperty.Setter {
            { value in try await ctx.handle { try await ctx.air.setDeviceProperty(ctx, address: address, name, value) } }
        }
        return InterfaceTemplate(name: BlueZ.deviceInterface, methods: [
            DBusMethod("Disconnect") { _ in
                try await ctx.handle { try await ctx.air.disconnect(ctx, address: address) }
                return []
            },
            DBusMethod("Connect") { _ in
                try await ctx.handle { try await ctx.air.connect(ctx, address: address) }
                return []
            },
            DBusMethod("ConnectProfile", inputs: [DBusArgument("UUID", .string)]) { _ in throw BlueZError.notAvailable },
            DBusMethod("DisconnectProfile", inputs: [DBusArgument("UUID", .string)]) { _ in throw BlueZError.invalidArguments },
            DBusMethod("Pair") { _ in throw BlueZError.notSupported },
            DBusMethod("CancelPairing") { _ in throw BlueZError.doesNotExist },
        ], properties: [
            .init("Address", .string),
            .init("AddressType", .string),
            .init("Name", .string),
            .init("Alias", .string, setter: setter("Alias")),
            .init("Class", .uint32),
            .init("Appearance", .uint16),
            .init("Icon", .string),
            .init("Paired", .boolean),
            .init("Bonded", .boolean),
            .init("Trusted", .boolean, setter: setter("Trusted")),
            .init("Blocked", .boolean, setter: setter("Blocked")),
            .init("LegacyPairing", .boolean),
            .init("RSSI", .int16),
            .init("Connected", .boolean),
            .init("UUIDs", .array(.string)),
            .init("Modalias", .string),
            .init("Adapter", .objectPath),
            .init("ManufacturerData", .dictionary(key: .uint16, value: .variant)),
            .init("ServiceData", .dictionary(key: .string, value: .variant)),
            .init("TxPower", .int16),
            .init("ServicesResolved", .boolean),
        ])
    }
}
