import Foundation
import Logging
import ProximityAPIValues
import ProximityCore
import ProximityTrust

/// The node's middle as one value: every stage's state, from what BlueZ reports to the rules'
/// actions. It does no I/O and reads no clock: each input (``input(_:at:)``, ``report(at:)``,
/// ``command(_:at:)``, ``reconfigure(_:at:)``) takes the time and returns the effects to carry
/// out, in order (save this file, publish this event, log this line, ask this strategy client,
/// make this BlueZ call). ``NodeEngine`` runs them and feeds the results back.
///
/// ```
///   BlueZ ──▶ observation ─▶ identity ─┬▶ identification (GATT)
///                                      └▶ found-devices table ─▶ report ─▶ regions ─▶ alerts ─▶ tracking
///                                                                            └────────┴──────────┴─▶ event log, rules
/// ```
public struct NodeStep: Sendable {
    let configuration: NodeConfiguration
    let identity: UUID
    /// The general service UUID, lowercase.
    let serviceUUID: String

    var link: AdapterLink
    var resolver: IdentityResolver
    var scheduler: IdentificationScheduler
    /// With a fleet key, how members' advertisements are told from others' (``MemberTagging``).
    var memberTag: (any MemberTagging)?
    var table: FoundDevicesTable
    var settings: NodeSettings
    /// The config file's display names; those given over the bus are ``settings``' `names`.
    var configuredNames: [PeerID: String]
    /// dB added to every RSSI sample before ranging (`--rssi-offset`; a reload changes it).
    var rssiOffset: Double
    /// The fleet key and accept-unverified in force (reloaded).
    var trust: TrustSettings
    var regions: RegionStage
    var alerts: AlertStage
    var profile: ProfileStage
    var recording = RecordingState()
    /// The clients watched until they leave the bus (strategies, recordings), by unique name.
    var watchedClients: Set<String> = []
    /// Addresses whose identity another address took over lately (``learn(_:at:introduced:verified:time:)``),
    /// to tell a device claiming back its identity (two devices, one identity) from an address change.
    var superseded: [String: (identity: UUID, at: Timestamp)] = [:]
    /// How long a superseded address claiming its identity back counts as a conflict, seconds.
    static let conflictWindow: Double = 60
    /// With a fleet key: how old a verified peer's proof may grow before the node asks for a new
    /// one (a link of its own, or the peer's hello), seconds …
    static let proofInterval: Double = 300
    /// … and how old before the peer counts as unverified again (its proofs all failed).
    static let proofLifetime: Double = 900
    /// A verified binding heard this lately, seconds, is not displaced by a verified claim of its
    /// identity from another address (a relay): a member's advertisements come a second apart at
    /// most, and one whose address rotated is not heard at the old one any more.
    static let conflictHeardWithin: Double = 5
    /// After such a claim: how long before the claiming address is identified again, by a link
    /// this node starts (no yield). Not a ban: once the old address is quiet (a rotation), the
    /// claim is taken.
    static let conflictHoldOff: Double = conflictHeardWithin + 1
    /// With a fleet key, a verified binding not heard this long, seconds, is forgotten: a member
    /// heard again proves itself again (one link), and a binding a relay left behind goes.
    static let verifiedUnheard: Double = 60
    /// The frame of an address not heard this long, seconds, is forgotten
    /// (``IdentityResolver/forgetFrames(notHeardFor:at:)``): four times BlueZ's 30 s, swept every
    /// quarter of it, so that 1,000 new addresses a minute hold about 2,000 to 2,500 frames, not
    /// the cap.
    static let frameLifetime: Double = 120
    /// When the frames were last swept.
    var lastFrameSweep: Timestamp = -.infinity
    /// Connections under way when the fleet key changed: what they read was proved with the old
    /// key (or none), so their results count as failures (the address is tried again).
    var connectionsOfOldKey: Set<String> = []
    /// Identities learnt since the last write of `peers.json` that were not a member's: written
    /// at the next report (``report(at:)``), at most once a second.
    var peersUnsaved = false
    /// Numbers every region, alert and profile change the step publishes (one series), so a
    /// command's caller waits until the bus shows its change.
    var sequence: UInt64 = 0
    /// When the step last took in an advertising report with an RSSI (any device's), in the
    /// node's time; nil before the first since the adapter was last set up (the watchdog's
    /// ``ReceptionWatch`` keeps it).
    public var lastSample: Timestamp? { link.watch.lastHeard }

    /// What the node keeps across restarts, as loaded from the state directory.
    public struct Saved: Sendable {
        public var settings = NodeSettings()
        public var peers: [String: IdentityResolver.Remembered] = [:]
        public var regions = SavedRegions()
        public var alerts = SavedAlerts()
        public var profile = SavedProfile()

        public init() {}
    }

    /// The step at start, and what starting it did (the states it determined, its log lines).
    public init(configuration: NodeConfiguration, identity: UUID, saved: Saved, at time: NodeTime) {
        self.configuration = configuration
        self.identity = identity
        serviceUUID = configuration.serviceUUID.lowercased
        settings = saved.settings
        configuredNames = configuration.names
        rssiOffset = configuration.rssiOffset
        trust = configuration.trust
        link = AdapterLink(powerOn: configuration.powerOn)
        resolver = IdentityResolver(
            configuration: .init(serviceUUID: serviceUUID, ownIdentity: identity, rangeBeacons: configuration.trackBeacons,
                                 maxRememberedAddresses: configuration.maxRememberedAddresses),
            // Each peer proves its identity again after a restart: `verified` is never taken from disk.
            nodes: saved.peers.mapValues { var peer = $0; peer.verified = false; return peer })
        scheduler = IdentificationScheduler(configuration: configuration.identification)
        table = FoundDevicesTable(configuration: Self.rangingConfiguration(
            configuration, clearInterval: Self.clearInterval(configuration, saved.settings)))
        table.collectsSeconds = configuration.mqtt?.hearings == true
        regions = RegionStage(configuration, saved.regions, at: time.now)
        alerts = AlertStage(configuration, saved.alerts, at: time.now)
        profile = ProfileStage(configuration, saved.profile, at: time.now)
        applyIRKs()
        applyOrdering()
    }

    /// Who connects when two nodes find each other: the fleet key's coin with a key, a public coin
    /// without (never a comparison of the adapter's address an outsider could probe). With a key,
    /// one identification slot is kept for members, told by their advertisements' member tags.
    mutating func applyOrdering() {
        scheduler.ordering = trust.key.map { KeyedConnectionOrdering($0) as any ConnectionOrdering } ?? PairHashOrdering()
        memberTag = trust.key.map { KeyedMemberTag($0) as any MemberTagging }
        scheduler.configuration.reservedForMembers = trust.key == nil ? 0 : 1
    }

    /// The table's ranging model, for the node's configuration.
    static func rangingConfiguration(_ configuration: NodeConfiguration, clearInterval: Double) -> RangingConfiguration {
        var ranging = RangingConfiguration()
        ranging.clearInterval = clearInterval
        ranging.maxPeers = configuration.maxPeers
        ranging.distanceModel = LogDistanceModel(exponent: configuration.pathLossExponent)
        ranging.defaultMeasuredPower = Double(configuration.measuredPower)
        ranging.thresholds = configuration.zones
        return ranging
    }

    /// The clear interval to start with: the command line's, else the one set over D-Bus, else
    /// the default.
    public static func clearInterval(_ configuration: NodeConfiguration, _ settings: NodeSettings) -> Double {
        configuration.clearInterval ?? settings.clearInterval ?? RangingConfiguration().clearInterval
    }

    /// What starting did that the node logs and publishes once it runs: the restored states and
    /// the definitions that were not restored.
    public mutating func started(at time: NodeTime) -> [NodeEffect] {
        var effects = (regions.startLines + alerts.startLines + profile.startLines).map(NodeEffect.log)
        effects += forgetUnverifiedPeers()
        let initial = regions.initialEvents
        regions.initialEvents = []
        guard !initial.isEmpty else { return effects }
        effects += publishRegions(RegionChanges(sequence: 0, events: initial), at: time)
        for case .determined(let id, let state) in initial where state != .unknown {
            effects.append(.log(LogLine(.info, "region state restored", ["region": "\(id)", "state": "\(state.rawValue)"])))
        }
        return effects
    }

    /// The next number of the change series.
    mutating func nextSequence() -> UInt64 {
        sequence += 1
        return sequence
    }

    // MARK: - Saving

    /// The file of `kind` as the step holds it now.
    public func snapshot(_ kind: StateFileKind) -> StateFile {
        switch kind {
        case .settings: .settings(settings)
        case .regions: .regions(regions.monitor.regions)
        case .alerts: .alerts(bus: alerts.busAlerts, engine: alerts.engine.saved)
        case .profile: .profile(profile.snapshot)
        case .peers: .peers(resolver.nodes)
        }
    }

    /// Notes that `file` was (about to be) written at `t`.
    mutating func wrote(_ file: StateFile, at t: Timestamp) {
        switch file {
        case .settings, .peers: break
        case .regions(let statuses): regions.persisted.wrote(statuses, at: t); regions.seenSinceSave = false
        case .alerts(let bus, let engine): alerts.persisted.wrote(.init(bus: bus, engine: engine), at: t)
        case .profile(let saved): profile.persisted.wrote(saved, at: t)
        }
    }

    /// What the node writes as it stops: the regions and the alerts (when it has some, or had),
    /// the profile when it changed since the last save, the identified peers when some were
    /// learnt since the last write.
    public func filesOnStop(exists: (StateFileKind) -> Bool) -> [StateFile] {
        var files: [StateFile] = []
        if regions.monitor.count > 0 || exists(.regions) { files.append(snapshot(.regions)) }
        if !alerts.engine.alerts.isEmpty || exists(.alerts) { files.append(snapshot(.alerts)) }
        if profile.persisted.differs(profile.snapshot) { files.append(snapshot(.profile)) }
        // Identities learnt in the last second, not written yet: a restart does not connect again.
        if peersUnsaved { files.append(snapshot(.peers)) }
        return files
    }

    /// A write the step asked for failed: the next step writes it again.
    public mutating func saveFailed(_ kind: StateFileKind) {
        switch kind {
        case .settings, .peers: break
        case .regions: regions.persisted.lost()
        case .alerts: alerts.persisted.lost()
        case .profile: profile.persisted.lost()
        }
    }

    /// `.save(file)`, noted as written (``saveFailed(_:)`` undoes that).
    mutating func save(_ file: StateFile, at t: Timestamp) -> NodeEffect {
        wrote(file, at: t)
        return .save(file)
    }

    // MARK: - BlueZ

    /// Address → identity of the peer nodes identified (`Node1.GetIdentities`).
    public var identities: [String: String] { resolver.identities }
    public var isRegistered: Bool { link.isRegistered }

    public mutating func input(_ input: NodeInput, at time: NodeTime) -> [NodeEffect] {
        let t = time.now
        switch input {
        case .adapterSeen(let powered, let discovering, let address):
            return linked(link.adapterSeen(powered: powered, discovering: discovering, address: address, at: t))
        case .adapterRemoved: return linked(link.adapterRemoved())
        case .bluezGone: return linked(link.bluezGone())
        case .bluezRestarted: return [.log(LogLine(.notice, "bluetoothd restarted"))]
        case .released: return linked(link.released(at: t))
        case .registrationEnded(let failure, let generation):
            return linked(link.registrationEnded(succeeded: failure == nil, generation: generation, at: t), error: failure)
        case .discoveryEnded(let failure, let generation):
            return linked(link.discoveryEnded(succeeded: failure == nil, generation: generation, at: t), error: failure)
        case .sighting(let observation, let frame, let alias):
            guard observation.rssi != nil else { return observe(observation, frame: frame, alias: alias, at: time) }
            let watched = link.heard(at: t)
            let observed = observe(observation, frame: frame, alias: alias, at: time)
            return watched.0.isEmpty && watched.1.isEmpty ? observed : linked(watched) + observed
        case .identified(let address, let result):
            return identified(address, result, at: time)
        case .introduced(let uuid, let address, let verified, let key):
            // Opened with a key this node no longer holds (a hello the responder took just before a
            // reload replaced the key): not taken; the peer is identified under the new key.
            if verified, let key, key != trust.key?.fingerprint, key != trust.previousKey?.key.fingerprint {
                return [.log(LogLine(.info, "a hello proved with a key this node no longer holds: not taken",
                                     ["peer.address": "\(address)"]))]
            }
            if let refusal = refusal(uuid, at: address, verified: verified) {
                // An open hello is not taken, but it bans nothing: anyone can write one from any
                // address (a member's fresh one too). This node connects itself, at once, and
                // what its own link reads decides.
                return [.log(refusal)] + identify(scheduler.prove(address, at: t))
            }
            return learn(uuid, at: address, introduced: true, verified: verified, time: time).effects
        case .identificationRejected(let address):
            _ = scheduler.finished(address, .rejected, at: t)
            return []
        }
    }

    /// The link's notes as log lines, its actions as BlueZ calls (or the `Advertising` and
    /// `Discovering` it shows).
    private mutating func linked(_ step: ([AdapterLink.Action], [AdapterLink.Note]), error: String? = nil) -> [NodeEffect] {
        var effects: [NodeEffect] = []
        for note in step.1 {
            if case .ready(let address) = note { scheduler.ownAddress = address }
            if let line = Self.line(note, adapter: configuration.adapter, error: error) { effects.append(.log(line)) }
        }
        for action in step.0 {
            switch action {
            case .publish(let advertising, let discovering):
                effects.append(.publish(.link(advertising: advertising, discovering: discovering)))
            case .health(let health):
                effects.append(.publish(.health(state: health.state, detail: health.detail)))
            default:
                effects.append(.bluez(action, generation: link.generation))
            }
        }
        return effects
    }

    /// `error`: what the BlueZ call behind a failure note answered.
    static func line(_ note: AdapterLink.Note, adapter name: String, error: String?) -> LogLine? {
        let failure: Logger.Metadata = error.map { ["error": "\($0)"] } ?? [:]
        let adapter: Logger.Metadata = ["bluez.adapter": "\(name)"]
        switch note {
        case .poweringOn: return LogLine(.info, "powering the adapter on", adapter)
        case .adapterOff: return LogLine(.warning, "the adapter is off (use --power-on, or power it on with bluetoothctl)", adapter)
        case .ready(let address): return LogLine(.info, "adapter ready", ["bluez.adapter": "\(name)", "bluez.address": "\(address)"])
        case .lost(let why, let waitingFor): return LogLine(.warning, "\(why): waiting for \(waitingFor)", adapter)
        case .registered(let afterFailure):
            return afterFailure ? LogLine(.notice, "registered the advertisement and the GATT application") : nil
        case .registrationFailed(let delay):
            return LogLine(.error,
                           "cannot register the advertisement or the GATT application; trying again in \(Int(delay.rounded())) s", failure)
        case .discoveryFailed(let delay):
            return LogLine(.error, "cannot start discovery; trying again in \(Int(delay.rounded())) s", failure)
        case .discoveryStoppedByOthers: return LogLine(.notice, "discovery was stopped by another client: starting it again")
        case .released: return LogLine(.notice, "BlueZ released the advertisement")
        case .deaf(let silence, let rate):
            return LogLine(.warning, "discovery delivers nothing (deaf scanner?): restarting discovery",
                           ["silence": "\(Int(silence)) s", "before": "\(AdapterLink.rate(rate)) advertisements/s"])
        case .stillDeafPowerCycling: return LogLine(.warning, "discovery still delivers nothing: powering the adapter off and on", adapter)
        case .recoveryFailed(let delay):
            return LogLine(.error, "the adapter delivers nothing after restarting discovery and a power cycle; " +
                           "trying again in \(Int(delay)) s", adapter)
        case .recovered(let why): return LogLine(.notice, "the radio delivers again", ["after": "\(why)"])
        }
    }

    // MARK: - Observation → identity → ranging or identification

    private mutating func observe(_ observation: Observation, frame: AdvertisedFrame, alias: String?, at time: NodeTime) -> [NodeEffect] {
        var observation = observation
        var resolution = resolver.resolve(observation)
        if resolution == .needsFrame {
            observation.frame = frame
            resolution = resolver.resolve(observation)
        }
        switch resolution {
        case .range(let id, let kind, let beacon):
            guard let rssi = observation.rssi else { return [] }
            let t = observation.time
            // An override, else what the beacon's frame or the peer node's advertisement says, else ours.
            let power = settings.measuredPower[id.rawValue].map(Double.init) ?? beacon?.measuredPower
                ?? Self.advertisedPower(frame, kind, serviceUUID: serviceUUID) ?? table.configuration.defaultMeasuredPower
            let name = kind == .node ? observation.name ?? alias : observation.name
            // A full table may have no place for it (it keeps the nearest). The receiver's offset first.
            table.observe(id, rssi: Double(rssi) + rssiOffset, at: t, measuredPower: power,
                          details: PeerDetails(kind: kind, address: observation.address, name: name, beacon: beacon))
            if recording.wants(id) { recordSample(id, at: t, time: time) }
            return []
        case .identify:
            // A member's advertisement carries the fleet's member tag for its address: it takes the
            // identification slot kept for members (a flood of outsiders does not hold it back).
            guard scheduler.wouldTrack(observation.address, at: time.now) else { return [] }
            let member = memberTag?.isMember(observation.address, tag: NodePowerFrame.memberTag(in: frame.manufacturerData)) ?? false
            return identify(scheduler.heard(observation.address, at: time.now, member: member))
        case .ignore, .needsFrame:
            return []
        }
    }

    /// The measured power a peer node advertises (``NodePowerFrame``), read only from a node that
    /// advertises the general service (`serviceUUID`, lowercase); nil for anything else, and for a
    /// node that advertises none (the node's own `--measured-power` applies then).
    static func advertisedPower(_ frame: AdvertisedFrame, _ kind: PeerKind, serviceUUID: String) -> Double? {
        guard kind == .node, !frame.manufacturerData.isEmpty, frame.serviceUUIDs.contains(serviceUUID) else { return nil }
        return NodePowerFrame.measuredPower(in: frame.manufacturerData).map(Double.init)
    }

    private func identify(_ connections: [IdentificationScheduler.Connect]) -> [NodeEffect] {
        connections.flatMap { connect -> [NodeEffect] in
            let effect = NodeEffect.identify(connect)
            guard connect.afterYield else { return [effect] }
            return [.log(LogLine(.info, "the peer did not introduce itself: connecting to it",
                                 ["peer.address": "\(connect.address)"])), effect]
        }
    }

    private mutating func identified(_ address: String, _ result: IdentificationResult, at time: NodeTime) -> [NodeEffect] {
        var effects: [NodeEffect] = []
        let outcome: IdentificationScheduler.Outcome
        var conflicted = false
        var result = result
        if connectionsOfOldKey.remove(address) != nil, case .identified = result {
            effects.append(.log(LogLine(.info, "a link begun before the fleet key changed: identifying the peer again",
                                        ["peer.address": "\(address)"])))
            result = .failed
        }
        switch result {
        case .identified(let uuid, let verified):
            if let refusal = refusal(uuid, at: address, verified: verified) {
                // Left alone a while: asking again would read the same claim.
                effects = [.log(refusal)]
                outcome = .rejected
            } else {
                let learnt = learn(uuid, at: address, introduced: false, verified: verified, time: time)
                effects = learnt.effects
                conflicted = learnt.conflicted
                outcome = .identified
            }
        case .rejected: outcome = .rejected
        case .failed: outcome = .failed
        }
        let (verdict, next) = scheduler.finished(address, outcome, at: time.now)
        // A claim that conflicted (the identity's verified binding elsewhere is still heard): tried
        // again later, by a link of this node's.
        if conflicted {
            scheduler.holdOff(address, for: Self.conflictHoldOff, at: time.now)
        }
        return effects + leftAlone(address, verdict, rejected: outcome == .rejected) + identify(next)
    }

    /// The log line of a scheduler's verdict that leaves `address` alone, if it is one.
    private func leftAlone(_ address: String, _ verdict: IdentificationScheduler.Verdict, rejected: Bool) -> [NodeEffect] {
        guard case .leftAlone(let seconds, let attempts) = verdict else { return [] }
        let why = rejected ? "leaving a peer alone" : "identification failed \(attempts) times: leaving the peer alone"
        return [.log(LogLine(.warning, why, ["peer.address": "\(address)", "for": "\(Int(seconds)) s"]))]
    }

    /// Why a node with the fleet's key does not take an identity `address` gave without proving it
    /// (read the open way, or said in an open hello), as a log line; nil when it takes it.
    private func refusal(_ uuid: UUID, at address: String, verified: Bool) -> LogLine? {
        guard !verified, trust.isTrusted else { return nil }
        let peer: Logger.Metadata = ["peer.address": "\(address)", "peer.id": "\(uuid.lowercased)"]
        // accept-unverified: false: an open peer is not one of ours.
        if !trust.acceptUnverified {
            return LogLine(.info, "ignoring a peer identified without the fleet's key (accept-unverified: false)", peer)
        }
        // An identity proved with the fleet's key is not taken over by one that only says it (a
        // cloner of a member's identity).
        if resolver.isVerified(uuid), resolver.identity(at: address) != uuid {
            return LogLine(.warning, "a peer says it is a node of this fleet without proving it: left unidentified", peer)
        }
        return nil
    }

    /// An identity learnt at `address`: saved (`peers.json`) before it is published. Unverified
    /// ones have passed ``refusal(_:at:verified:)``.
    /// What learning an identity at an address did; `conflicted`: nothing moved, the identity's
    /// verified binding elsewhere being still heard.
    private mutating func learn(_ uuid: UUID, at address: String, introduced: Bool, verified: Bool = false,
                                time: NodeTime) -> (effects: [NodeEffect], conflicted: Bool) {
        let t = time.now
        let heldVerified = Set(resolver.nodes.filter { $0.key != address && $0.value.identity == uuid && $0.value.verified }.map(\.key))
        let learnt = resolver.learn(uuid, at: address, verified: verified, time: t, heardWithin: Self.conflictHeardWithin)
        if !learnt.conflict.isEmpty {
            // A verified claim at a new address while the verified binding is still heard: a relay
            // (or a copied key and identity). Nothing changes; this node proves both addresses
            // again with links it starts itself: a relay that stopped cannot answer.
            var effects: [NodeEffect] = [.log(LogLine(.warning, Self.conflictMessage, [
                "peer.id": "\(uuid.lowercased)", "peer.address": "\(address)", "peer.other": "\(learnt.conflict.joined(separator: ","))"]))]
            for other in learnt.conflict { effects += identify(scheduler.prove(other, at: t)) }
            if introduced { scheduler.holdOff(address, for: Self.conflictHoldOff, at: t) }
            return (effects, true)
        }
        scheduler.resolved(address)
        guard !learnt.isOwn, learnt.isNew else { return ([], false) }
        var effects: [NodeEffect] = []
        if introduced {
            effects.append(.log(LogLine(.info, "a peer introduced itself",
                                        ["peer.address": "\(address)", "peer.id": "\(uuid.lowercased)"])))
        }
        if !learnt.previousAddresses.isEmpty {
            // An address that gave this identity up lately claims it back: not an address change
            // but two devices with one identity (a cloner of it). The one that took it over is
            // left alone, so the identity does not go back and forth at every connection.
            if let lost = superseded[address], lost.identity == uuid, t - lost.at < Self.conflictWindow {
                for taker in learnt.previousAddresses {
                    effects.append(.log(LogLine(.warning, "two devices claim one identity: keeping the earlier", [
                        "peer.id": "\(uuid.lowercased)", "peer.address": "\(address)", "peer.other": "\(taker)"])))
                    // Never banned: an address that proved the identity with the fleet's key.
                    if !heldVerified.contains(taker) { effects += leftAlone(taker, scheduler.refused(taker, at: t), rejected: true) }
                }
            } else {
                effects.append(.log(LogLine(.notice, "a peer changed address", [
                    "peer.id": "\(uuid.lowercased)", "peer.address": "\(address)",
                    "peer.previous": "\(learnt.previousAddresses.joined(separator: ","))"])))
            }
            if superseded.count >= 256 { superseded = superseded.filter { t - $0.value.at < Self.conflictWindow } }
            for old in learnt.previousAddresses { superseded[old] = (uuid, t) }
        }
        if verified {
            // A member: on disk before the signal that announces it.
            effects.append(.save(.peers(resolver.nodes)))
            peersUnsaved = false
        } else {
            // Anyone else: written with the others of the same second (peers.json is a cache: at
            // most one write a second for what outsiders can make the node learn).
            peersUnsaved = true
        }
        effects.append(.publish(.peerIdentified(.node(uuid), address: address, introduced: introduced)))
        return (effects, false)
    }

    /// The log line of a verified claim that conflicts with a verified binding heard lately.
    public static let conflictMessage = "two addresses prove one identity (a relay, or a copied key): " +
        "keeping the one heard, proving both again"

    /// A new fleet key, or none: every identity is proved again (verified bindings too, which
    /// were proved with the old key).
    mutating func forgetAllPeers() -> [NodeEffect] {
        connectionsOfOldKey = Set(scheduler.connectingAddresses)
        let forgotten = resolver.forgetAll()
        guard !forgotten.isEmpty else { return [] }
        return [.log(LogLine(.notice, "the fleet key changed: every peer is identified again", ["peers": "\(forgotten.count)"])),
                .save(.peers(resolver.nodes))]
    }

    /// With a fleet key, once a report: verified peers heard lately whose proof is older than
    /// ``proofInterval`` are asked for a new one (a link this node starts; the peer's own hello
    /// does as well); those whose proof is older than ``proofLifetime`` are unverified again.
    mutating func proveAgain(at t: Timestamp) -> [NodeEffect] {
        guard trust.isTrusted else { return [] }
        var effects: [NodeEffect] = []
        // The side that connects first asks; the other waits for that link's hello, and asks
        // itself only when none came for another interval (two links crossing are what BlueZ
        // handles worst).
        let heard = table.configuration.clearInterval
        let due = Set(resolver.dueForProof(olderThan: Self.proofInterval, heardWithin: heard, at: t).filter(scheduler.connectsFirst))
            .union(resolver.dueForProof(olderThan: 2 * Self.proofInterval, heardWithin: heard, at: t))
        for address in due.sorted() { effects += identify(scheduler.prove(address, at: t)) }
        let gone = resolver.forgetVerified(notHeardFor: Self.verifiedUnheard, at: t)
        if !gone.isEmpty {
            effects.append(.log(LogLine(.info, "verified peers not heard for a minute are forgotten (identified again when heard)",
                                        ["peers": "\(gone.joined(separator: ","))"])))
            effects.append(.save(.peers(resolver.nodes)))
        }
        let expired = resolver.expireProofs(olderThan: Self.proofLifetime, at: t)
        if !expired.isEmpty {
            effects.append(.log(LogLine(.notice, "peers that did not prove their identity again are unverified",
                                        ["peers": "\(expired.joined(separator: ","))"])))
        }
        return effects
    }

    /// With a fleet key, the peers learnt the open way (before the key) are identified again, the
    /// trusted way (or ignored, with `accept-unverified: false`), rather than kept unverified.
    mutating func forgetUnverifiedPeers() -> [NodeEffect] {
        guard trust.isTrusted else { return [] }
        let forgotten = resolver.forgetUnverified()
        guard !forgotten.isEmpty else { return [] }
        return [.log(LogLine(.notice, "peers learnt without the fleet's key are identified again", ["peers": "\(forgotten.count)"])),
                .save(.peers(resolver.nodes))]
    }

    // MARK: - The report

    /// The once-a-second step: the link's retries, identifications due, the table's report, then
    /// the report through regions, alerts and tracking.
    public mutating func report(at time: NodeTime) -> [NodeEffect] {
        let t = time.now
        var effects = linked(link.tick(at: t))
        if peersUnsaved {
            effects.append(.save(.peers(resolver.nodes)))
            peersUnsaved = false
        }
        effects += identify(scheduler.tick(at: t))
        effects += proveAgain(at: t)
        if t - lastFrameSweep >= Self.frameLifetime / 4 {
            lastFrameSweep = t
            _ = resolver.forgetFrames(notHeardFor: Self.frameLifetime, at: t)
        }
        let report = table.tick(at: t)
        for change in report.changes {
            effects.append(.log(LogLine(.debug, "zone changed", ["peer.id": "\(change.peer)", "from": "\(change.from?.rawValue ?? "none")",
                                                                "to": "\(change.to.rawValue)"])))
        }
        for id in report.removed { effects.append(.log(LogLine(.debug, "peer left the table", ["peer.id": "\(id)"]))) }
        // One snapshot per peer, read by every stage after ranging and published as it is.
        let names = self.names
        var peers: [PeerSnapshot] = []
        peers.reserveCapacity(table.count)
        for peer in table.peers.values {
            guard var snapshot = PeerSnapshot(peer, name: names.shown(peer.identifier, advertised: peer.details?.name)) else { continue }
            if snapshot.kind == .node, resolver.isVerified(at: snapshot.address) { snapshot.verified = true }
            peers.append(snapshot)
        }
        peers.sort { ($0.proximity, $0.distance, $0.identifier) < ($1.proximity, $1.distance, $1.identifier) }
        effects.append(.publish(.report(NodeReport(time: t, epoch: time.epoch, peers: peers, silenced: report.silenced,
                                                   removed: report.removed))))
        effects += recordingBatch(removed: report.removed, at: time)
        effects += monitorRegions(peers, at: time)
        effects += runAlerts(peers, at: time)
        effects += runTracking(peers, at: time)
        effects.append(.syncEventLog)
        if profile.persisted.isDue(at: t) { effects += saveProfileIfChanged(at: t) }
        return effects
    }

    // MARK: - Settings (Node1)

    mutating func setClearInterval(_ seconds: Double, into outcome: inout StepOutcome, at time: NodeTime) {
        settings.clearInterval = seconds
        commit(.settings(settings), into: &outcome, at: time)
        outcome.effects += applyClearInterval(seconds)
    }

    mutating func applyClearInterval(_ seconds: Double) -> [NodeEffect] {
        guard seconds != table.configuration.clearInterval else { return [] }
        table.configuration.clearInterval = seconds
        return [.publish(.clearInterval(seconds))]
    }

    mutating func setMeasuredPower(_ power: Int16, for identifier: String, into outcome: inout StepOutcome,
                                   at time: NodeTime) throws(NodeRefusal) {
        guard settings.measuredPower[identifier] != nil || settings.measuredPower.count < NodeSettings.maxOverrides else {
            throw NodeRefusal(.invalidArguments,
                              "at most \(NodeSettings.maxOverrides) peers may have a measured power set; reset some first")
        }
        settings.measuredPower[identifier] = power
        commit(.settings(settings), into: &outcome, at: time)
    }

    /// `SetPeerName`: `name` (valid, or empty to remove the one given) for `peer`, kept in
    /// `settings.json` before the reply; the next report shows it.
    mutating func setPeerName(_ name: String, for peer: PeerID, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        var names = self.names
        do throws(PeerNames.Refusal) {
            guard try names.give(name, to: peer) else { return }
        } catch {
            switch error {
            case .configured(let file):
                throw NodeRefusal(.notPermitted,
                                  "\(peer) is named \(file.debugDescription) in the config file's names; change it there and reload")
            case .full:
                throw NodeRefusal(.limitReached, "at most \(PeerNames.maxGiven) peers may be named over the bus; remove some names first")
            }
        }
        settings.names = names.given
        commit(.settings(settings), into: &outcome, at: time)
        outcome.effects.append(.log(name.isEmpty ? LogLine(.info, "peer name removed", ["peer.id": "\(peer)"])
                                                 : LogLine(.info, "peer named", ["peer.id": "\(peer)", "peer.name": "\(name)"])))
        outcome.effects.append(.publish(.peerNames(names.all, sequence: nextSequence())))
    }

    /// The display names: the config file's, and ``settings``' (given over the bus).
    var names: PeerNames { PeerNames(configured: configuredNames, given: settings.names) }

    /// `Node1.PeerNames`.
    public var peerNames: [PeerID: String] { names.all }

    mutating func resetMeasuredPower(for identifier: String, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        guard settings.measuredPower.removeValue(forKey: identifier) != nil else {
            throw NodeRefusal(.doesNotExist, "no measured power is set for \(identifier.debugDescription)")
        }
        commit(.settings(settings), into: &outcome, at: time)
    }
}

extension NodeCommand {
    /// `ClearInterval` set.
    public static func setClearInterval(_ seconds: Double) -> NodeCommand {
        NodeCommand("SetClearInterval") { step, outcome, time in step.setClearInterval(seconds, into: &outcome, at: time) }
    }

    public static func setMeasuredPower(_ power: Int16, peer: String) -> NodeCommand {
        NodeCommand("SetMeasuredPower") { step, outcome, time throws(NodeRefusal) in
            try step.setMeasuredPower(power, for: peer, into: &outcome, at: time)
        }
    }

    public static func resetMeasuredPower(peer: String) -> NodeCommand {
        NodeCommand("ResetMeasuredPower") { step, outcome, time throws(NodeRefusal) in
            try step.resetMeasuredPower(for: peer, into: &outcome, at: time)
        }
    }

    /// `SetPeerName`: an empty name removes the one given.
    public static func setPeerName(_ name: String, peer: PeerID) -> NodeCommand {
        NodeCommand("SetPeerName") { step, outcome, time throws(NodeRefusal) in
            try step.setPeerName(name, for: peer, into: &outcome, at: time)
        }
    }
}
