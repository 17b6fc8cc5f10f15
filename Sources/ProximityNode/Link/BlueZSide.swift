import BlueZ
import DBusKit
import Foundation
import Logging
import ProximityAPI
import ProximityCore
import ProximityTrust
import Synchronization

/// The node's side of BlueZ: it exports the advertisement and the GATT application, turns what
/// BlueZ reports into the step's ``NodeInput``s, and makes the BlueZ calls the step asks for
/// (power, register, discover, connect to identify), each answering with the inputs to feed back.
actor BlueZSide {
    let connection: DBusConnection
    let mirror: BlueZObjectMirror
    let configuration: NodeConfiguration
    let identity: UUID
    let logger: Logger
    /// The adapter this node uses, and its address once seen: a controller that comes back under
    /// another `hciN` (a USB dongle replugged) is followed by its address, and a keyed node's
    /// member tag is made for it.
    private struct AdapterIdentity: Sendable {
        var path: ObjectPath
        var address: String?
        var present = false
    }
    private let adapterIdentity: Mutex<AdapterIdentity>
    /// The adapter's object path now.
    nonisolated var adapterPath: ObjectPath { adapterIdentity.withLock { $0.path } }
    /// The general service UUID, lowercase.
    nonisolated let serviceUUID: String
    /// The commands that show whether bluetoothd is on the node's bus.
    nonisolated let howToCheck: String
    private var advertisement: Advertisement?
    private var application: GattApplication?
    /// What the GATT characteristics answer: the open protocol, or the trusted one (a reload can
    /// change the key).
    nonisolated let identityService: NodeIdentityService
    /// The fleet key the identifications use (a reload can change it).
    private var trust: TrustSettings
    /// bluetoothd's `main.conf` turns LE privacy on: no member tag (``BluetoothdPrivacy``).
    private let privacy = BluetoothdPrivacy.isOn()
    /// Every `Release` of the advertisement exported now (a reload with another fleet key
    /// exports another), as one stream.
    private let releases = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .unbounded)
    private var releaseRelay: Task<Void, Never>?

    init(connection: DBusConnection, mirror: BlueZObjectMirror, configuration: NodeConfiguration, identity: UUID, logger: Logger) {
        self.connection = connection
        self.mirror = mirror
        self.configuration = configuration
        self.identity = identity
        self.logger = logger
        trust = configuration.trust
        identityService = NodeIdentityService(identity: identity, trust: configuration.trust, logger: logger)
        adapterIdentity = Mutex(AdapterIdentity(path: BlueZService.rootPath.appending(escaped: configuration.adapter)))
        serviceUUID = configuration.serviceUUID.lowercased
        howToCheck = switch configuration.bus {
        case .system: "systemctl status bluetooth, or busctl --system status org.bluez"
        case .session: "busctl --user status org.bluez"
        case .address(let address): "busctl --address=\(address) status org.bluez"
        }
    }

    /// What the node advertises: the general service UUID, its name, its measured power
    /// (``NodePowerFrame``, for peers to range it with) and its identity (when it fits: with a
    /// 128-bit service UUID it does not). In a trusted fleet neither the name nor the identity:
    /// nothing per node that outlives the address.
    ///
    /// A keyed node's power frame carries its member tag for the address it advertises from
    /// (``KeyedMemberTag``), once that address is known: members keep an identification slot for
    /// it when outsiders flood the general UUID.
    /// Under LE privacy (``BluetoothdPrivacy``) no tag: the address is a private one the node is
    /// not told.
    static func advertisementContent(_ configuration: NodeConfiguration, identity: UUID, address: String? = nil,
                                     privacy: Bool = false) -> AdvertisementContent {
        advertisementContent(configuration, trust: configuration.trust, identity: identity, address: address, privacy: privacy)
    }

    static func advertisementContent(_ configuration: NodeConfiguration, trust: TrustSettings, identity: UUID,
                                     address: String?, privacy: Bool) -> AdvertisementContent {
        let trusted = trust.isTrusted
        let tag = privacy ? nil : trust.key.flatMap { key in address.map { KeyedMemberTag(key).tag(for: $0) } }
        return AdvertisementContent(serviceUUID: configuration.serviceUUID.lowercased, localName: trusted ? nil : configuration.name,
                                    manufacturerData: NodePowerFrame.manufacturerData(measuredPower: configuration.measuredPower,
                                                                                      memberTag: tag),
                                    identity: trusted ? nil : identity)
    }

    /// What the node should advertise now.
    private var content: AdvertisementContent {
        Self.advertisementContent(configuration, trust: trust, identity: identity, address: adapterIdentity.withLock { $0.address },
                                  privacy: privacy)
    }

    /// A reload: the new fleet key (or none) for what the characteristics answer and for the
    /// identifications from now on.
    func reconfigure(trust: TrustSettings) async {
        guard trust != self.trust else { return }
        let wasTrusted = self.trust.isTrusted
        self.trust = trust
        identityService.update(trust: trust)
        if trust.isTrusted != wasTrusted || advertisement?.plan != (try? Advertisement.plan(content)) {
            await replaceAdvertisement(trusted: trust.isTrusted, announce: trust.isTrusted != wasTrusted)
        }
    }

    /// A fleet key turned on or off: the advertisement without (or with again) the node's name and
    /// identity, exported at the same path and registered in place of the old one when that one
    /// was registered. Should BlueZ refuse it, the link hears a release and registers again.
    private func replaceAdvertisement(trusted: Bool, announce: Bool = true) async {
        guard let old = advertisement else { return }
        let manager = Adapter(connection: connection, path: adapterPath).advertisingManager
        let wasRegistered = (try? await old.unregister(from: manager)) != nil
        await old.unexport()
        advertisement = nil
        do {
            let new = try await Advertisement.export(on: connection, content: content, callers: BlueZCallers(connection: connection),
                                                     logger: logger)
            advertisement = new
            relayReleases(of: new)
            if wasRegistered { try await new.register(with: manager) }
            if announce {
                logger.notice(trusted ? "the advertisement no longer carries the node's name or identity"
                                      : "the advertisement carries the node's name again",
                              metadata: ["advertisement.name": "\(new.plan.localName ?? "none")"])
            }
        } catch {
            logger.error("cannot advertise the new advertisement: registering again", metadata: ["error": "\(error)"])
            releases.continuation.yield()
        }
    }

    /// Forwards `advertisement`'s releases to ``releases``.
    private func relayReleases(of advertisement: Advertisement) {
        releaseRelay?.cancel()
        let sink = releases.continuation
        releaseRelay = Task { for await _ in advertisement.releases { sink.yield() } }
    }

    /// BlueZ's objects and signals, in order.
    nonisolated var events: AsyncStream<BlueZEvent> { mirror.events }

    /// Exports the advertisement and the GATT application; then `releases` and `hellos` carry
    /// what BlueZ and peers do with them, as inputs.
    func export() async -> (releases: AsyncStream<Void>?, hellos: AsyncStream<NodeInput>?) {
        let callers = BlueZCallers(connection: connection)
        if privacy && trust.key != nil {
            logger.notice("LE privacy is on (\(BluetoothdPrivacy.mainConf)): the advertisement carries no member tag, so members keep no identification slot for this node when outsiders flood the general UUID")
        }
        do {
            advertisement = try await Advertisement.export(on: connection, content: content, callers: callers, logger: logger)
            if advertisement?.plan.carriesManufacturerData == false {
                logger.warning("the advertisement has no room for the measured power: peers will assume their own")
            }
            application = try await GattApplication.export(on: connection, serviceUUID: serviceUUID, service: identityService,
                                                           callers: callers)
        } catch {
            logger.error("cannot export the advertisement or the GATT application", metadata: ["error": "\(error)"])
        }
        let hellos = application.map { application in
            AsyncStream<NodeInput> { continuation in
                let task = Task {
                    for await hello in application.hellos {
                        if let input = Self.input(for: hello, adapter: self.adapterPath) { continuation.yield(input) }
                    }
                    continuation.finish()
                }
                continuation.onTermination = { _ in task.cancel() }
            }
        }
        if let advertisement { relayReleases(of: advertisement) }
        return (advertisement != nil ? releases.stream : nil, hellos)
    }

    /// Unregisters the advertisement and the application.
    func unregister() async {
        let adapter = Adapter(connection: connection, path: adapterPath)
        do {
            if let advertisement { try await advertisement.unregister(from: adapter.advertisingManager) }
            if let application { try await application.unregister(from: adapter.gattManager) }
        } catch {
            logger.warning("cannot unregister from BlueZ", metadata: ["error": "\(error)"])
            return
        }
        logger.info("unregistered the advertisement and the GATT application")
    }

    // MARK: - What BlueZ reports

    /// `event` as the step's input, or nil when it is none of this node's business (several nodes
    /// may share one bluetoothd, each with its own adapter). Runs on the engine, once per sample.
    nonisolated func input(for event: BlueZEvent, at t: Timestamp) -> NodeInput? {
        switch event {
        case .adapterAdded(let info), .adapterChanged(let info, _):
            let (mine, followed) = adapterIdentity.withLock { id -> (Bool, ObjectPath?) in
                if info.path == id.path {
                    if !info.address.isEmpty { id.address = info.address.uppercased() }
                    id.present = true
                    return (true, nil)
                }
                // This node's adapter is gone and this one has its address: the same controller,
                // back under another name.
                guard !id.present, let known = id.address, known == info.address.uppercased() else { return (false, nil) }
                let was = id.path
                id.path = info.path
                id.present = true
                return (true, was)
            }
            guard mine else { return nil }
            if let was = followed {
                logger.notice("the adapter came back under another name: following it by its address",
                              metadata: ["bluez.adapter": "\(info.path.rawValue.split(separator: "/").last ?? "")",
                                         "was": "\(was.rawValue.split(separator: "/").last ?? "")", "bluez.address": "\(info.address)"])
            }
            return .adapterSeen(powered: info.powered, discovering: info.discovering, address: info.address)
        case .adapterRemoved(let path):
            let mine = adapterIdentity.withLock { id -> Bool in
                guard path == id.path else { return false }
                id.present = false
                return true
            }
            return mine ? .adapterRemoved : nil
        case .bluezGone:
            adapterIdentity.withLock { $0.present = false }
            return .bluezGone
        case .bluezRestarted: return .bluezRestarted
        case .deviceAdded(let info):
            guard info.adapter == adapterPath else { return nil }
            return Self.sighting(info, sample: info.rssi != nil, frameChanged: true, at: t)
        case .deviceChanged(let info, let changed):
            guard info.adapter == adapterPath else { return nil }
            return Self.sighting(info, sample: changed.contains("RSSI"),
                                 frameChanged: changed.contains("ManufacturerData") || changed.contains("ServiceData")
                                     || changed.contains("UUIDs"),
                                 at: t)
        case .deviceRemoved: return nil
        }
    }

    static func sighting(_ info: DeviceInfo, sample: Bool, frameChanged: Bool, at t: Timestamp) -> NodeInput {
        let frame = AdvertisedFrame(serviceUUIDs: info.uuids, manufacturerData: info.manufacturerData, serviceData: info.serviceData)
        return .sighting(Observation(address: info.address, rssi: sample ? info.rssi : nil, time: t, frame: frameChanged ? frame : nil,
                                     txPower: info.txPower, name: info.name),
                         frame: frame, alias: info.alias)
    }

    /// A peer that connected to this node wrote its identity to the hello characteristic.
    static func input(for hello: GattHello, adapter: ObjectPath) -> NodeInput? {
        guard hello.device.rawValue.hasPrefix(adapter.rawValue + "/"), let address = DeviceInfo.address(fromPath: hello.device) else {
            return nil
        }
        return .introduced(hello.identity, address: address, verified: hello.verified, key: hello.key)
    }

    // MARK: - Calls the step asks for

    /// One BlueZ call the adapter link asked for; the inputs its result makes.
    func carryOut(_ action: AdapterLink.Action, generation: Int, at t: Timestamp) async -> [NodeInput] {
        let adapter = Adapter(connection: connection, path: adapterPath)
        switch action {
        case .powerOn:
            do { try await adapter.setPowered(true) } catch BlueZCallError.other(name: "org.bluez.Error.Busy", _) {
                // A bluetoothd that just started powers its adapter itself (AutoEnable).
                logger.info("bluetoothd is powering the adapter on itself")
            } catch {
                logger.error("cannot power the adapter on", metadata: ["error": "\(error)"])
            }
            return []
        case .register:
            // The address is known now: a keyed node's member tag goes with it.
            if trust.key != nil, advertisement != nil, advertisement?.plan != (try? Advertisement.plan(content)) {
                await replaceAdvertisement(trusted: trust.isTrusted, announce: false)
            }
            // BlueZ keeps registrations across a power cycle: AlreadyExists means registered.
            var failure: String?
            do {
                if let application {
                    do { try await application.register(with: adapter.gattManager) } catch BlueZCallError.alreadyExists {}
                }
                if let advertisement {
                    do { try await advertisement.register(with: adapter.advertisingManager) } catch BlueZCallError.alreadyExists {}
                }
            } catch {
                failure = "\(error)"
            }
            return [.registrationEnded(failure: failure, generation: generation)]
        case .startDiscovery:
            var failure: String?
            do {
                try await adapter.setDiscoveryFilter(.proximity(serviceUUID: serviceUUID, beacons: configuration.trackBeacons))
                do { try await adapter.startDiscovery() } catch BlueZCallError.inProgress {}
            } catch {
                failure = "\(error)"
            }
            return [.discoveryEnded(failure: failure, generation: generation)]
        case .restartDiscovery:
            // The watchdog: a scanner that went deaf is stopped and started again.
            do {
                do { try await adapter.stopDiscovery() } catch {}
                try await adapter.setDiscoveryFilter(.proximity(serviceUUID: serviceUUID, beacons: configuration.trackBeacons))
                do { try await adapter.startDiscovery() } catch BlueZCallError.inProgress {}
            } catch {
                logger.error("cannot restart discovery", metadata: ["error": "\(error)"])
            }
            return []
        case .powerCycle:
            // The watchdog's second step: the adapter off and on, as a controller reset clears a
            // wedged firmware. The link sees it go off and come back, and sets everything up again.
            do {
                try await adapter.setPowered(false)
                try await adapter.setPowered(true)
            } catch {
                logger.error("cannot power-cycle the adapter", metadata: ["error": "\(error)"])
            }
            return []
        case .health:
            return []
        case .considerKnownDevices:
            // Devices already in the mirror (a restart, the adapter back) are considered again.
            return await mirror.devices(on: adapterPath).map { Self.sighting($0, sample: false, frameChanged: true, at: t) }
        case .publish:
            return []
        }
    }

    /// Connects to a peer to identify it.
    func identify(_ connect: IdentificationScheduler.Connect) async -> NodeInput {
        // BlueZ's path for a device: its address with '_' for ':' under the adapter.
        guard let path = try? ObjectPath(adapterPath.rawValue + "/dev_" + connect.address.replacingOccurrences(of: ":", with: "_")) else {
            return .identificationRejected(address: connect.address)
        }
        let identifier = Identifier(connection: connection, mirror: mirror, serviceUUID: serviceUUID, identity: identity,
                                    trust: trust.key.map(TrustedIdentification.init),
                                    previousTrust: trust.previousKey.flatMap { $0.until > Date() ? TrustedIdentification($0.key) : nil },
                                    logger: logger)
        return .identified(address: connect.address, await identifier.identify(path, address: connect.address, attempt: connect.attempt))
    }
}
