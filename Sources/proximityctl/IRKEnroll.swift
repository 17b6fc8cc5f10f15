import ArgumentParser
import BlueZ
import DBusKit
import Foundation
import ProximityAPI
import ProximityCore
import ProximityTrust

extension IRKs {
    /// `proximityctl irks enroll NAME`: a phone pairs with this box once, and the node learns its
    /// identity resolving key from what bluetoothd stored for the bond (docs/security.md,
    /// "Enrolling a phone").
    struct Enroll: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pair a phone with this box once and add the IRK it gives (run as root on the node's box).",
            discussion: """
                For a bounded window the box advertises under a name the phone lists in its \
                Bluetooth settings, and a pairing agent of its own lets exactly one phone pair: \
                the passkey to type on the phone is shown here (or, with --just-works, the phone \
                only asks to confirm). In the pairing the phone gives the box its identity \
                resolving key; bluetoothd stores it (/var/lib/bluetooth, root's), this command \
                reads it, adds it to the node with AddIRK under NAME, removes the bond again \
                (unless --keep-bond) and waits for the node's first sighting of irk:NAME. The key \
                is never shown. --also-on adds it to other nodes over ssh.

                Exit status: 0 when the key was added (and on every --also-on node); 64 for a bad \
                argument; 69 when the node, bluetoothd or an --also-on node cannot be reached or \
                refuses; 75 when no phone paired within the window, or the phone gave no key; 77 \
                when bluetoothd's storage cannot be read (not root).

                Examples (as root):
                  $ proximityctl irks enroll anna-phone
                    Pair Anna's phone within two minutes; type the passkey shown here on it.
                  $ proximityctl irks enroll anna-phone --also-on pi@kitchen --also-on pi@hall
                    The same, and add the key to the kitchen's and the hall's nodes.
                  $ proximityctl irks enroll bob-phone --just-works --window 60
                    Bob's phone only asks to confirm; one minute to do it.
                """)

        @OptionGroup var node: NodeOptions

        @Argument(help: ArgumentHelp("The phone's name: 1 to 64 letters, digits, '-', '_' or '.'; its peer is irk:NAME.",
                                     valueName: "name"))
        var name: String

        @Option(help: ArgumentHelp("Seconds the box stays pairable for one phone: 10 to 600.", valueName: "seconds"))
        var window: Int = 120

        @Option(name: .customLong("shown-as"),
                help: ArgumentHelp("The name the phone lists (default: \"proximityd\" and the node's name), at most 29 bytes shown.",
                                   valueName: "text"))
        var shownAs: String?

        @Flag(name: .customLong("just-works"),
              help: "No passkey: the phone only asks its user to confirm (no protection against a man in the middle during the pairing).")
        var justWorks = false

        @Flag(name: .customLong("keep-bond"), help: "Keep the pairing after reading the key (see the note in docs/security.md).")
        var keepBond = false

        @Option(name: .customLong("also-on"),
                help: ArgumentHelp("Add the key to the node on this box too, over ssh as -H (repeatable).",
                                   valueName: "[user@]host[:port]"))
        var alsoOn: [String] = []

        @Option(name: .customLong("sighting-timeout"),
                help: ArgumentHelp("Seconds to wait for the node's first sighting of irk:NAME (0: do not wait).", valueName: "seconds"))
        var sightingTimeout: Int = 30

        @Option(name: .customLong("bluetooth-storage"), help: ArgumentHelp("bluetoothd's storage directory.", valueName: "dir"))
        var storage: String = BondStore.defaultDirectory

        func validate() throws {
            if let problem = PeerID.irkNameProblem(name) { throw ValidationError(problem) }
            guard (10...600).contains(window) else { throw ValidationError("--window must be 10 to 600 seconds, not \(window)") }
            guard (0...600).contains(sightingTimeout) else { throw ValidationError("--sighting-timeout must be 0 to 600 seconds") }
            if node.host != nil {
                throw ValidationError("enroll pairs with this box's own adapter and reads bluetoothd's storage here: " +
                    "run it on the node's box, and use --also-on to add the key to other nodes")
            }
            if let shownAs, shownAs.isEmpty || LegacyAdvertisingPayload.truncatedLocalName(shownAs) == nil {
                throw ValidationError("--shown-as needs a name to show")
            }
            for host in alsoOn {
                do { _ = try RemoteBus.address(host: host) } catch { throw ValidationError("--also-on: \(error)") }
            }
        }

        func run() async throws {
            let started = ContinuousClock.now
            let (name, window) = (name, window)
            // The node: its adapter, and whether NAME is the config file's.
            let properties = await node.withNode("cannot read the node") { try await $0.properties() }
            if properties.irks[name] == "config" {
                fail("\(name) is an IRK of the node's config file; change it there, or enroll under another name", status: 64)
            }
            let connection: DBusConnection
            do { connection = try await DBusConnection.connect(to: node.address) } catch { fail("cannot reach the bus: \(error)") }
            let session = EnrollmentSession(connection: connection, adapterName: properties.adapter)
            let shown = shownAs ?? "proximityd \(properties.name)"
            let bond: EnrollmentSession.Bonded
            do {
                bond = try await session.pair(shownAs: shown, capability: justWorks ? .noInputNoOutput : .displayOnly,
                                              window: .seconds(window)) { line in printNow(line) }
            } catch let problem as EnrollmentSession.Problem {
                await session.close()
                fail(problem.message, status: problem.status)
            }
            // The key, from what bluetoothd stored; the bond goes unless kept.
            let key: IdentityResolvingKey
            do {
                key = try EnrollmentSession.storedKey(storage: storage, adapter: bond.adapterAddress, device: bond.address)
            } catch let problem as EnrollmentSession.Problem {
                await session.forget(bond, keep: keepBond)
                await session.close()
                fail(problem.message, status: problem.status)
            }
            await session.forget(bond, keep: keepBond)
            await session.close()
            let hex = Hex.text(key.bytes)
            await node.withNode("cannot add the IRK \(name)") { try await $0.addIRK(name, key: hex) }
            let elapsed = (ContinuousClock.now - started).seconds
            printNow("\(name) enrolled after \(String(format: "%.1f", elapsed)) s: the node ranges the phone as \(PeerID.irk(name))")
            if keepBond {
                printNow("""
                    The bond is kept: this box's bluetoothd now resolves the phone's addresses itself and shows it at its \
                    identity address \(bond.address), which this node does not range as \(PeerID.irk(name)); the other nodes do.
                    """)
            }
            var failures = 0
            for host in alsoOn {
                do {
                    let remote = try await NodeProxy.connect(to: try BusAddress(parsing: try RemoteBus.address(host: host)),
                                                             name: node.name)
                    defer { Task { await remote.close() } }
                    try await remote.addIRK(name, key: hex)
                    printNow("\(host): added")
                } catch {
                    failures += 1
                    FileHandle.standardError.write(Data("proximityctl: error: \(host): cannot add the IRK \(name): \(error)\n".utf8))
                }
            }
            if alsoOn.isEmpty {
                printNow("On each other node: proximityctl irks add \(name) (the key from a file that only root reads), " +
                         "or run this again with --also-on HOST.")
            }
            if sightingTimeout > 0 {
                await waitForSighting(of: PeerID.irk(name).rawValue, started: started)
            }
            if failures > 0 { throw ExitCode(69) }
        }

        /// Waits for the node's peer `identifier` to appear, and says when it did.
        private func waitForSighting(of identifier: String, started: ContinuousClock.Instant) async {
            let timeout = Duration.seconds(sightingTimeout)
            let seen: PeerProperties? = await node.withNode("cannot watch the node") { proxy in
                let path = ProximityBus.peerPath(identifier)
                let added = try await proxy.connection.subscribe(MatchRule(
                    sender: proxy.name, path: ProximityBus.rootPath, interface: .objectManager, member: "InterfacesAdded"))
                if let now = try? await proxy.peer(at: path).properties() { return now }
                return await firstResult(until: .now + timeout) {
                    for await message in added where message.body.first?.objectPath == path {
                        return try? await proxy.peer(at: path).properties()
                    }
                    return nil
                }
            }
            let elapsed = String(format: "%.1f", (ContinuousClock.now - started).seconds)
            if let seen {
                printNow("\(identifier) seen \(elapsed) s after the command: \(seen.proximity), " +
                         "\(String(format: "%.1f", seen.distance)) m, \(seen.rssi) dBm")
            } else {
                printNow("\(identifier) not seen within \(sightingTimeout) s: is the phone's Bluetooth on, and the phone in range?")
            }
        }
    }
}

/// One enrollment's work on the bus: the agent, the advertisement and the adapter's pairable
/// state, set up for the window and undone after it.
actor EnrollmentSession {
    struct Problem: Error {
        var message: String
        var status: Int32
    }

    struct Bonded: Sendable {
        var device: ObjectPath
        /// The device's address once bonded: its identity address.
        var address: String
        var adapterAddress: String
    }

    let connection: DBusConnection
    let adapterPath: ObjectPath
    private var agent: PairingAgent?
    private var advertisement: Advertisement?
    private var gatt: PairingGattApplication?
    private var mirrorTask: Task<Void, Never>?
    private var mirror: BlueZObjectMirror?
    /// The devices already paired when the window opened: never touched.
    private var alreadyPaired: Set<ObjectPath> = []

    init(connection: DBusConnection, adapterName: String) {
        self.connection = connection
        self.adapterPath = (try? ObjectPath("/org/bluez/\(adapterName)")) ?? "/org/bluez/hci0"
    }

    /// Sets up the window and waits, within it, for one device to pair and bond. `say` prints
    /// what the user must read (the name to pick, the passkey).
    func pair(shownAs: String, capability: PairingAgent.Capability, window: Duration,
              say: @escaping @Sendable (String) -> Void) async throws -> Bonded {
        let mirror = BlueZObjectMirror(connection: connection)
        self.mirror = mirror
        mirrorTask = Task { try? await mirror.run() }
        // The mirror announces each adapter once it holds bluetoothd's objects.
        let adapterPath = adapterPath
        _ = await firstResult(until: .now + .seconds(10)) { () -> Bool? in
            for await event in mirror.events {
                if case .adapterAdded(let info) = event, info.path == adapterPath { return true }
            }
            return nil
        }
        guard await mirror.isSynchronized else {
            throw Problem(message: "bluetoothd (org.bluez) is not on the bus", status: 69)
        }
        guard let adapter = await mirror.adapter(at: adapterPath) else {
            throw Problem(message: "bluetoothd has no adapter \(adapterPath.rawValue.split(separator: "/").last ?? "")", status: 69)
        }
        guard adapter.powered else { throw Problem(message: "the adapter \(adapterPath) is off", status: 69) }
        let alreadyPaired = Set(await mirror.devices(on: adapterPath).filter(\.paired).map(\.path))
        self.alreadyPaired = alreadyPaired
        let bluez = Adapter(connection: connection, path: adapterPath)
        do {
            let agent = try await PairingAgent.export(on: connection, capability: capability)
            self.agent = agent
            let manager = AgentManager(connection: connection)
            try await manager.register(agent.path, capability: capability)
            try await manager.requestDefault(agent.path)
            if !adapter.pairable {
                // bluetoothd turns it off again by itself when the window is over.
                try await bluez.setPairable(true, timeout: UInt32(window.seconds.rounded(.up)) + 5)
            }
            // What makes a phone list the box and ask to pair (PairingGattApplication).
            let gatt = try await PairingGattApplication.export(on: connection)
            self.gatt = gatt
            try await gatt.register(with: bluez.gattManager)
            let plan = Advertisement.pairablePlan(name: shownAs, serviceUUIDs: [PairingGattApplication.heartRateService])
            let ad = try await Advertisement.export(on: connection, at: BlueZExports.enrollmentAdvertisement, plan: plan)
            self.advertisement = ad
            try await ad.register(with: bluez.advertisingManager)
            say("On the phone, open Settings › Bluetooth and pair with \"\(plan.localName ?? shownAs)\" within \(Int(window.seconds)) s.")
            if capability == .displayOnly { say("The phone will ask for a passkey: it is shown here.") }
        } catch {
            throw Problem(message: "cannot set up the pairing window: \(error)", status: 69)
        }
        guard let agent else { throw Problem(message: "no agent", status: 69) }
        // The first device the agent lets through, then its bond.
        let deadline = ContinuousClock.now + window
        let accepted: ObjectPath? = await firstResult(until: deadline) {
            for await event in agent.events {
                switch event {
                case .passkey(_, let passkey): say("Passkey: \(passkey) (type it on the phone)")
                case .refused(_, let why): say("Refused a pairing: \(why)")
                case .cancelled: say("The phone cancelled the pairing; try again on the phone.")
                case .released: return nil
                case .accepted(let device): return device
                }
            }
            return nil
        }
        guard let device = accepted else {
            throw Problem(message: "no phone paired within \(Int(window.seconds)) s", status: 75)
        }
        let remaining = max(.seconds(5), deadline - ContinuousClock.now)
        let bonded = await mirror.waitForDevice(at: device, timeout: remaining) { $0?.paired == true || $0 == nil }
        guard bonded, let info = await mirror.device(at: device), info.paired, !alreadyPaired.contains(device) else {
            throw Problem(message: "the phone did not complete the pairing (no bond within the window)", status: 75)
        }
        say("Paired with \(info.name ?? info.address).")
        return Bonded(device: device, address: info.address, adapterAddress: adapter.address)
    }

    /// The IRK bluetoothd stored for the bond.
    static func storedKey(storage: String, adapter: String, device: String) throws -> IdentityResolvingKey {
        let path = BondStore.infoPath(storage: storage, adapter: adapter, device: device)
        let text: String
        do { text = try BondStore.readInfo(at: path) } catch {
            throw Problem(message: error.description, status: error.description.contains("permission denied") ? 77 : 75)
        }
        let stored: String?
        do { stored = try BondStore.storedIdentityResolvingKey(info: text) } catch {
            throw Problem(message: "\(path): \(error.description)", status: 75)
        }
        // Stored least significant byte first; a key is written most significant first.
        guard let bytes = stored.flatMap(Hex.bytes).map({ Array($0.reversed()) }) else {
            throw Problem(message: "the phone gave no identity resolving key (\(path) has none): it does not use private addresses, " +
                          "or it did not bond", status: 75)
        }
        do { return try IdentityResolvingKey(bytes: bytes) } catch { throw Problem(message: "\(path): \(error)", status: 75) }
    }

    /// Removes the bond (`RemoveDevice`: bluetoothd deletes its keys too) unless it is kept, and
    /// any other bond made in the window (with a passkey the agent cannot refuse a second device
    /// that knows it; its key is not used).
    func forget(_ bond: Bonded, keep: Bool) async {
        let adapter = Adapter(connection: connection, path: adapterPath)
        var remove = keep ? [] : [(bond.device, bond.address)]
        if let mirror {
            for other in await mirror.devices(on: adapterPath)
                where other.paired && other.path != bond.device && !alreadyPaired.contains(other.path) {
                FileHandle.standardError.write(Data("proximityctl: warning: another device (\(other.name ?? other.address)) paired in the window; its bond is removed and its key not used\n".utf8))
                remove.append((other.path, other.address))
            }
        }
        for (device, address) in remove {
            do { try await adapter.removeDevice(device) } catch {
                FileHandle.standardError.write(Data("proximityctl: warning: cannot remove the bond of \(address) (\(error)); remove it with bluetoothctl remove \(address)\n".utf8))
            }
        }
    }

    /// Undoes the window: the advertisement and the agent go (bluetoothd would drop both when
    /// this process ends anyway).
    func close() async {
        let bluez = Adapter(connection: connection, path: adapterPath)
        if let advertisement {
            try? await advertisement.unregister(from: bluez.advertisingManager)
            await advertisement.unexport()
        }
        if let gatt {
            try? await gatt.unregister(from: bluez.gattManager)
            await gatt.unexport()
        }
        if let agent {
            try? await AgentManager(connection: connection).unregister(agent.path)
            await agent.unexport()
        }
        advertisement = nil
        gatt = nil
        agent = nil
        mirrorTask?.cancel()
        await connection.close()
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// Prints a line and flushes it: the user (or a script) reads the name and the passkey while the
/// command still waits.
func printNow(_ line: String) {
    print(line)
    fflush(nil)
}

/// What `body` returns, or nil once `deadline` passes first (`body` is then cancelled).
func firstResult<T: Sendable>(until deadline: ContinuousClock.Instant, _ body: @escaping @Sendable () async -> T?) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(until: deadline)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
