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
    private var identities: [String: UUID]
    /// Addresses queued or being identified; those whose identification failed, with when (tried
    /// again after ``retryAfter``); those never to identify (this node's own identity).
    private var identifying: Set<String> = []
    private var failed: [String: Timestamp] = [:]
    private var ignored: Set<String> = []
    let retryAfter: Double = 60
    let maxQueuedIdentifications = 256
    private var queue: AsyncStream<(ObjectPath, String)>.Continuation?
    private var advertisement: Advertisement?
    private var application: GattApplication?
    private var registered = false
    private var setUp = false
    private var powering = false
    private var peerObjects: [String: DBusObject] = [:]
    private var peerAddress: [String: String] = [:]
    private var peerName: [String: String] = [:]
    private var lastSample: [String: Int16] = [:]

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
        self.table = FoundDevicesTable(configuration: ranging)
        self.identities = PeerDirectory.load(from: state, logger: logger)
        self.origin = ContinuousClock.now
        self.epochAtOrigin = Date().timeIntervalSince1970
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
        let (requests, queue) = AsyncStream.makeStream(of: (ObjectPath, String).self, bufferingPolicy: .unbounded)
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
                while !Task.isCancelled {
                    do { try await Task.sleep(for: .seconds(1)) } catch { return }
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
                    for await (path, address) in requests {
                        let result = await identifier.identify(path, address: address)
                        await self.identified(address, result)
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
        case .deviceAdded(let info):
            device(info, sample: info.rssi != nil)
        case .deviceChanged(let info, let changed):
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
        powering = false
        nodeObject.set(["Advertising": .boolean(false), "Discovering": .boolean(false)], interface: NodeAPI.node1)
    }

    private func adapterSeen(_ info: AdapterInfo) async {
        if setUp {
            if !info.discovering {
                nodeObject.set("Discovering", .boolean(false), interface: NodeAPI.node1)
            } else {
                nodeObject.set("Discovering", .boolean(true), interface: NodeAPI.node1)
            }
            if !info.powered { lost("the adapter was powered off") }
            return
        }
        let adapter = Adapter(connection: connection, path: adapterPath)
        guard info.powered else {
            if configuration.powerOn && !powering {
                powering = true
                logger.info("powering the adapter on", metadata: ["bluez.adapter": "\(configuration.adapter)"])
                do { try await adapter.setPowered(true) } catch {
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
        // BlueZ keeps registrations across a power cycle: AlreadyExists means registered.
        do {
            if let application {
                do { try await application.register(with: adapter.gattManager) } catch BlueZCallError.alreadyExists {}
            }
            if let advertisement {
                do { try await advertisement.register(with: adapter.advertisingManager) } catch BlueZCallError.alreadyExists {}
            }
            registered = true
            nodeObject.set("Advertising", .boolean(true), interface: NodeAPI.node1)
        } catch {
            logger.error("cannot register the advertisement or the GATT application", metadata: ["error": "\(error)"])
        }
        do {
            try await adapter.setDiscoveryFilter(.proximity(serviceUUID: serviceUUID))
            try await adapter.startDiscovery()
            nodeObject.set("Discovering", .boolean(true), interface: NodeAPI.node1)
        } catch {
            logger.error("cannot start discovery", metadata: ["error": "\(error)"])
        }
        // Devices already in the mirror (a restart) are considered again.
        for device in await mirror.devices(on: adapterPath) { self.device(device, sample: false) }
    }

    private func released() {
        logger.notice("BlueZ released the advertisement")
        nodeObject.set("Advertising", .boolean(false), interface: NodeAPI.node1)
    }

    private func device(_ info: DeviceInfo, sample: Bool) {
        let address = info.address
        if let name = info.name ?? info.alias, let id = identities[address]?.lowercased { peerName[id] = name }
        if let id = identities[address] {
            guard sample, let rssi = info.rssi else { return }
            let key = id.lowercased
            peerAddress[key] = address
            lastSample[key] = rssi
            _ = table.observe(key, rssi: Double(rssi), at: now)
            return
        }
        guard info.advertises(serviceUUID), !identifying.contains(address), !ignored.contains(address) else { return }
        // A flood of advertisers must not grow the queue without bound: beyond the cap a device
        // waits for a later sample, after the queue drained.
        guard identifying.count < maxQueuedIdentifications else { return }
        if let when = failed[address] {
            guard now - when >= retryAfter else { return }
            failed[address] = nil
        }
        identifying.insert(address)
        logger.debug("identifying a new peer", metadata: ["peer.address": "\(address)"])
        queue?.yield((info.path, address))
    }

    private func identified(_ address: String, _ result: UUID?) {
        identifying.remove(address)
        guard let result else {
            failed[address] = now
            return
        }
        guard result != identity else {
            ignored.insert(address)
            return
        }
        identities[address] = result
        PeerDirectory.save(identities, to: state, logger: logger)
    }

    // MARK: - The tick

    private func tick() async {
        let t = now
        let interval = shared.clearInterval
        if table.configuration.clearInterval != interval { table.configuration.clearInterval = interval }
        let report = table.tick(at: t)
        let zones = report.zones.mapValues(\.rawValue)
        shared.ranging = zones
        try? nodeObject.emit("FoundDevices", interface: NodeAPI.node1, [.stringMap(zones)])

        for id in report.removed {
            if let object = peerObjects.removeValue(forKey: id) { await object.unexport() }
            peerAddress[id] = nil
            peerName[id] = nil
            lastSample[id] = nil
        }
        for (id, peer) in table.peers {
            let values: [String: DBusValue] = [
                "Identifier": .string(id),
                "Kind": .string("node"),
                "Address": .string(peerAddress[id] ?? ""),
                "Name": .string(peerName[id] ?? ""),
                "RSSI": .int16(lastSample[id] ?? Int16(clamping: Int(peer.rssi.rounded()))),
                "SmoothedRSSI": .double(peer.smoothedRSSI),
                "Distance": .double(peer.distance),
                "Proximity": .string(peer.proximity.rawValue),
                "FirstSeen": .uint64(epochMicroseconds(peer.firstSeen)),
                "LastSeen": .uint64(epochMicroseconds(peer.lastSeen)),
            ]
            if let object = peerObjects[id] {
                var changing = values
                changing["Identifier"] = nil
                changing["Kind"] = nil
                changing["FirstSeen"] = nil
                object.set(changing, interface: NodeAPI.peer1)
            } else {
                do {
                    peerObjects[id] = try await connection.export([NodeAPI.peer1Interface(values)], at: NodeAPI.peerPath(id))
                } catch {
                    logger.error("cannot export a peer", metadata: ["peer.id": "\(id)", "error": "\(error)"])
                }
            }
        }
        shared.peers = peerObjects.values.map(\.path).sorted { $0.rawValue < $1.rawValue }
    }
}
