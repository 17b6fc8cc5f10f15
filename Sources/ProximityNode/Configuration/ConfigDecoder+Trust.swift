import Foundation
import ProximityCore
import ProximityTrust

/// `fleet-key:` and `accept-unverified:`.
extension ConfigDecoder {
    /// `fleet-key: FILE`: an absolute path; the file itself is read by ``ConfigFile/parse(_:path:)``
    /// (``FleetKeyFile``), its problems reported at this value.
    mutating func decodeFleetKey(_ entry: ConfigEntry) {
        guard !entry.value.isNull else { return }
        fleetKeyFile = text(entry, path: "fleet-key") { (path: String) throws(OptionProblem) -> String in
            guard path.hasPrefix("/") else { throw OptionProblem("must be an absolute path, not '\(path)'") }
            return path
        }
        if fleetKeyFile != nil { fleetKeyPosition = entry.value.position }
    }

    /// `previous-fleet-key: { file: FILE, until: TIME }`: a key being rotated out, accepted until
    /// TIME (ISO 8601 with a zone, `2026-12-05T18:00:00Z`), which must be in the future and at
    /// most ``TrustSettings/maxGrace`` away (docs/security.md, Rotation).
    mutating func decodePreviousFleetKey(_ entry: ConfigEntry, now: Date = Date()) {
        guard !entry.value.isNull else { return }
        guard let fields = mapping(entry.value, path: "previous-fleet-key", keys: ["file", "until"],
                                   expected: "a mapping of file: (the previous key's file) and until: " +
                                       "(when it stops being accepted)") else { return }
        var file: String?, until: Date?
        for field in fields {
            switch field.key {
            case "file":
                file = text(field, path: "previous-fleet-key.file") { (path: String) throws(OptionProblem) -> String in
                    guard path.hasPrefix("/") else { throw OptionProblem("must be an absolute path, not '\(path)'") }
                    return path
                }
            case "until":
                until = text(field, path: "previous-fleet-key.until") { (t: String) throws(OptionProblem) -> Date in
                    let formatter = ISO8601DateFormatter()
                    guard let date = formatter.date(from: t) else {
                        throw OptionProblem("must be a time in ISO 8601 with its zone (2026-12-05T18:00:00Z), not '\(t)'")
                    }
                    guard date > now else { throw OptionProblem("\(t) is past: the rotation is over; remove previous-fleet-key:") }
                    guard date.timeIntervalSince(now) <= TrustSettings.maxGrace else {
                        throw OptionProblem("\(t) is more than \(Int(TrustSettings.maxGrace / 86_400)) days away: " +
                            "a previous key is accepted for a week at most")
                    }
                    return date
                }
            default: break
            }
        }
        let given = Set(fields.map(\.key))
        for missing in ["file", "until"] where !given.contains(missing) {
            report(entry.keyPosition, "previous-fleet-key: \(missing): is required")
        }
        if let file, let until { previousKeyFile = (file, until, entry.keyPosition) }
    }

    mutating func decodeAcceptUnverified(_ entry: ConfigEntry) {
        if let value = boolean(entry, path: "accept-unverified") { acceptUnverified = value }
    }

    /// What needs the key read and the file's mode, after the tree: `accept-unverified`'s default
    /// (false with a key, true without); with a key, no plaintext broker off this host unless
    /// `mqtt.allow-plaintext: true` says so (the reports say where the fleet's members are);
    /// the password file kept as a secret (``SecretFile``); no inline IRKs in a file that group
    /// or others may read (`mode`, nil when not read from disk).
    mutating func checkSecrets(file: String, mode: mode_t?) {
        trust.acceptUnverified = acceptUnverified ?? (trust.key == nil)
        if trust.key != nil, let mqtt, !mqtt.broker.tls, !mqtt.allowPlaintext, !mqtt.broker.isLoopback {
            report(mqttBrokerPosition, "mqtt.broker: a node with a fleet key would publish where the fleet's members are, in clear, " +
                   "to \(mqtt.broker.host): use mqtts:// (docs/mqtt.md), or write allow-plaintext: true under mqtt: to accept that")
        }
        if let path = mqtt?.passwordFile {
            do throws(SecretFileError) { _ = try SecretFile.password(path: path) } catch {
                report(passwordFilePosition, "mqtt.password-file: \(error.description)")
            }
        }
        if let mode, let at = inlineIRKsPosition, !trust.irks.isEmpty, mode & 0o077 != 0 {
            report(at, "irks: \(file) is readable by group or others (mode \(String(mode, radix: 8))) and holds identity resolving keys: " +
                   "chmod 600 \(file) (owned by the user proximityd runs as), or move the keys to an IRK file of their own " +
                   "(irks: /etc/proximityd/irks.yaml, docs/security.md)")
        }
    }
}

/// `irks:`: inline, a mapping of names to IRKs; or the absolute path of an IRK file holding that
/// mapping (``IRKFile``), read by ``ConfigFile/parse(_:path:)`` after the tree.
extension ConfigDecoder {
    static let irksExpected = "a mapping of names to IRKs (32 hexadecimal digits), or the absolute path of a file holding one"

    mutating func decodeIRKs(_ entry: ConfigEntry) {
        guard !entry.value.isNull else { return }
        if case .mapping = entry.value.kind {
            trust.irks = irkMapping(entry.value, path: "irks") ?? [:]
            inlineIRKsPosition = entry.keyPosition
            return
        }
        guard entry.value.stringValue != nil else {
            report(at: entry.value, fallback: entry.keyPosition, "irks: must be \(Self.irksExpected), not \(entry.value.summary)")
            return
        }
        irkFile = text(entry, path: "irks") { (path: String) throws(OptionProblem) -> String in
            guard path.hasPrefix("/") else { throw OptionProblem("must be an absolute path, not '\(path)'") }
            return path
        }
        if irkFile != nil { irkFilePosition = entry.value.position }
    }

    /// A mapping of IRK names (``PeerID/irkNameProblem(_:)``) to keys, at most
    /// ``TrustSettings/maxIRKs``; each problem reported at its key or value.
    mutating func irkMapping(_ node: ConfigNode, path: String) -> [String: IdentityResolvingKey]? {
        guard let entries = mapping(node, path: path, keys: nil, expected: Self.irksExpected) else { return nil }
        if entries.count > TrustSettings.maxIRKs {
            report(at: node, "\(path): \(entries.count) IRKs are more than a node may hold (\(TrustSettings.maxIRKs))")
            return nil
        }
        var keys: [String: IdentityResolvingKey] = [:]
        for entry in entries {
            let at = "\(path).\(entry.key)"
            if let problem = PeerID.irkNameProblem(entry.key) {
                report(entry.keyPosition, "\(at): \(problem)")
                continue
            }
            let key = text(entry, path: at) { (hex: String) throws(OptionProblem) -> IdentityResolvingKey in
                do throws(IRKError) { return try IdentityResolvingKey(parsing: hex) } catch { throw OptionProblem(error.description) }
            }
            if let key { keys[entry.key] = key }
        }
        return keys
    }
}
