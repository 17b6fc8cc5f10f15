import DBusKit
import Foundation
import LibCrypto

/// An agent's IO capability, as `RegisterAgent` takes it (BlueZ `src/agent.c`, `parse_io_capability`):
/// an empty string is `KeyboardDisplay`.
enum IOCapability: String, Sendable, Hashable, CaseIterable {
    case displayOnly = "DisplayOnly"
    case displayYesNo = "DisplayYesNo"
    case keyboardOnly = "KeyboardOnly"
    case noInputNoOutput = "NoInputNoOutput"
    case keyboardDisplay = "KeyboardDisplay"

    init?(parsing text: String) {
        if text.isEmpty { self = .keyboardDisplay; return }
        self.init(rawValue: text)
    }

    /// What bluetoothd asks this box's agent when a phone (KeyboardDisplay, LE Secure Connections,
    /// the initiator) pairs with the box (the responder): the Core specification's mapping of IO
    /// capabilities to the association model (Vol 3, Part H, 2.3.5.1), and the `Agent1` method
    /// BlueZ calls for that model.
    var responderRequest: PairingRequest {
        switch self {
        case .noInputNoOutput: .authorization  // Just Works: the kernel asks user space to confirm an incoming one
        case .displayOnly: .displayPasskey  // passkey entry, the box shows it, the phone types it
        case .keyboardOnly: .passkey  // passkey entry, the phone shows it, the box types it
        case .displayYesNo, .keyboardDisplay: .confirmation  // numeric comparison
        }
    }
}

/// The `org.bluez.Agent1` method bluetoothd calls for one pairing.
enum PairingRequest: Sendable {
    case authorization, displayPasskey, passkey, confirmation

    var member: MemberName {
        switch self {
        case .authorization: "RequestAuthorization"
        case .displayPasskey: "DisplayPasskey"
        case .passkey: "RequestPasskey"
        case .confirmation: "RequestConfirmation"
        }
    }
}

/// An agent registered with a box's bluetoothd (`struct agent`): one per D-Bus sender.
struct RegisteredAgent: Sendable, Hashable {
    var owner: String
    var path: ObjectPath
    var capability: IOCapability
}

/// A bond: what a box's bluetoothd keeps of a device it paired with.
struct Bond: Sendable, Hashable {
    /// The device's identity address, which it gave in the key distribution.
    var identity: String
    var identityType: String
    var irk: IdentityResolvingKey
    /// The long-term key, least significant byte first, as BlueZ stores it.
    var ltk: [UInt8]
    /// Whether the pairing was protected against a man in the middle (passkey or comparison).
    var authenticated: Bool
}

extension PrivateDeviceSpec {
    /// The device's identity address: the public address a phone gives in the key distribution
    /// of a pairing, made from its name (the same for a name in every scenario).
    public var identityAddress: String {
        var rng = SeededGenerator(seed: 0).derived("identity:\(name)")
        let bits = rng.next()
        let bytes = (0..<6).map { UInt8(truncatingIfNeeded: bits >> (8 * (5 - $0))) }
        return IdentityResolvingKey.addressText(bytes)
    }
}

/// Errors of `PairDevice`, each the reason a phone's screen would give.
extension ControlError {
    static func pairing(_ message: String) -> ControlError { .invalidArguments(message) }
}

extension Air {
    /// How long bluetoothd waits for an agent's answer (`REQUEST_TIMEOUT` in `src/agent.c`).
    static let agentTimeout: Duration = .seconds(60)

    // MARK: AgentManager1

    func registerAgent(_ ctx: BoxContext, sender: String, path: ObjectPath, capability text: String) throws(BlueZError) {
        guard var b = live(ctx) else { throw .notReady }
        guard let capability = IOCapability(parsing: text) else { throw .invalidArguments }
        if b.agents.contains(where: { $0.owner == sender }) { throw .alreadyExists }
        b.agents.append(RegisteredAgent(owner: sender, path: path, capability: capability))
        boxes[ctx.box] = b
    }

    func unregisterAgent(_ ctx: BoxContext, sender: String, path: ObjectPath) throws(BlueZError) {
        guard var b = live(ctx), let i = b.agents.firstIndex(where: { $0.owner == sender && $0.path == path }) else {
            throw BlueZError("DoesNotExist", "No such Agent")
        }
        b.agents.remove(at: i)
        if b.defaultAgent == sender { b.defaultAgent = nil }
        boxes[ctx.box] = b
    }

    func requestDefaultAgent(_ ctx: BoxContext, sender: String, path: ObjectPath) throws(BlueZError) {
        guard var b = live(ctx), b.agents.contains(where: { $0.owner == sender && $0.path == path }) else {
            throw BlueZError("DoesNotExist", "No such Agent")
        }
        b.defaultAgent = sender
        boxes[ctx.box] = b
    }

    /// The agent bluetoothd asks about a pairing a remote device starts (`agent_get(NULL)`): the
    /// default one only; with none the pairing is rejected.
    func currentAgent(_ box: String) -> RegisteredAgent? {
        guard let b = boxes[box], let d = b.defaultAgent else { return nil }
        return b.agents.first { $0.owner == d }
    }

    func agentManagerTemplate(_ ctx: BoxContext) -> InterfaceTemplate {
        InterfaceTemplate(name: BlueZ.agentManagerInterface, methods: [
            DBusMethod("RegisterAgent", inputs: [DBusArgument("agent", .objectPath), DBusArgument("capability", .string)]) { call in
                guard let path = call.arguments[0].objectPath, let cap = call.arguments[1].string else { throw BlueZError.invalidArguments }
                try await ctx.air.registerAgent(ctx, sender: call.sender?.rawValue ?? "", path: path, capability: cap)
                return []
            },
            DBusMethod("UnregisterAgent", inputs: [DBusArgument("agent", .objectPath)]) { call in
                guard let path = call.arguments[0].objectPath else { throw BlueZError.invalidArguments }
                try await ctx.air.unregisterAgent(ctx, sender: call.sender?.rawValue ?? "", path: path)
                return []
            },
            DBusMethod("RequestDefaultAgent", inputs: [DBusArgument("agent", .objectPath)]) { call in
                guard let path = call.arguments[0].objectPath else { throw BlueZError.invalidArguments }
                try await ctx.air.requestDefaultAgent(ctx, sender: call.sender?.rawValue ?? "", path: path)
                return []
            },
        ])
    }

    // MARK: A phone pairs

    /// The private device `name` pairs with `box`, as a user does from a phone's Bluetooth
    /// settings: it finds the box in its list (a connectable advertisement with discoverable
    /// flags and a name), connects, and starts LE Secure Connections pairing as a
    /// KeyboardDisplay initiator. The box's bluetoothd asks its agent (``IOCapability/responderRequest``);
    /// the phone accepts whatever its screen shows. On success the phone distributes its IRK and
    /// identity address: the box's device takes the identity address, becomes `Paired` and
    /// `Bonded`, the bond is written under the storage directory as bluetoothd writes
    /// `/var/lib/bluetooth`, and the phone disconnects.
    ///
    /// Returns the name the phone showed. Throws, with the reason, when the box is not in the
    /// phone's list, is not pairable, has no agent, or its agent refused.
    public func pair(device name: String, with boxName: String) async throws(ControlError) -> String {
        guard let phone = beacons[name], phone.rotation != nil, let spec = privateDeviceSpecs[name] else {
            throw .invalidArguments("no private device named \"\(name)\"")
        }
        guard let b = boxes[boxName] else { throw .unknownBox(boxName) }
        guard let tree = b.tree, b.adapter.powered else { throw .pairing("\(boxName)'s adapter is off: the phone does not list it") }
        let now = clock.now
        let listed = b.advertisements.lazy.filter { $0.spec.type == .peripheral }
            .map { $0.spec.report(adapterAlias: b.alias, adapterDiscoverable: b.adapter.discoverable) }
            .first { $0.isDiscoverable && $0.name != nil }
        guard let shown = listed?.name else {
            throw .pairing("\(boxName) sends no connectable advertisement with discoverable flags and a name: the phone does not list it")
        }
        let distance = phone.trajectory.position(at: now).distance(to: b.trajectory.position(at: now))
        guard radio.meanRSSI(distance: distance) >= radio.parameters.sensitivity else {
            throw .pairing("\(name) is out of \(boxName)'s range")
        }
        var rotating = phone
        rotating.rotate(until: now)
        let address = rotating.address
        // The phone connects: the box sees an incoming link from the phone's current address.
        var dev = b.devices[address] ?? DeviceState(address: address, adapter: b.spec.adapter, now: now)
        let isNew = b.devices[address] == nil
        dev.addressType = "random"
        dev.link = .connected
        dev.temporary = false
        dev.lastSeen = now
        boxes[boxName]?.devices[address] = dev
        publish(box: boxName, dev, isNew: isNew)
        let generation = b.generation
        func dropLink() {
            guard boxes[boxName]?.generation == generation, var d = boxes[boxName]?.devices[address] else { return }
            d.link = .idle
            d.temporary = true
            d.lastSeen = clock.now
            boxes[boxName]?.devices[address] = d
            publish(box: boxName, d)
        }
        try? await clock.sleep(for: radio.parameters.connectionLatency)
        guard let current = boxes[boxName], current.generation == generation, current.tree != nil else {
            throw .pairing("\(boxName)'s bluetoothd went away")
        }
        guard current.adapter.pairable else {
            dropLink()
            throw .pairing("\(boxName) is not pairable: the pairing was refused (Pairing Not Supported)")
        }
        guard let agent = currentAgent(boxName), let destination = try? BusName(agent.owner) else {
            dropLink()
            throw .pairing("\(boxName)'s bluetoothd has no agent to ask: the pairing was refused (Authentication Rejected)")
        }
        var rng = SeededGenerator(seed: seed).derived("pairing:\(name)>\(boxName)")
        let passkey = UInt32(rng.next() % 1_000_000)
        let request = agent.capability.responderRequest
        let devicePath: DBusValue = .objectPath(dev.path)
        do {
            switch request {
            case .authorization:
                _ = try await tree.connection.call(destination: destination, path: agent.path, interface: BlueZ.agentInterface,
                                                   member: request.member, [devicePath], timeout: Self.agentTimeout)
            case .confirmation:
                _ = try await tree.connection.call(destination: destination, path: agent.path, interface: BlueZ.agentInterface,
                                                   member: request.member, [devicePath, .uint32(passkey)],
                                                   timeout: Self.agentTimeout)
            case .displayPasskey:
                // bluetoothd sends it without waiting for a reply (`agent_display_passkey`): the
                // agent cannot refuse; the phone types what the box shows.
                let connection = tree.connection
                Task {
                    _ = try? await connection.call(destination: destination, path: agent.path, interface: BlueZ.agentInterface,
                                                   member: request.member, [devicePath, .uint32(passkey), .uint16(0)],
                                                   timeout: .seconds(5))
                }
            case .passkey:
                let reply = try await tree.connection.call(destination: destination, path: agent.path, interface: BlueZ.agentInterface,
                                                           member: request.member, [devicePath], timeout: Self.agentTimeout)
                guard reply.first?.integer.map({ UInt32($0) }) == passkey else {
                    dropLink()
                    throw ControlError.pairing("the passkey \(boxName)'s agent typed is not the one the phone showed " +
                        "(Authentication Failed)")
                }
            }
        } catch let error as ControlError {
            throw error
        } catch {
            dropLink()
            throw .pairing("\(boxName)'s agent refused the pairing (\(error)): the phone shows that it could not pair")
        }
        guard var paired = boxes[boxName]?.devices[address], boxes[boxName]?.generation == generation else {
            throw .pairing("\(boxName)'s bluetoothd went away")
        }
        // Key distribution: the phone gives its IRK and identity address, bluetoothd stores the
        // keys, the device takes the identity address (its object path stays), then Paired.
        let ltk = (0..<16).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let bond = Bond(identity: spec.identityAddress, identityType: "public", irk: spec.irk, ltk: ltk,
                        authenticated: request != .authorization)
        writeBond(bond, box: boxName, adapterAddress: current.adapter.address, name: name)
        boxes[boxName]?.devices[address] = nil
        if let stale = boxes[boxName]?.devices[bond.identity], stale.path != paired.path {
            removeDevice(box: boxName, address: bond.identity)
        }
        paired.address = bond.identity
        paired.addressType = bond.identityType
        paired.name = name
        paired.paired = true
        boxes[boxName]?.bonds[bond.identity] = bond
        boxes[boxName]?.devices[bond.identity] = paired
        publish(box: boxName, paired)
        // The phone is done and drops the link.
        try? await clock.sleep(for: settings.disconnectLatency)
        if boxes[boxName]?.generation == generation, var d = boxes[boxName]?.devices[bond.identity] {
            d.link = .idle
            boxes[boxName]?.devices[bond.identity] = d
            publish(box: boxName, d)
        }
        return shown
    }

    /// A bonded device's reports come in under its identity address: the kernel resolves a
    /// resolvable private address with the IRKs of its bonds before bluetoothd sees it.
    func resolveBonded(box name: String, address: String, addressType: String) -> (String, String) {
        guard addressType == "random", let b = boxes[name], let bytes = IdentityResolvingKey.addressBytes(address),
              IdentityResolvingKey.isResolvable(bytes) else { return (address, addressType) }
        for bond in b.bonds.values where bond.irk.resolves(bytes) { return (bond.identity, bond.identityType) }
        return (address, addressType)
    }

    // MARK: Storage

    /// `STORAGEDIR/<adapter address>/<identity address>/info` for `box`, as bluetoothd writes it
    /// (`store_device_info`, `store_irk`, `store_longtermkey`): the directories 0700, the file
    /// 0600, keys as 32 hexadecimal digits in the order the key distribution sent them (least
    /// significant byte first). Nothing is written without a storage directory.
    func bondDirectory(box: String, adapterAddress: String, identity: String) -> URL? {
        storage?.appendingPathComponent(box).appendingPathComponent(adapterAddress).appendingPathComponent(identity)
    }

    func writeBond(_ bond: Bond, box: String, adapterAddress: String, name: String) {
        guard let directory = bondDirectory(box: box, adapterAddress: adapterAddress, identity: bond.identity) else { return }
        let fm = FileManager.default
        do {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            for d in [directory.deletingLastPathComponent(), directory.deletingLastPathComponent().deletingLastPathComponent()] {
                try fm.setAttributes([.posixPermissions: 0o700], ofItemAtPath: d.path)
            }
            let text = """
                [General]
                Name=\(name)
                AddressType=\(bond.identityType)
                SupportedTechnologies=LE;
                Trusted=false
                Blocked=false

                [IdentityResolvingKey]
                Key=\(Hex.text(bond.irk.bytes.reversed()).uppercased())

                [LongTermKey]
                Key=\(Hex.text(bond.ltk).uppercased())
                Authenticated=\(bond.authenticated ? 3 : 2)
                EncSize=16
                EDiv=0
                Rand=0

                """
            let file = directory.appendingPathComponent("info")
            _ = fm.createFile(atPath: file.path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        } catch {
            logger.warning("cannot store the bond", metadata: ["box": "\(box)", "error": "\(error)"])
        }
    }

    /// `RemoveDevice` of a bonded device: bluetoothd deletes what it stored of it.
    func forgetBond(box: String, _ dev: DeviceState) {
        guard let bond = boxes[box]?.bonds.removeValue(forKey: dev.address), let b = boxes[box],
              let directory = bondDirectory(box: box, adapterAddress: b.adapter.address, identity: bond.identity) else { return }
        try? FileManager.default.removeItem(at: directory)
    }
}
