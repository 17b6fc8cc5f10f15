import BlueZ
import DBusKit

/// One client's `SetDiscoveryFilter` (BlueZ `struct discovery_filter`).
struct DiscoveryFilter: Sendable, Hashable {
    enum Transport: String, Sendable { case auto, le, bredr }
    var uuids: [String] = []
    var rssi: Int16?
    var pathloss: UInt16?
    var transport: Transport = .auto
    var duplicateData = false
    var discoverable = false
    var pattern: String?

    static let keys = ["UUIDs", "RSSI", "Pathloss", "Transport", "DuplicateData", "Discoverable", "Pattern"]
    static let pathlossMax: UInt16 = 137

    /// Parses the `a{sv}` like `parse_discovery_filter_dict`: an unknown key, a value of the wrong
    /// type, an RSSI outside −127…20, a pathloss above 137, an unparsable UUID, or RSSI and
    /// Pathloss together are `InvalidArguments`. An empty dictionary clears the filter (nil).
    static func parse(_ argument: DBusValue) throws(BlueZError) -> DiscoveryFilter? {
        guard case .dictionary(.string, .variant, let entries) = argument else { throw .invalidArguments }
        if entries.isEmpty { return nil }
        var f = DiscoveryFilter()
        for entry in entries {
            guard let key = entry.key.string else { throw .invalidArguments }
            let value = entry.value.unwrapped
            switch key {
            case "UUIDs":
                guard case .array(let element, let items) = value, element == .string || items.isEmpty else { throw .invalidArguments }
                for item in items {
                    guard let s = item.string, let uuid = BluetoothUUID(s) else { throw .invalidArguments }
                    f.uuids.append(uuid.full)
                }
            case "RSSI":
                guard case .int16(let v) = value, (-127...20).contains(v) else { throw .invalidArguments }
                f.rssi = v
            case "Pathloss":
                guard case .uint16(let v) = value, v <= pathlossMax else { throw .invalidArguments }
                f.pathloss = v
            case "Transport":
                guard let s = value.string, let t = Transport(rawValue: s) else { throw .invalidArguments }
                f.transport = t
            case "DuplicateData":
                guard let b = value.bool else { throw .invalidArguments }
                f.duplicateData = b
            case "Discoverable":
                guard let b = value.bool else { throw .invalidArguments }
                f.discoverable = b
            case "Pattern":
                guard let s = value.string else { throw .invalidArguments }
                f.pattern = s
            default:
                throw .invalidArguments
            }
        }
        if f.rssi != nil && f.pathloss != nil { throw .invalidArguments }
        return f
    }
}

/// A client of discovery on one adapter (BlueZ `struct discovery_client`): one per D-Bus sender,
/// either with a pre-set filter only (`set_filter_list`) or discovering (`discovery_list`).
struct DiscoveryClient: Sendable, Hashable {
    var owner: String
    var filter: DiscoveryFilter?
    var discovering: Bool
}

/// What the kernel is asked for when the clients' filters are merged (`merge_discovery_filters`),
/// plus the flags bluetoothd derives from them.
struct MergedDiscovery: Sendable, Hashable {
    /// `adapter->filtered_discovery`: some discovering client set a filter. Lifts the 8 dBm RSSI
    /// threshold and makes every advertiser discoverable.
    var filtered = false
    /// Does the scan include LE (the adapter is LE-only, so a BR/EDR-only transport finds nothing).
    var scansLE = true
    /// The kernel's RSSI threshold: the lowest RSSI of the filters, if every filtered client gave
    /// one; none when a client gave none, gave a pathloss, or discovers without a filter.
    var rssiThreshold: Int16?
    /// The kernel's UUID filter: the union of the clients' UUIDs; empty (everything) when some
    /// client gave none or discovers without a filter.
    var uuids: Set<String> = []
    /// Some discovering client asked for DuplicateData.
    var duplicateData = false
    /// The patterns of the discovering clients that set one.
    var patterns: [String] = []

    init() {}

    init(_ clients: [DiscoveryClient]) {
        let active = clients.filter(\.discovering)
        let filters = active.compactMap(\.filter)
        let hasRegular = active.contains { $0.filter == nil }
        guard !filters.isEmpty else { return }
        filtered = true
        duplicateData = filters.contains(where: \.duplicateData)
        patterns = filters.compactMap(\.pattern)
        if hasRegular {
            // Regular and filtered discovery together: the kernel filter is cleared.
            return
        }
        var le = false
        var threshold: Int16? = Int16.max
        var emptyUUIDs = false
        var union: Set<String> = []
        for f in filters {
            if f.transport != .bredr { le = true }
            if let r = f.rssi, let t = threshold {
                threshold = min(t, r)
            } else {
                threshold = nil
            }
            if f.uuids.isEmpty { emptyUUIDs = true }
            union.formUnion(f.uuids)
        }
        scansLE = le
        rssiThreshold = threshold == Int16.max ? nil : threshold
        uuids = emptyUUIDs ? [] : union
    }
}

/// The state of one box's adapter (`struct btd_adapter`, the parts the simulator has).
struct AdapterState: Sendable {
    var name: String
    var alias: String?
    var address: String
    var powered = true
    var discoverable = false
    var discoverableTimeout: UInt32 = 180
    var pairable = true
    var pairableTimeout: UInt32 = 0
    /// Clients in the order BlueZ keeps them (most recent first does not matter here).
    var clients: [DiscoveryClient] = []
    /// The announced `Discovering`.
    var discovering = false
    var merged = MergedDiscovery()

    var isDiscovering: Bool { clients.contains(where: \.discovering) }

    mutating func remerge() { merged = MergedDiscovery(clients) }

    func client(_ owner: String) -> DiscoveryClient? { clients.first { $0.owner == owner } }

    mutating func setClient(_ client: DiscoveryClient) {
        if let i = clients.firstIndex(where: { $0.owner == client.owner }) { clients[i] = client } else { clients.append(client) }
    }

    mutating func removeClient(_ owner: String) { clients.removeAll { $0.owner == owner } }

    /// Adapter1's properties as BlueZ 5.66 shows them (experimental ones left out).
    func properties(uuids: [String]) -> [String: DBusValue] {
        [
            "Address": .string(address),
            "AddressType": .string("public"),
            "Name": .string(name),
            "Alias": .string(alias ?? name),
            "Class": .uint32(0),
            "Powered": .boolean(powered),
            "Discoverable": .boolean(discoverable),
            "DiscoverableTimeout": .uint32(discoverableTimeout),
            "Pairable": .boolean(pairable),
            "PairableTimeout": .uint32(pairableTimeout),
            "Discovering": .boolean(discovering),
            "UUIDs": .strings(uuids),
            "Modalias": .string("usb:v1D6Bp0246d0542"),
            "Roles": .strings(["central", "peripheral"]),
        ]
    }
}

// MARK: - The adapter on the bus

extension Air {
    /// How long a restarted bluetoothd takes to power its adapter on.
    static let autoEnableDelay: SimTime = 0.1

    /// Exports a box's "bluetoothd" objects on `tree` (a new instance: the box starts empty, as
    /// bluetoothd does after a restart) and returns the instance's generation.
    func attach(box name: String, tree: BusTree) -> Int {
        guard var b = boxes[name] else { return -1 }
        b.generation += 1
        b.tree = tree
        b.clearAdapter()
        b.agents = []
        b.defaultAgent = nil
        b.plugged = true
        b.deaf = false
        // The scenario starts with bluetoothd up; a restarted one (as bluetoothd 5.66 does) shows
        // the adapter off and powers it itself shortly after.
        if b.generation > 1 {
            b.adapter.powered = false
            b.autoEnabling = true
            timers.append(Timer(time: clock.now + Self.autoEnableDelay, action: .autoEnable(box: name, generation: b.generation)))
        }
        boxes[name] = b
        let ctx = BoxContext(air: self, box: name, generation: b.generation)
        tree.add(BlueZ.rootPath, [
            (agentManagerTemplate(ctx), [:]),
            (profileManagerTemplate(), [:]),
        ])
        tree.add(b.adapterPath, [
            (adapterTemplate(ctx), b.adapter.properties(uuids: adapterUUIDs(b))),
            (gattManagerTemplate(ctx), [:]),
            (advertisingManagerTemplate(ctx), advertisingManagerProperties(b)),
        ])
        // bluetoothd loads its bonds from its storage directory as it starts.
        restoreBonds(name)
        return b.generation
    }

    /// Takes the box's "bluetoothd" off the air: its connections drop (peers see the
    /// disconnection), its state is forgotten. Returns the old tree and the advertisements
    /// bluetoothd releases when it shuts down.
    func detach(box name: String) -> (tree: BusTree?, releases: [(owner: String, path: ObjectPath)]) {
        guard var b = boxes[name] else { return (nil, []) }
        dropConnections(involving: name)
        b = boxes[name]!
        let tree = b.tree
        let releases = b.advertisements.map { ($0.owner, $0.path) }
        b.tree = nil
        b.generation += 1
        b.clearAdapter()
        b.agents = []
        b.defaultAgent = nil
        boxes[name] = b
        removeAdvertisementTimers(name)
        return (tree, releases)
    }

    /// GAP, GATT and Device Information, then the registered applications' services.
    func adapterUUIDs(_ b: Box) -> [String] {
        var uuids = ["00001800", "00001801", "0000180a"].map { $0 + BluetoothUUID.baseSuffix }
        for app in b.applications {
            for s in app.services where !uuids.contains(s.uuid) { uuids.append(s.uuid) }
        }
        return uuids
    }

    func announceAdapter(_ name: String) {
        guard let b = boxes[name], let tree = b.tree else { return }
        tree.update(b.adapterPath, BlueZ.adapterInterface, set: b.adapter.properties(uuids: adapterUUIDs(b)))
    }

    // MARK: Discovery

    func startDiscovery(_ ctx: BoxContext, sender: String) throws(BlueZError) {
        guard var b = live(ctx), b.adapter.powered else { throw .notReady }
        if let c = b.adapter.client(sender) {
            if c.discovering { throw .busy }
            b.adapter.setClient(DiscoveryClient(owner: sender, filter: c.filter, discovering: true))
        } else {
            b.adapter.setClient(DiscoveryClient(owner: sender, filter: nil, discovering: true))
        }
        b.adapter.remerge()
        b.adapter.discovering = true
        boxes[ctx.box] = b
        announceAdapter(ctx.box)
    }

    func setDiscoveryFilter(_ ctx: BoxContext, sender: String, _ argument: DBusValue) throws(BlueZError) {
        guard var b = live(ctx), b.adapter.powered else { throw .notReady }
        let filter = try DiscoveryFilter.parse(argument)
        if let c = b.adapter.client(sender) {
            if filter == nil && !c.discovering {
                b.adapter.removeClient(sender)  // clearing a pre-set filter
            } else {
                b.adapter.setClient(DiscoveryClient(owner: sender, filter: filter, discovering: c.discovering))
            }
        } else if let filter {
            b.adapter.setClient(DiscoveryClient(owner: sender, filter: filter, discovering: false))
        }
        b.adapter.remerge()
        boxes[ctx.box] = b
    }

    func stopDiscovery(_ ctx: BoxContext, sender: String) throws(BlueZError) {
        guard var b = live(ctx), b.adapter.powered else { throw .notReady }
        guard let c = b.adapter.client(sender), c.discovering else { throw .failed("No discovery started") }
        // A client that set a filter keeps it for its next StartDiscovery.
        if c.filter != nil {
            b.adapter.setClient(DiscoveryClient(owner: sender, filter: c.filter, discovering: false))
        } else {
            b.adapter.removeClient(sender)
        }
        b.adapter.remerge()
        boxes[ctx.box] = b
        if !b.adapter.isDiscovering { discoveryCleanup(ctx.box) }
    }

    /// The last discovery ended (`discovery_cleanup`): RSSI and TxPower are cleared, temporary
    /// devices that were not connectable are removed, `Discovering` goes false.
    func discoveryCleanup(_ name: String) {
        guard var b = boxes[name] else { return }
        b.adapter.discovering = false
        b.pendingReports = []  // the controller's buffer goes with the scan
        b.batchDue = nil
        boxes[name] = b
        announceAdapter(name)
        for dev in b.devices.values.sorted(by: { $0.address < $1.address }) {
            if dev.temporary && !dev.connectable && dev.link == .idle {
                removeDevice(box: name, address: dev.address)
                continue
            }
            guard dev.rssi != 0 || dev.txPower != nil else { continue }
            var d = dev
            d.rssi = 0
            d.txPower = nil
            boxes[name]?.devices[d.address] = d
            publish(box: name, d)
        }
    }

    /// A D-Bus client left the bus: its discovery, advertisements and applications go with it
    /// (no `Release`: there is nobody to call).
    func clientVanished(box name: String, generation: Int, owner: String) {
        guard var b = boxes[name], b.generation == generation, b.tree != nil else { return }
        var changed = false
        if let c = b.adapter.client(owner) {
            b.adapter.removeClient(owner)
            b.adapter.remerge()
            boxes[name] = b
            if c.discovering && !b.adapter.isDiscovering { discoveryCleanup(name) }
            b = boxes[name]!
        }
        let adsBefore = b.advertisements.count
        b.advertisements.removeAll { $0.owner == owner }
        if b.advertisements.count != adsBefore { changed = true }
        let appsBefore = b.applications.count
        b.applications.removeAll { $0.owner == owner }
        b.agents.removeAll { $0.owner == owner }
        if b.defaultAgent == owner { b.defaultAgent = nil }
        boxes[name] = b
        if changed { announceInstances(name) }
        if b.applications.count != appsBefore { applicationsChanged(name) }
    }

    func removeDevice(_ ctx: BoxContext, path: ObjectPath) async throws {
        guard let b = live(ctx) else { throw BlueZError.doesNotExist }
        guard let dev = b.devices.values.first(where: { $0.path == path }) else { throw BlueZError.doesNotExist }
        guard b.adapter.powered else { throw BlueZError.notReady }
        if let key = connectionKey(box: ctx.box, address: dev.address) {
            try? await clock.sleep(for: settings.disconnectLatency)
            dropConnection(key)
        }
        if var d = boxes[ctx.box]?.devices[dev.address], case .connecting = d.link {
            d.link = .idle
            boxes[ctx.box]?.devices[dev.address] = d
        }
        guard live(ctx) != nil else { return }
        forgetBond(box: ctx.box, dev)
        removeDevice(box: ctx.box, address: dev.address)
    }

    // MARK: Properties

    /// Powers the adapter off (`adapter_stop`) or on.
    public func setPowered(box name: String, _ powered: Bool) throws(BlueZError) {
        guard var b = boxes[name], b.tree != nil else { throw .notReady }
        guard b.adapter.powered != powered else { return }
        b.adapter.powered = powered
        if !powered {
            b.deaf = false  // a controller reset clears a wedged firmware
            b.adapter.clients = []
            b.adapter.remerge()
            boxes[name] = b
            dropConnections(involving: name)
            for (address, dev) in boxes[name]!.devices {
                if case .connecting = dev.link { boxes[name]?.devices[address]?.link = .idle }
            }
            discoveryCleanup(name)
        } else {
            let now = clock.now
            for i in b.advertisements.indices {
                b.advertisements[i].nextEvent = now + b.advertisements[i].rng.uniform(0...radio.parameters.advertisingInterval)
            }
            boxes[name] = b
        }
        announceAdapter(name)
    }

    func setAdapterProperty(_ ctx: BoxContext, _ property: String, _ value: DBusValue) throws -> DBusValue {
        guard var b = live(ctx) else { throw BlueZError.notReady }
        switch (property, value) {
        case ("Powered", .boolean(let on)):
            if b.autoEnabling { throw BlueZError.adapterBusy }
            try setPowered(box: ctx.box, on)
            return value
        case ("Alias", .string(let s)):
            b.adapter.alias = s.isEmpty ? nil : s
        case ("Discoverable", .boolean(let on)):
            guard b.adapter.powered else { throw BlueZError.notReady }
            b.adapter.discoverable = on
        case ("DiscoverableTimeout", .uint32(let t)):
            b.adapter.discoverableTimeout = t
        case ("Pairable", .boolean(let on)):
            b.adapter.pairable = on
        case ("PairableTimeout", .uint32(let t)):
            b.adapter.pairableTimeout = t
        default:
            throw BlueZError.invalidArguments
        }
        boxes[ctx.box] = b
        announceAdapter(ctx.box)
        return b.adapter.properties(uuids: [])[property] ?? value
    }

    // MARK: Templates

    func adapterTemplate(_ ctx: BoxContext) -> InterfaceTemplate {
        func setter(_ name: String) -> DBusProperty.Setter {
            { value in try await ctx.handle { try await ctx.air.setAdapterProperty(ctx, name, value) } }
        }
        return InterfaceTemplate(name: BlueZ.adapterInterface, methods: [
            DBusMethod("StartDiscovery") { call in
                try await ctx.handle { try await ctx.air.startDiscovery(ctx, sender: call.sender?.rawValue ?? "") }
                return []
            },
            DBusMethod("SetDiscoveryFilter", inputs: [DBusArgument("properties", .dictionary(key: .string, value: .variant))]) { call in
                try await ctx.air.setDiscoveryFilter(ctx, sender: call.sender?.rawValue ?? "", call.arguments[0])
                return []
            },
            DBusMethod("StopDiscovery") { call in
                try await ctx.handle { try await ctx.air.stopDiscovery(ctx, sender: call.sender?.rawValue ?? "") }
                return []
            },
            DBusMethod("RemoveDevice", inputs: [DBusArgument("device", .objectPath)]) { call in
                guard let path = call.arguments[0].objectPath else { throw BlueZError.invalidArguments }
                try await ctx.handle { try await ctx.air.removeDevice(ctx, path: path) }
                return []
            },
            DBusMethod("GetDiscoveryFilters", outputs: [DBusArgument("filters", .array(.string))]) { _ in
                [.strings(DiscoveryFilter.keys)]
            },
        ], properties: [
            .init("Address", .string),
            .init("AddressType", .string),
            .init("Name", .string),
            .init("Alias", .string, setter: setter("Alias")),
            .init("Class", .uint32),
            .init("Powered", .boolean, setter: setter("Powered")),
            .init("Discoverable", .boolean, setter: setter("Discoverable")),
            .init("DiscoverableTimeout", .uint32, setter: setter("DiscoverableTimeout")),
            .init("Pairable", .boolean, setter: setter("Pairable")),
            .init("PairableTimeout", .uint32, setter: setter("PairableTimeout")),
            .init("Discovering", .boolean),
            .init("UUIDs", .array(.string)),
            .init("Modalias", .string),
            .init("Roles", .array(.string)),
        ])
    }

    func profileManagerTemplate() -> InterfaceTemplate {
        InterfaceTemplate(name: BlueZ.profileManagerInterface, methods: [
            DBusMethod("RegisterProfile", inputs: [DBusArgument("profile", .objectPath), DBusArgument("UUID", .string),
                                                   DBusArgument("options", .dictionary(key: .string, value: .variant))]) { _ in [] },
            DBusMethod("UnregisterProfile", inputs: [DBusArgument("profile", .objectPath)]) { _ in [] },
        ])
    }
}

extension Air.Box {
    /// What bluetoothd knows of its adapter, forgotten (a restart, the adapter unplugged): a fresh
    /// adapter, no devices, advertisements, applications or reports waiting.
    mutating func clearAdapter() {
        adapter = Self.freshAdapter(spec)
        devices = [:]
        advertisements = []
        applications = []
        pendingReports = []
        batchDue = nil
    }
}

extension Air {
    /// Advertisement timeouts of `box` that can no longer fire.
    func removeAdvertisementTimers(_ box: String) {
        timers.removeAll { timer in
            if case .advertisementTimeout(let b, _, _, _) = timer.action { return b == box }
            return false
        }
    }
}
