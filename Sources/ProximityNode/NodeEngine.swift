import BlueZ
import DBusKit
import Foundation
import Logging
import ProximityCore

/// The node at work: follows BlueZ through the mirror, advertises and serves the identity,
/// discovers, identifies new peers (in ``Identifier`` workers) and ranges identified ones.
///
/// ``run()`` runs the mirror, the event loop, the once-a-second ticker and the identification
/// workers as child tasks of one task group; cancelling it stops them all. ``stop()`` then
/// unregisters the advertisement and the GATT application.
public actor NodeEngine {
    let configuration: NodeConfiguration
    let identity: UUID
    let connection: DBusConnection
    let nodeObject: DBusObject
    let shared: NodeShared
    let state: StateDirectory
    let logger: Logger
    let mirror: BlueZObjectMirror
    let adapterPath: ObjectPath
    let serviceUUID: String

    private var table: FoundDevicesTable
    /// Address → identity of the peer nodes identified (persisted in `peers.json`, capped).
    private var identities: [String: RememberedAddress]
    /// Addresses queued or being identified; those whose identification failed, with how often
    /// and when to try again; those never to identify (this node's own identity).
    private var identifying: Set<String> = []
    private var failed: [String: (attempts: Int, retryAt: Timestamp)] = [:]
    private var ignored: Set<String> = []
    /// Attempt n failing waits `2^(n-1)` s (at most `maxBackoff`) before the next; after
    /// `maxAttempts` failures, or one rejected identity, the address is left alone for `banTime`.
    let maxAttempts = 8
    let maxBackoff: Double = 60
    let banTime: Double = 600
    let maxQueuedIdentifications = 256
    private var queue: AsyncStream<IdentificationRequest>.Continuation?
    /// The adapter's own address, for the tie-break between two nodes that find each other at once.
    private var ownAddress: String?

    struct IdentificationRequest: Sendable {
        var path: ObjectPath
        var address: String
        var attempt: Int
        /// This node has the higher address: it lets the peer connect first.
        var yields: Bool
    }
    private var advertisement: Advertisement?
    private var application: GattApplication?
    private var registered = false
    private var registering = false
    private var discovering = false
    private var setUp = false
    private var powering = false
    /// When registration, or starting discovery, is tried again after a failure.
    private var retryRegistration: Retry?
    private var retryDiscovery: Retry?

    /// A retry after a failure: when, and the delay after that (doubling, at most a minute).
    struct Retry {
        var at: Timestamp
        var delay: Double

        /// The retry after `previous` failed (or after a first failure), from `now`.
        static func after(_ previous: Retry?, now: Timestamp) -> Retry {
            let delay = previous?.delay ?? 1
            return Retry(at: now + delay, delay: min(delay * 2, 60))
        }
    }
    private var peerObjects: [String: DBusObject] = [:]
    private var peerInfo: [String: PeerInfo] = [:]
    private var overrides: [String: Int16] = [:]
    private var overridesVersion = -1

    /// What the table does not hold of a peer: how it is known and what it last said.
    struct PeerInfo {
        var kind: String
        var address: String
        var name: String
        var rssi: Int16
        var beacon: BeaconIdentity?
    }

    private let clock = ContinuousClock()
    private let origin: ContinuousClock.Instant
    private let epochAtOrigin: Double

    public init(configuration: NodeConfiguration, identity: UUID, connection: DBusConnection, nodeObject: DBusObject,
                shared: NodeShared, state: StateDirectory, logger: Logger) {
        self.configuration = configuration
        self.identity = identity
        self.connection = connection
        self.nodeObject = nodeObject
        self.shared = shared
        self.state = state
        self.logger = logger
        self.mirror = BlueZObjectMirror(connection: connection, logger: logger)
        self.adapterPath = BlueZService.rootPath.appending(escaped: configuration.adapter)
        self.serviceUUID = configuration.serviceUUID.lowercased
        var ranging = RangingConfiguration()
        ranging.clearInterval = shared.clearInterval
        ranging.maxPeers = configuration.maxPeers
        ranging.distanceModel = LogDistanceModel(exponent: configuration.pathLossExponent)
        ranging.defaultMeasuredPower = Double(configuration.measuredPower)
        self.table = FoundDevicesTable(configuration: ranging)
        self.origin = ContinuousClock.now
        self.epochAtOrigin = Date().timeIntervalSince1970
        self.identities = PeerDirectory.load(from: state, now: epochAtOrigin, logger: logger)
    }

    /// Seconds on the monotonic clock since the engine started: the core's time.
    private var now: Timestamp {
        let d = origin.duration(to: clock.now)
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    private func epochMicroseconds(_ t: Timestamp) -> UInt64 {
        UInt64(max(0, (epochAtOrigin + t) * 1_000_000))
    }

    /// Runs until cancelled.
    public func run() async {
        do {
            advertisement = try await Advertisement.export(
                on: connection, content: AdvertisementContent(serviceUUID: serviceUUID, localName: configuration.name, identity: identity),
                logger: logger)
            application = try await GattApplication.export(on: connection, serviceUUID: serviceUUID, identity: identity)
        } catch {
            logger.error("cannot export the advertisement or the GATT application", metadata: ["error": "\(error)"])
        }
        shared.identities = identities.mapValues(\.identity.lowercased)
        let (requests, queue) = AsyncStream.makeStream(of: IdentificationRequest.self, bufferingPolicy: .unbounded)
        self.queue = queue
        let identifier = Identifier(connection: connection, mirror: mirror, serviceUUID: serviceUUID, logger: logger)
        logger.info("waiting for bluetoothd (org.bluez)", metadata: ["bluez.adapter": "\(configuration.adapter)"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [mirror, logger] in
                do { try await mirror.run() } catch { logger.error("cannot follow BlueZ", metadata: ["error": "\(error)"]) }
            }
            group.addTask {
                for await event in self.mirror.events { await self.handle(event) }
            }
            group.addTask {
                // On a fixed schedule (a report each second, not a second after the last one
                // ended), so the clear interval's bound holds; a late tick does not bunch up.
                let clock = ContinuousClock()
                var next = clock.now
                while !Task.isCancelled {
                    next = max(next.advanced(by: .seconds(1)), clock.now.advanced(by: .milliseconds(500)))
                    do { try await Task.sleep(until: next, clock: clock) } catch { return }
                    await self.tick()
                }
            }
            if let releases = advertisement?.releases {
                group.addTask {
                    for await _ in releases { await self.released() }
                }
            }
            for _ in 0..<max(1, configuration.identificationConcurrency) {
                group.addTask {
                    for await request in requests {
                        let result = await identifier.identify(request.path, address: request.address, attempt: request.attempt,
                                                               yields: request.yields)
                        await self.identified(request.address, attempt: request.attempt, result)
                    }
                }
            }
            await group.waitForAll()
        }
    }

    /// Unregisters the advertisement and the application; call after ``run()`` returned.
    public func stop() async {
        queue?.finish()
        guard registered else { return }
        let adapter = Adapter(connection: connection, path: adapterPath)
        do {
            if let advertisement { try await advertisement.unregister(from: adapter.advertisingManager) }
            if let application { try await application.unregister(from: adapter.gattManager) }
        } catch {
            logger.warning("cannot unregister from BlueZ", metadata: ["error": "\(error)"])
            return
        }
        registered = false
        logger.info("unregistered the advertisement and the GATT application")
    }

    // MARK: - Events

    private func handle(_ event: BlueZEvent) async {
        switch event {
        case .adapterAdded(let info), .adapterChanged(let info, _):
            guard info.path == adapterPath else { return }
            await adapterSeen(info)
        case .adapterRemoved(let path):
            if path == adapterPath { lost("the adapter was removed") }
        case .bluezGone:
            lost("bluetoothd went away", waitingFor: "bluetoothd (org.bluez)")
        case .bluezRestarted:
            logger.notice("bluetoothd restarted")
        // Several nodes may share one bluetoothd, each with its own adapter: only this one's devices.
        case .deviceAdded(let info):
            guard info.adapter == adapterPath else { return }
            device(info, sample: info.rssi != nil)
        case .deviceChanged(let info, let changed):
            guard info.adapter == adapterPath else { return }
            device(info, sample: changed.contains("RSSI"))
        case .deviceRemoved:
            break
        }
    }

    private func lost(_ why: String, waitingFor: String = "the adapter") {
        guard setUp || registered else { return }
        logger.warning("\(why): waiting for \(waitingFor)", metadata: ["bluez.adapter": "\(configuration.adapter)"])
        setUp = false
        registered = false
        discovering = false
        powering = false
        retryRegistration = nil
        retryDiscovery = nil
        nodeObject.set(["Advertising": .boolean(false), "Discovering": .boolean(false)], interface: NodeAPI.node1)
    }

    private func adapterSeen(_ info: AdapterInfo) async {
        if setUp {
            if !info.powered {
                lost("the adapter was powered off")
            } else if discovering != info.discovering {
                // Someone stopped our discovery (or BlueZ did): start it again.
                discovering = info.discovering
                nodeObject.set("Discovering", .boolean(info.discovering), interface: NodeAPI.node1)
                if !info.discovering { await startDiscovery() }
            }
            return
        }
        let adapter = Adapter(connection: connection, path: adapterPath)
        guard info.powered else {
            if configuration.powerOn && !powering {
                powering = true
                logger.info("powering the adapter on", metadata: ["bluez.adapter": "\(configuration.adapter)"])
                do { try await adapter.setPowered(true) } catch BlueZCallError.other(name: "org.bluez.Error.Busy", _) {
                    // A bluetoothd that just started powers its adapter itself (AutoEnable).
                    logger.info("bluetoothd is powering the adapter on itself")
                } catch {
                    logger.error("cannot power the adapter on", metadata: ["error": "\(error)"])
                }
            } else if !powering {
                logger.warning("the adapter is off (use --power-on, or power it on with bluetoothctl)")
                powering = true
            }
            return
        }
        setUp = true
        logger.info("adapter ready", metadata: ["bluez.adapter": "\(info.path)", "bluez.address": "\(info.address)"])
        ownAddress = info.address.uppercased()
        await register()
        await startDiscovery()
        // Devices already in the mirror (a restart) are considered again.
        for device in await mirror.devices(on: adapterPath) { self.device(device, sample: false) }
    }

    /// Registers the GATT application and the advertisement; after a failure (instances used up,
    /// a busy or confused bluetoothd) tries again with a doubling delay up to a minute.
    private func register() async {
        guard setUp, !registered, !registering else { return }
        registering = true
        defer { registering = false }
        let adapter = Adapter(connection: connection, path: adapterPath)
        // BlueZ keeps registrations across a power cycle: AlreadyExists means registered.
        do {
            if let application {
                do { try await application.register(with: adapter.gattManager) } catch BlueZCallError.alreadyExists {}
            }
            if let advertisement {
                do { try await advertisement.register(with: adapter.advertisingManager) } catch BlueZCallError.alreadyExists {}
            }
            guard setUp else { return }
            registered = true
            if retryRegistration != nil { logger.notice("registered the advertisement and the GATT application") }
            retryRegistration = nil
            nodeObject.set("Advertising", .boolean(true), interface: NodeAPI.node1)
        } catch {
            let t = now
            let retry = Retry.after(retryRegistration, now: t)
            retryRegistration = retry
            logger.error("cannot register the advertisement or the GATT application; trying again in \(Int((retry.at - t).rounded())) s",
                         metadata: ["error": "\(error)"])
        }
    }

    private func startDiscovery() async {
        guard setUp else { return }
        let adapter = Adapter(connection: connection, path: adapterPath)
        do {
            try await adapter.setDiscoveryFilter(.proximity(serviceUUID: serviceUUID, beacons: configuration.trackBeacons))
            do { try await adapter.startDiscovery() } catch BlueZCallError.inProgress {}
            guard setUp else { return }
            discovering = true
            retryDiscovery = nil
            nodeObject.set("Discovering", .boolean(true), interface: NodeAPI.node1)
        } catch {
            let t = now
            let retry = Retry.after(retryDiscovery, now: t)
            retryDiscovery = retry
            logger.error("cannot start discovery; trying again in \(Int((retry.at - t).rounded())) s", metadata: ["error": "\(error)"])
        }
    }

    private func released() {
        logger.notice("BlueZ released the advertisement")
        nodeObject.set("Advertising", .boolean(false), interface: NodeAPI.node1)
        guard registered else { return }
        // Still set up: register again (the application is kept, so it answers AlreadyExists).
        registered = false
        retryRegistration = Retry.after(nil, now: now)
    }

    // MARK: - Devices

    private func device(_ info: DeviceInfo, sample: Bool) {
        let address = info.address
        let t = now
        if identities[address] != nil {
            guard sample, let rssi = info.rssi, Self.isMeasured(rssi) else { return }
            identities[address]!.seen = epochAtOrigin + t
            observe(identities[address]!.identity.lowercased, kind: "node", address: address, name: info.name ?? info.alias,
                    rssi: rssi, beacon: nil, framePower: nil, at: t)
            return
        }
        if configuration.trackBeacons, !info.manufacturerData.isEmpty || !info.serviceData.isEmpty,
           let beacon = BeaconParser.parse(manufacturerData: info.manufacturerData, serviceData: info.serviceData) {
            guard sample, let rssi = info.rssi, Self.isMeasured(rssi) else { return }
            observe(beacon.identifier, kind: beacon.kind, address: address, name: info.name, rssi: rssi, beacon: beacon,
                    framePower: beacon.measuredPower, at: t)
            return
        }
        guard info.advertises(serviceUUID), !identifying.contains(address), !ignored.contains(address) else { return }
        // A flood of advertisers must not grow the queue without bound: beyond the cap a device
        // waits for a later sample, after the queue drained.
        guard identifying.count < maxQueuedIdentifications else { return }
        var attempt = 1
        if let failure = failed[address] {
            guard t >= failure.retryAt else { return }
            // After a ban the count starts again.
            attempt = failure.attempts >= maxAttempts ? 1 : failure.attempts + 1
        }
        identifying.insert(address)
        // Two nodes that find each other at once would connect to each other at once: crossing
        // links, which BlueZ handles badly (and which crash the Linux 6.1 kernel's L2CAP code on
        // emulated controllers). The node with the higher address lets the other go first.
        let yields = attempt == 1 && (ownAddress.map { $0 > address.uppercased() } ?? false)
        queue?.yield(IdentificationRequest(path: info.path, address: address, attempt: attempt, yields: yields))
    }

    /// 127 is HCI's "RSSI not available" (emulated controllers report nothing else); a radio
    /// never hears anything above +20 dBm.
    static func isMeasured(_ rssi: Int16) -> Bool { rssi >= -127 && rssi <= 20 }

    private func observe(_ id: String, kind: String, address: String, name: String?, rssi: Int16, beacon: BeaconIdentity?,
                         framePower: Double?, at t: Timestamp) {
        let power = overrides[id].map(Double.init) ?? framePower
        // A full table may have no place for it (it keeps the nearest).
        guard table.observe(id, rssi: Double(rssi), at: t, measuredPower: power) != nil else { return }
        if var known = peerInfo[id] {
            known.address = address
            known.rssi = rssi
            if let name { known.name = name }
            peerInfo[id] = known
        } else {
            peerInfo[id] = PeerInfo(kind: kind, address: address, name: name ?? "", rssi: rssi, beacon: beacon)
        }
    }

    private func identified(_ address: String, attempt: Int, _ outcome: IdentificationResult) {
        identifying.remove(address)
        let result: UUID
        switch outcome {
        case .identified(let uuid):
            result = uuid
            failed[address] = nil
        case .rejected:
            failed[address] = (maxAttempts, now + banTime)
            logger.warning("leaving a peer alone", metadata: ["peer.address": "\(address)", "for": "\(Int(banTime)) s"])
            return
        case .failed:
            if attempt >= maxAttempts {
                failed[address] = (attempt, now + banTime)
                logger.warning("identification failed \(attempt) times: leaving the peer alone",
                               metadata: ["peer.address": "\(address)", "for": "\(Int(banTime)) s"])
            } else {
                failed[address] = (attempt, now + min(pow(2, Double(attempt - 1)), maxBackoff))
            }
            return
        }
        guard result != identity else {
            ignored.insert(address)
            return
        }
        // The same peer at a new address (a private address rotated, a new adapter): the old
        // addresses no longer name it.
        let previous = identities.filter { $0.key != address && $0.value.identity == result }.map(\.key)
        for old in previous { identities[old] = nil }
        if !previous.isEmpty {
            logger.notice("a peer changed address", metadata: ["peer.id": "\(result.lowercased)", "peer.address": "\(address)",
                                                              "peer.previous": "\(previous.sorted().joined(separator: ","))"])
        }
        identities[address] = RememberedAddress(identity: result, seen: epochAtOrigin + now)
        if identities.count > configuration.maxRememberedAddresses {
            let excess = identities.count - configuration.maxRememberedAddresses
            for old in identities.sorted(by: { $0.value.seen < $1.value.seen }).prefix(excess).map(\.key) { identities[old] = nil }
        }
        PeerDirectory.save(identities, to: state, logger: logger)
        shared.identities = identities.mapValues(\.identity.lowercased)
    }

    // MARK: - The tick

    private func tick() async {
        let t = now
        if let retry = retryRegistration, t >= retry.at { await register() }
        if let retry = retryDiscovery, t >= retry.at { await startDiscovery() }
        let interval = shared.clearInterval
        if table.configuration.clearInterval != interval { table.configuration.clearInterval = interval }
        let version = shared.overridesVersion
        if version != overridesVersion {
            overridesVersion = version
            overrides = shared.measuredPowerOverrides
        }
        // Forget failures long past (a crowd of passers-by must not grow these without bound).
        if failed.count > maxQueuedIdentifications {
            failed = failed.filter { t < $0.value.retryAt + banTime }
        }
        let report = table.tick(at: t)
        let zones = report.zones.mapValues(\.rawValue)
        let previous = shared.ranging
        for (id, zone) in zones where previous[id] != zone {
            logger.debug("zone changed", metadata: ["peer.id": "\(id)", "from": "\(previous[id] ?? "none")", "to": "\(zone)"])
        }
        for id in report.removed { logger.debug("peer left the table", metadata: ["peer.id": "\(id)"]) }
        shared.ranging = zones
        try? nodeObject.emit("FoundDevices", interface: NodeAPI.node1, [.stringMap(zones)])

        for id in report.removed {
            if let object = peerObjects.removeValue(forKey: id) { await object.unexport() }
            peerInfo[id] = nil
        }
        // Peers evicted by the cap leave the table without a report.
        for id in peerObjects.keys where table.peers[id] == nil {
            if let object = peerObjects.removeValue(forKey: id) { await object.unexport() }
        }
        if peerInfo.count > table.count { peerInfo = peerInfo.filter { table.peers[$0.key] != nil } }
        for (id, peer) in table.peers {
            guard let info = peerInfo[id] else { continue }
            var values: [String: DBusValue] = [
                "Address": .string(info.address),
                "Name": .string(info.name),
                "RSSI": .int16(info.rssi),
                "SmoothedRSSI": .double(peer.smoothedRSSI),
                "MeasuredPower": .int16(Int16(clamping: Int(peer.measuredPower.rounded()))),
                "Distance": .double(peer.distance),
                "Proximity": .string(peer.proximity.rawValue),
                "LastSeen": .uint64(epochMicroseconds(peer.lastSeen)),
            ]
            if let object = peerObjects[id] {
                object.set(values, interface: NodeAPI.peer1)
                continue
            }
            values["Identifier"] = .string(id)
            values["Kind"] = .string(info.kind)
            values["FirstSeen"] = .uint64(epochMicroseconds(peer.firstSeen))
            if let (major, minor) = info.beacon?.majorMinor {
                values["Major"] = .uint16(major)
                values["Minor"] = .uint16(minor)
            }
            if let (namespace, instance) = info.beacon?.namespaceAndInstance {
                values["Namespace"] = .string(namespace)
                values["Instance"] = .string(instance)
            }
            if let url = info.beacon?.url { values["URL"] = .string(url) }
            do {
                peerObjects[id] = try await connection.export([NodeAPI.peer1Interface(values)], at: NodeAPI.peerPath(id))
            } catch {
                logger.error("cannot export a peer", metadata: ["peer.id": "\(id)", "error": "\(error)"])
            }
        }
        shared.peers = peerObjects.values.map(\.path).sorted { $0.rawValue < $1.rawValue }
    }
}
