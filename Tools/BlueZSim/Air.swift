import BlueZ
import DBusKit
import Foundation
import Logging
import LibCrypto

/// The air between the boxes, and the state of every box's "bluetoothd".
///
/// One actor owns it all: positions, adapters, devices, advertisements, GATT applications and
/// connections. Time comes from a ``SimClock``; ``advance(to:)`` runs every advertising event and
/// timer due by then, in time order, so the same scenario and seed give the same reports whether
/// the clock is real or driven by a test.
///
/// D-Bus handlers (built in the files of each interface) call into the actor with a
/// ``BoxContext``, which names the box and the "bluetoothd" instance (its generation) they were
/// exported by: a handler of an instance that was restarted finds nothing to act on.
public actor Air {
    let clock: any SimClock
    let seed: UInt64
    let logger: Logger
    var radio: RadioModel
    var settings = LinkSettings()

    var boxes: [String: Box] = [:]
    var boxOrder: [String] = []
    /// The beacons and the private devices, by name, and in the order they came.
    var beacons: [String: Beacon] = [:]
    var beaconOrder: [String] = []
    var linkRNG: [String: SeededGenerator] = [:]
    /// The burst process of each transmitter–listener pair (`"alpha>bravo"`), made when the
    /// pair's first packet is sent with bursts on; emptied when `Configure` changes the burst
    /// parameters, so each starts again from time 0 with the new ones.
    var linkBursts: [String: BurstProcess] = [:]
    /// The realistic model's state of each link (advertiser > listener), when it is on.
    var realisticLinks: [String: RealisticLink] = [:]
    var connections: [ConnectionKey: Connection] = [:]
    var timers: [Timer] = []
    /// The private devices as the scenario gives them, by name (pairing needs their keys).
    var privateDeviceSpecs: [String: PrivateDeviceSpec] = [:]
    /// Where bluetoothd's `/var/lib/bluetooth` of each box is (`STORAGEDIR/<box>`); nil: bonds are
    /// kept in memory only.
    let storage: URL?
    var token: UInt64 = 0
    var lastSupervision: SimTime = 0
    /// Counters for the benchmark and the control interface.
    public internal(set) var stats = Stats()

    public struct Stats: Sendable, Hashable {
        /// Advertising reports that reached an adapter's device table.
        public var reports = 0
        /// Advertising events transmitted.
        public var transmissions = 0
        /// `Connect` calls that started a connection attempt, and those failed by
        /// `connection_failure_rate`.
        public var connectionAttempts = 0
        public var injectedConnectionFailures = 0
    }

    /// Link-layer settings that are not part of the radio model.
    public struct LinkSettings: Sendable, Hashable {
        /// ATT MTU of every connection (BlueZ exchanges 517 between two BlueZ stacks).
        public var mtu: UInt16 = 517
        /// How long the kernel tries to connect to a device that does not answer before it gives
        /// up with "le-connection-abort-by-local".
        public var connectTimeout: Double = 20
        /// Time from the connection to `ServicesResolved` (the GATT discovery).
        public var serviceDiscoveryTime: Double = 0.03
        /// Time a `Disconnect` takes.
        public var disconnectLatency: Double = 0.01
        public init() {}
    }

    /// The most advertisements one adapter takes (`SupportedInstances` when none is registered).
    static let maxAdvertisements = 5

    struct Box {
        var spec: BoxSpec
        var trajectory: Trajectory
        var tree: BusTree?
        var generation = 0
        var adapter: AdapterState
        var devices: [String: DeviceState] = [:]
        var advertisements: [RegisteredAdvertisement] = []
        var pendingAdvertisements: Set<String> = []
        var applications: [GattApplication] = []
        var pendingApplications: Set<String> = []
        /// Registered agents (`AgentManager1`), and the sender of the default one.
        var agents: [RegisteredAgent] = []
        var defaultAgent: String?
        /// What bluetoothd keeps of the devices it paired with, by identity address: like its
        /// storage directory, kept across restarts.
        var bonds: [String: Bond] = [:]
        /// The adapter is on its bluetoothd (`Unplug` takes it off).
        var plugged = true
        /// The scanner is deaf (`SetFault` deaf): discovery shows itself on and delivers nothing.
        var deaf = false
        var rng: SeededGenerator
        /// A restarted bluetoothd shows its adapter unpowered until it has powered it itself
        /// (`AutoEnable`); a client's `Powered` meanwhile is refused with `Busy`.
        var autoEnabling = false
        /// Where this box's `report_batching` windows begin, as a fraction of a window: its own,
        /// so that boxes do not take their reports in step.
        var batchPhase: Double = 0
        /// Reports received in the current window, in order, waiting to be taken in at
        /// `batchDue` (`report_batching`); dropped when discovery stops or bluetoothd restarts.
        var pendingReports: [PendingReport] = []
        var batchDue: SimTime?
        /// When this box's bluetoothd last put an advertising report on its bus (a device's
        /// `RSSI` for a discovering client): what a test that paces simulated time waits for its
        /// node to have taken in.
        var lastDelivery: SimTime?

        var adapterPath: ObjectPath { BlueZ.adapterPath(spec.adapter) }
        var alias: String { adapter.alias ?? adapter.name }

        static func freshAdapter(_ spec: BoxSpec) -> AdapterState {
            AdapterState(name: spec.name, address: spec.address)
        }
    }

    /// A report the controller received and bluetoothd has not taken in yet.
    struct PendingReport {
        var address: String
        var addressType: String
        var report: AdvertisingReport
        var rssi: Int16
    }

    struct RegisteredAdvertisement {
        var owner: String
        var path: ObjectPath
        var spec: AdvertisementSpec
        var instance: Int
        var nextEvent: SimTime
        var rng: SeededGenerator
        var expires: SimTime?
    }

    /// An advertiser that is not a box: a beacon (``BeaconSpec``, its fixed public address) or a
    /// private device (``PrivateDeviceSpec``, a resolvable private address it changes every
    /// `rotation` seconds). Both go on the air the same way; only where the address comes from
    /// differs.
    struct Beacon {
        /// The address it advertises from now.
        var address: String
        /// What BlueZ shows as the device's `AddressType`: "public", or "random" for a private
        /// device's addresses.
        var addressType: String
        var report: AdvertisingReport
        var trajectory: Trajectory
        /// Seconds between advertising events; nil means the radio's.
        var advertisingInterval: Double?
        /// Mean RSSI at 1 m (a beacon's frame calibration); nil means the radio's measured power.
        var measuredPower: Double?
        var txOffset: Double
        var nextEvent: SimTime
        var rng: SeededGenerator
        /// A private device's: how its address changes. Nil for a beacon.
        var rotation: AddressRotation?

        /// A beacon; its advertising stream is `derived("beacon:<name>")`.
        init(_ spec: BeaconSpec, seed: UInt64, defaultInterval: Double, now: SimTime) {
            address = spec.address
            addressType = "public"
            report = Air.report(for: spec.frame)
            trajectory = spec.trajectory
            advertisingInterval = spec.advertisingInterval
            measuredPower = spec.frame.measuredPowerAt1m
            txOffset = spec.txOffset
            rng = SeededGenerator(seed: seed).derived("beacon:\(spec.name)")
            nextEvent = now + rng.uniform(0...(spec.advertisingInterval ?? defaultInterval))
        }

        /// A private device, with its first address made now; its advertising stream is
        /// `derived("device:<name>")`, its addresses' random parts `derived("rpa:<name>")`.
        init(_ spec: PrivateDeviceSpec, seed: UInt64, defaultInterval: Double, now: SimTime) {
            var rotation = AddressRotation(irk: spec.irk, period: spec.rotation, next: now,
                                           rng: SeededGenerator(seed: seed).derived("rpa:\(spec.name)"))
            address = rotation.rotate(from: nil)
            addressType = "random"
            self.rotation = rotation
            var report = AdvertisingReport()
            report.manufacturerData = PrivateDeviceSpec.manufacturerData
            report.flags = 0x1A  // LE General Discoverable, LE and BR/EDR capable: a phone's
            report.connectable = false
            self.report = report
            trajectory = spec.trajectory
            advertisingInterval = spec.advertisingInterval
            measuredPower = nil
            txOffset = spec.txOffset
            rng = SeededGenerator(seed: seed).derived("device:\(spec.name)")
            nextEvent = now + rng.uniform(0...(spec.advertisingInterval ?? defaultInterval))
        }

        /// Takes the addresses due by `time`: a private device changes address at every multiple
        /// of its rotation since the start, whether or not it advertised in between (so its
        /// addresses do not depend on its advertising interval).
        mutating func rotate(until time: SimTime) {
            guard var r = rotation, r.next <= time else { return }
            while r.next <= time { address = r.rotate(from: address) }
            rotation = r
        }
    }

    /// How a private device's resolvable private address changes: a new one every `period`
    /// seconds, made with its IRK from 22 random bits of its own stream.
    struct AddressRotation {
        var irk: IdentityResolvingKey
        var period: Double
        /// When the next address is due.
        var next: SimTime
        var rng: SeededGenerator

        /// The next address (`AA:BB:…`), and the change after it scheduled. The random part is
        /// neither all zeros nor all ones (Core Vol 6 Part B 1.3.2.2) and the address differs from
        /// `previous`; a draw that breaks either is drawn again.
        mutating func rotate(from previous: String?) -> String {
            next += period
            while true {
                let prand = UInt32(truncatingIfNeeded: rng.next() >> 42)  // the top 22 bits
                guard prand != 0, prand != 0x3F_FFFF else { continue }
                let address = IdentityResolvingKey.addressText(irk.address(prand: prand))
                if address != previous { return address }
            }
        }
    }

    struct ConnectionKey: Hashable, Sendable {
        var central: String
        var peripheral: String
    }

    struct Connection {
        var token: UInt64
        /// The peer's attributes as objects on the central's bus.
        var remote: [ObjectPath: RemoteAttribute] = [:]
        var servicePaths: [ObjectPath] = []
    }

    struct Timer {
        enum Action {
            case resolveServices(ConnectionKey, UInt64)
            case advertisementTimeout(box: String, generation: Int, owner: String, path: ObjectPath)
            case autoEnable(box: String, generation: Int)
        }
        var time: SimTime
        var action: Action
    }

    public init(scenario: Scenario, clock: any SimClock, storage: URL? = nil, logger: Logger = Logger(label: "bluez-sim")) {
        self.clock = clock
        self.storage = storage
        self.seed = scenario.seed
        self.radio = scenario.radioModel
        self.logger = logger
        let root = SeededGenerator(seed: scenario.seed)
        for spec in scenario.boxes {
            var phase = root.derived("batching:\(spec.name)")
            boxes[spec.name] = Box(spec: spec, trajectory: spec.trajectory, adapter: Box.freshAdapter(spec),
                                   rng: root.derived("box:\(spec.name)"), batchPhase: phase.unit())
            boxOrder.append(spec.name)
        }
        let now = clock.now
        for spec in scenario.beacons {
            beacons[spec.name] = Beacon(spec, seed: scenario.seed, defaultInterval: scenario.radio.advertisingInterval, now: now)
            beaconOrder.append(spec.name)
        }
        for spec in scenario.privateDevices {
            privateDeviceSpecs[spec.name] = spec
            beacons[spec.name] = Beacon(spec, seed: scenario.seed, defaultInterval: scenario.radio.advertisingInterval, now: now)
            beaconOrder.append(spec.name)
        }
    }

    static func report(for frame: BeaconFrame) -> AdvertisingReport {
        var r = AdvertisingReport()
        r.manufacturerData = frame.manufacturerData
        r.serviceData = frame.serviceData
        r.serviceUUIDs = frame.serviceUUIDs.compactMap { BluetoothUUID($0)?.full }
        r.flags = 0x06
        if case .decoy = frame { r.connectable = true } else { r.connectable = false }
        return r
    }

    public var boxNames: [String] { boxOrder }
    /// When `box`'s bluetoothd last put an advertising report on its bus; nil before the first.
    public func lastDelivery(to box: String) -> SimTime? { boxes[box]?.lastDelivery }
    public func box(_ name: String) -> BoxSpec? { boxes[name]?.spec }
    public func position(of box: String) -> Position? {
        boxes[box].map { $0.trajectory.position(at: clock.now) }
    }

    /// The box whose "bluetoothd" instance exported the caller's handler, if it still runs.
    func live(_ ctx: BoxContext) -> Box? {
        guard let b = boxes[ctx.box], b.generation == ctx.generation, b.tree != nil, b.plugged else { return nil }
        return b
    }

    /// Waits until what the box's bluetoothd announced so far is on the bus, so a method's reply
    /// never overtakes the signals it caused (bluetoothd sends them first).
    func sync(_ ctx: BoxContext) async {
        await boxes[ctx.box]?.tree?.sync()
    }

    func nextToken() -> UInt64 {
        token += 1
        return token
    }

    // MARK: - The engine

    /// Runs every advertising event and timer due by `t`, in time order.
    public func advance(to t: SimTime) {
        while true {
            var due: [(time: SimTime, kind: Int, name: String, index: Int)] = []
            for name in beaconOrder {
                if let b = beacons[name], b.nextEvent <= t { due.append((b.nextEvent, 0, name, 0)) }
            }
            for name in boxOrder {
                guard let b = boxes[name], b.tree != nil, b.adapter.powered else { continue }
                for (i, ad) in b.advertisements.enumerated() where ad.nextEvent <= t {
                    due.append((ad.nextEvent, 1, name, i))
                }
            }
            for (i, timer) in timers.enumerated() where timer.time <= t {
                due.append((timer.time, 2, "", i))
            }
            for name in boxOrder {
                if let batch = boxes[name]?.batchDue, batch <= t { due.append((batch, 3, name, 0)) }
            }
            if due.isEmpty { break }
            due.sort { $0.time < $1.time }
            var firedTimers: [Timer] = []
            for event in due {
                switch event.kind {
                case 0: beaconEvent(event.name, at: event.time)
                case 1: advertisementEvent(event.name, index: event.index, at: event.time)
                case 3:
                    // Unless a report of a later window took this batch in already.
                    if boxes[event.name]?.batchDue == event.time { takeInReports(event.name, at: event.time) }
                default: firedTimers.append(timers[event.index])
                }
            }
            if !firedTimers.isEmpty {
                timers.removeAll { $0.time <= t }
                for timer in firedTimers.sorted(by: { $0.time < $1.time }) { fire(timer) }
            }
        }
        expireTemporaryDevices(at: t)
        if t - lastSupervision >= 0.5 {
            lastSupervision = t
            superviseConnections(at: t)
        }
    }

    private func beaconEvent(_ name: String, at time: SimTime) {
        guard var b = beacons[name] else { return }
        let interval = b.advertisingInterval ?? radio.parameters.advertisingInterval
        b.nextEvent = radio.nextAdvertisement(after: time, interval: interval, using: &b.rng)
        b.rotate(until: time)
        beacons[name] = b
        transmit(address: b.address, addressType: b.addressType, report: b.report, from: b.trajectory.position(at: time),
                 measuredPower: b.measuredPower, txOffset: b.txOffset, transmitter: name,
                 link: (b.rotation == nil ? "beacon:" : "device:") + name, at: time)
    }

    private func advertisementEvent(_ box: String, index: Int, at time: SimTime) {
        guard let count = boxes[box]?.advertisements.count, index < count else { return }
        let interval = radio.parameters.advertisingInterval
        boxes[box]!.advertisements[index].nextEvent = radio.nextAdvertisement(
            after: time, interval: interval, using: &boxes[box]!.advertisements[index].rng)
        guard let (address, report, position, instance) = advertised(box, index: index, at: time) else { return }
        transmit(address: address, addressType: "public", report: report, from: position, measuredPower: nil,
                 txOffset: boxes[box]?.spec.txOffset ?? 0, transmitter: box, link: "box:\(box):\(instance)", at: time)
    }

    private func advertised(_ box: String, index: Int, at time: SimTime) -> (String, AdvertisingReport, Position, Int)? {
        guard let b = boxes[box] else { return nil }
        let ad = b.advertisements[index]
        return (b.spec.address, ad.spec.report(adapterAlias: b.alias, adapterDiscoverable: b.adapter.discoverable),
                b.trajectory.position(at: time), ad.instance)
    }

    /// One advertising event, heard (or not) by every discovering adapter. `link` names the
    /// advertiser (a box's advertisement instance, a beacon or a private device) for its RSSI
    /// stream; `transmitter` names the device (the box, beacon or private device, by name: names
    /// are unique across them all) for the burst process, which all of a box's advertisements
    /// share on the way to one listener. `txOffset` (the transmitter's `tx_offset`) is added to
    /// every sample's mean. `addressType` is the advertiser's address's, as the controller reports
    /// it ("public" or "random").
    private func transmit(address: String, addressType: String, report: AdvertisingReport, from position: Position,
                          measuredPower: Double?, txOffset: Double, transmitter: String, link: String, at time: SimTime) {
        stats.transmissions += 1
        for name in boxOrder {
            guard let (merged, listenerPosition) = listening(name, notAt: address, at: time), merged.scansLE else { continue }
            let key = link + ">" + name
            let pair = transmitter + ">" + name
            // The realistic part and the bursts draw from streams of their own (so the simple
            // model's draw the same whether they are on or not).
            let realistic = radio.parameters.realistic
            var state = RadioLink(
                rng: linkRNG[key] ?? SeededGenerator(seed: seed).derived("link:" + key),
                realistic: realistic.isOff ? nil
                    : realisticLinks[key] ?? realistic.link(seed: seed, stream: "realistic:" + key, from: transmitter, to: name),
                burst: radio.parameters.burstLossRate > 0
                    ? linkBursts[pair] ?? radio.burstProcess(seed: seed, from: transmitter, to: name) : nil)
            let sample = radio.receive(from: position, at: listenerPosition, time: time, measuredPower: measuredPower, txOffset: txOffset,
                                       link: &state)
            linkRNG[key] = state.rng
            if let realistic = state.realistic { realisticLinks[key] = realistic }
            if let burst = state.burst { linkBursts[pair] = burst }
            guard let rssi = sample else { continue }
            if let threshold = merged.rssiThreshold, rssi < threshold { continue }
            if !merged.uuids.isEmpty && merged.uuids.isDisjoint(with: report.serviceUUIDs) { continue }
            receive(box: name, address: address, addressType: addressType, report: report, rssi: rssi, at: time)
        }
    }

    /// A report the box's controller received (past the kernel's filter): bluetoothd takes it in
    /// now, or, with `report_batching` W, at the end of the box's current window (the box's
    /// windows are W long, shifted by its own phase), together with the others received in it
    /// and in the order received.
    private func receive(box name: String, address: String, addressType: String, report: AdvertisingReport, rssi: Int16,
                         at time: SimTime) {
        let window = radio.parameters.reportBatching
        if let batch = boxes[name]?.batchDue, batch <= time || window == 0 {
            takeInReports(name, at: min(batch, time))  // an ended window, or batching turned off
        }
        guard window > 0, var b = boxes[name] else {
            found(box: name, address: address, addressType: addressType, report: report, rssi: rssi, at: time)
            return
        }
        b.pendingReports.append(PendingReport(address: address, addressType: addressType, report: report, rssi: rssi))
        if b.batchDue == nil {
            let offset = b.batchPhase * window
            b.batchDue = offset + ((time - offset) / window).rounded(.down) * window + window
        }
        boxes[name] = b
    }

    /// Hands the box's pending reports to bluetoothd, as received at `time`.
    private func takeInReports(_ name: String, at time: SimTime) {
        guard let pending = boxes[name]?.pendingReports else { return }
        boxes[name]?.pendingReports = []
        boxes[name]?.batchDue = nil
        for r in pending { found(box: name, address: r.address, addressType: r.addressType, report: r.report, rssi: r.rssi, at: time) }
    }

    /// A box that hears advertisements now: its merged discovery and position. (No copy of the
    /// box outlives this call, so `found` mutates the device table in place.)
    private func listening(_ name: String, notAt address: String, at time: SimTime) -> (MergedDiscovery, Position)? {
        guard let b = boxes[name], b.tree != nil, b.plugged, !b.deaf, b.adapter.powered, b.adapter.isDiscovering,
              b.spec.address != address else {
            return nil
        }
        return (b.adapter.merged, b.trajectory.position(at: time))
    }

    /// `btd_adapter_update_found_device`. A new device takes `addressType` (its `AddressType`).
    private func found(box name: String, address: String, addressType: String, report: AdvertisingReport, rssi: Int16,
                       at time: SimTime) {
        guard let adapter = boxes[name]?.adapter, let adapterName = boxes[name]?.spec.adapter else { return }
        let (address, addressType) = boxes[name]!.bonds.isEmpty ? (address, addressType)
            : resolveBonded(box: name, address: address, addressType: addressType)
        let merged = adapter.merged
        var discoverable = merged.filtered || report.isDiscoverable
        if !merged.patterns.isEmpty {
            discoverable = merged.patterns.contains { p in
                p.isEmpty || address.hasPrefix(p) || (report.name?.hasPrefix(p) ?? false)
            }
        }
        var isNew = false
        var dev: DeviceState
        if let existing = boxes[name]?.devices[address] {
            dev = existing
        } else {
            guard discoverable else { return }
            dev = DeviceState(address: address, adapter: adapterName, now: time)
            dev.addressType = addressType
            isNew = true
        }
        dev.lastSeen = time
        dev.connectable = report.connectable
        var force: Set<String> = []
        if discoverable && (!merged.filtered || Self.filterMatch(adapter.clients, report.serviceUUIDs)) {
            stats.reports += 1
            if dev.setRSSI(rssi, delta: merged.filtered ? 0 : DeviceState.rssiThreshold) {
                // A sample goes out on the bus (under a filter every report's, forced).
                boxes[name]?.lastDelivery = time
                if merged.filtered { force.insert("RSSI") }
            }
            if let tx = report.txPower { dev.txPower = tx }
            if let a = report.appearance { dev.appearance = a }
            if let n = report.name { dev.name = n }
            for u in report.serviceUUIDs where !dev.uuids.contains(u) { dev.uuids.append(u) }
            for (k, v) in report.manufacturerData {
                dev.manufacturerData[k] = v
                if merged.duplicateData { force.insert("ManufacturerData") }
            }
            for (k, v) in report.serviceData {
                dev.serviceData[k] = v
                if merged.duplicateData { force.insert("ServiceData") }
            }
        }
        boxes[name]!.devices[address] = dev
        publish(box: name, dev, isNew: isNew, force: force)
    }

    /// `is_filter_match`: a discovering client without a filter, or with no UUIDs, or with one of
    /// the advertised UUIDs, takes the report. (BlueZ's proximity test there always passes; the
    /// kernel's merged RSSI threshold is what filters by RSSI.)
    static func filterMatch(_ clients: [DiscoveryClient], _ uuids: [String]) -> Bool {
        for c in clients where c.discovering {
            guard let f = c.filter else { return true }
            if f.uuids.isEmpty || f.uuids.contains(where: uuids.contains) { return true }
        }
        return false
    }

    /// Puts a device's properties on its box's bus: a new device with `InterfacesAdded`, an
    /// existing one with `PropertiesChanged` for what changed (and what is in `force`).
    func publish(box name: String, _ dev: DeviceState, isNew: Bool = false, force: Set<String> = []) {
        guard let tree = boxes[name]?.tree, let generation = boxes[name]?.generation else { return }
        if isNew || !tree.exists(dev.path) {
            tree.add(dev.path, [(deviceTemplate(BoxContext(air: self, box: name, generation: generation), address: dev.address),
                                 dev.properties)])
        } else {
            let props = dev.properties
            tree.update(dev.path, BlueZ.deviceInterface, set: props,
                        clear: DeviceState.optionalProperties.filter { props[$0] == nil }, force: force)
        }
    }

    /// Removes devices not heard for the temporary timeout (`device_disappeared`).
    private func expireTemporaryDevices(at t: SimTime) {
        for name in boxOrder {
            guard let b = boxes[name], b.tree != nil else { continue }
            let expired = b.devices.values.filter {
                $0.temporary && $0.link == .idle && t - $0.lastSeen >= DeviceState.temporaryTimeout
            }
            for dev in expired { removeDevice(box: name, address: dev.address) }
        }
    }

    func removeDevice(box name: String, address: String) {
        guard let dev = boxes[name]?.devices.removeValue(forKey: address) else { return }
        boxes[name]?.tree?.removeSubtree(dev.path)
    }

    /// Drops connections whose peers moved out of range (the supervision timeout).
    private func superviseConnections(at t: SimTime) {
        for key in Array(connections.keys) {
            guard let c = boxes[key.central], let p = boxes[key.peripheral] else { continue }
            let d = c.trajectory.position(at: t).distance(to: p.trajectory.position(at: t))
            if radio.meanRSSI(distance: d) < radio.parameters.sensitivity {
                dropConnection(key)
            }
        }
    }

    private func fire(_ timer: Timer) {
        switch timer.action {
        case .resolveServices(let key, let token):
            resolveServices(key, token: token)
        case .advertisementTimeout(let box, let generation, let owner, let path):
            guard var b = boxes[box], b.generation == generation, let tree = b.tree,
                  let i = b.advertisements.firstIndex(where: { $0.owner == owner && $0.path == path }) else { return }
            b.advertisements.remove(at: i)
            boxes[box] = b
            announceInstances(box)
            Self.release(owner: owner, path: path, on: tree.connection)
        case .autoEnable(let box, let generation):
            guard let b = boxes[box], b.generation == generation, b.autoEnabling else { return }
            boxes[box]?.autoEnabling = false
            try? setPowered(box: box, true)
        }
    }

    /// Calls the advertisement's `Release` without waiting for the answer (bluetoothd does not
    /// wait either).
    static func release(owner: String, path: ObjectPath, on connection: DBusConnection) {
        guard let destination = try? BusName(owner) else { return }
        Task {
            _ = try? await connection.call(destination: destination, path: path, interface: BlueZ.advertisementInterface,
                                           member: "Release", timeout: .seconds(2))
        }
    }

    // MARK: - Connections

    /// The box that answers a connection to `address` from `central`: it runs, is powered,
    /// advertises connectable, and is in range.
    func reachablePeripheral(_ address: String, from central: String, at t: SimTime) -> String? {
        guard let c = boxes[central] else { return nil }
        for name in boxOrder where name != central {
            guard let p = boxes[name], p.spec.address == address, p.tree != nil, p.adapter.powered,
                  p.advertisements.contains(where: { $0.spec.type == .peripheral }) else { continue }
            let d = c.trajectory.position(at: t).distance(to: p.trajectory.position(at: t))
            guard radio.meanRSSI(distance: d) >= radio.parameters.sensitivity else { return nil }
            return name
        }
        return nil
    }

    /// The connection is up: both sides see `Connected`, the central resolves the services.
    func establish(central: String, peripheral: String, token: UInt64) {
        guard let c = boxes[central], let p = boxes[peripheral] else { return }
        let key = ConnectionKey(central: central, peripheral: peripheral)
        if var dev = c.devices[p.spec.address] {
            dev.link = .connected
            dev.servicesResolved = false
            boxes[central]?.devices[p.spec.address] = dev
            publish(box: central, dev)
        }
        let now = clock.now
        var incoming = p.devices[c.spec.address] ?? DeviceState(address: c.spec.address, adapter: p.spec.adapter, now: now)
        let isNew = p.devices[c.spec.address] == nil
        incoming.link = .connected
        incoming.lastSeen = now
        boxes[peripheral]?.devices[c.spec.address] = incoming
        publish(box: peripheral, incoming, isNew: isNew)
        connections[key] = Connection(token: token)
        timers.append(Timer(time: now + settings.serviceDiscoveryTime, action: .resolveServices(key, token)))
    }

    private func resolveServices(_ key: ConnectionKey, token: UInt64) {
        guard let conn = connections[key], conn.token == token, let c = boxes[key.central],
              var dev = c.devices[boxes[key.peripheral]?.spec.address ?? ""], dev.connected else { return }
        exportRemoteGatt(key)
        dev.servicesResolved = true
        boxes[key.central]?.devices[dev.address] = dev
        publish(box: key.central, dev)
    }

    /// Mirrors the peripheral's GATT applications on the central's bus (again, after the
    /// peripheral's applications changed).
    func exportRemoteGatt(_ key: ConnectionKey) {
        guard var conn = connections[key], let c = boxes[key.central], let p = boxes[key.peripheral], let tree = c.tree,
              let dev = c.devices[p.spec.address] else { return }
        for path in conn.servicePaths { tree.removeSubtree(path) }
        let layout = RemoteGattLayout(device: dev.path, applications: p.applications, mtu: settings.mtu)
        let ctx = BoxContext(air: self, box: key.central, generation: c.generation)
        conn.remote = [:]
        conn.servicePaths = []
        for object in layout.objects {
            tree.add(object.path, [(remoteGattTemplate(object.template, ctx), object.values)])
            conn.remote[object.path] = object.attribute
            if object.template == .service { conn.servicePaths.append(object.path) }
        }
        connections[key] = conn
    }

    /// Tears a connection down on both sides (`Disconnect`, power off, restart, out of range).
    func dropConnection(_ key: ConnectionKey) {
        guard let conn = connections.removeValue(forKey: key) else { return }
        let now = clock.now
        if let c = boxes[key.central], let p = boxes[key.peripheral], var dev = c.devices[p.spec.address] {
            if let tree = c.tree {
                if dev.servicesResolved {
                    dev.servicesResolved = false
                    boxes[key.central]?.devices[dev.address] = dev
                    publish(box: key.central, dev)
                }
                for path in conn.servicePaths { tree.removeSubtree(path) }
            }
            dev.servicesResolved = false
            dev.link = .idle
            boxes[key.central]?.devices[dev.address] = dev
            publish(box: key.central, dev)
        }
        if let c = boxes[key.central], let p = boxes[key.peripheral], var dev = p.devices[c.spec.address] {
            dev.link = .idle
            dev.lastSeen = now
            boxes[key.peripheral]?.devices[dev.address] = dev
            publish(box: key.peripheral, dev)
        }
    }

    /// The connection `box` has with the device `address`, in either role.
    func connectionKey(box: String, address: String) -> ConnectionKey? {
        connections.keys.first { key in
            (key.central == box && boxes[key.peripheral]?.spec.address == address)
                || (key.peripheral == box && boxes[key.central]?.spec.address == address)
        }
    }

    func dropConnections(involving box: String) {
        for key in connections.keys where key.central == box || key.peripheral == box { dropConnection(key) }
    }
}

/// What a handler exported on a box's bus knows about where it lives.
struct BoxContext: Sendable {
    let air: Air
    let box: String
    let generation: Int

    /// Runs a method's work, then lets the signals it caused out before the reply (or error).
    func handle<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        do {
            let result = try await body()
            await air.sync(self)
            return result
        } catch {
            await air.sync(self)
            throw error
        }
    }
}
