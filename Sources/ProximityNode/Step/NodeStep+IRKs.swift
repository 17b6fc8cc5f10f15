import Logging
import ProximityAPIValues
import ProximityCore
import ProximityTrust

/// The IRKs the node recognises devices by: the config file's `irks:` and those given over the
/// bus (`AddIRK`, kept in `settings.json`), the config file's winning for a name both give. Each
/// change replaces the identity stage's resolver (its remembered answers go with it).
extension NodeStep {
    /// The IRKs in force, by name.
    var irks: [String: IdentityResolvingKey] {
        settings.givenIRKs.merging(trust.irks) { _, configured in configured }
    }

    /// `Node1.IRKs`: each IRK's name and where it was given (`config`, `bus`).
    public var irkSources: [String: String] {
        settings.irks.mapValues { _ in "bus" }.merging(trust.irks.mapValues { _ in "config" }) { _, configured in configured }
    }

    /// Puts the IRKs in force into the identity stage.
    mutating func applyIRKs() {
        let keys = irks
        resolver.privateAddresses = keys.isEmpty ? nil : AddressResolver(keys: keys)
    }

    /// `AddIRK`: kept in `settings.json` before the reply.
    mutating func addIRK(_ name: String, _ key: IdentityResolvingKey, into outcome: inout StepOutcome,
                         at time: NodeTime) throws(NodeRefusal) {
        if trust.irks[name] != nil {
            throw NodeRefusal(.notPermitted,
                              "the IRK \(name.debugDescription) is given in the config file's irks:; change it there and reload")
        }
        let hex = Hex.text(key.bytes)
        guard settings.irks[name] != hex else { return }
        guard settings.irks[name] != nil || irks.count < TrustSettings.maxIRKs else {
            throw NodeRefusal(.limitReached, "a node holds at most \(TrustSettings.maxIRKs) IRKs; remove some first")
        }
        let replaced = settings.irks[name] != nil
        settings.irks[name] = hex
        commit(.settings(settings), into: &outcome, at: time)
        applyIRKs()
        outcome.effects.append(.log(LogLine(.notice, replaced ? "IRK replaced" : "IRK added",
                                            ["irk": "\(name)", "peer.id": "\(PeerID.irk(name))"])))
        outcome.effects.append(.publish(.irks(irkSources, sequence: nextSequence())))
    }

    /// `RemoveIRK`: only one given over the bus.
    mutating func removeIRK(_ name: String, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        guard settings.irks.removeValue(forKey: name) != nil else {
            if trust.irks[name] != nil {
                throw NodeRefusal(.notPermitted,
                                  "the IRK \(name.debugDescription) is given in the config file's irks:; remove it there and reload")
            }
            throw NodeRefusal(.doesNotExist, "no IRK \(name.debugDescription) was added over the bus")
        }
        commit(.settings(settings), into: &outcome, at: time)
        applyIRKs()
        outcome.effects.append(.log(LogLine(.notice, "IRK removed", ["irk": "\(name)"])))
        outcome.effects.append(.publish(.irks(irkSources, sequence: nextSequence())))
    }

    /// A reload's `irks:`.
    mutating func reconfigureIRKs(_ configured: [String: IdentityResolvingKey], was: [String: IdentityResolvingKey]) -> [NodeEffect] {
        guard configured != was else { return [] }
        applyIRKs()
        return [.log(LogLine(.notice, "the IRKs changed", ["irks": "\(irks.count)", "config": "\(configured.count)"])),
                .publish(.irks(irkSources, sequence: nextSequence()))]
    }
}

extension NodeCommand {
    /// `AddIRK`: the name checked (``PeerID/irkNameProblem(_:)``), the key parsed.
    public static func addIRK(_ name: String, key: IdentityResolvingKey) -> NodeCommand {
        NodeCommand("AddIRK") { step, outcome, time throws(NodeRefusal) in try step.addIRK(name, key, into: &outcome, at: time) }
    }

    public static func removeIRK(_ name: String) -> NodeCommand {
        NodeCommand("RemoveIRK") { step, outcome, time throws(NodeRefusal) in try step.removeIRK(name, into: &outcome, at: time) }
    }
}
