import Foundation
import StrictYAML
import ProximityCore

/// `mqtt:` (`docs/mqtt.md`).
extension ConfigDecoder {
    /// `mqtt:`: the broker and how to publish to it (`docs/mqtt.md`). `broker` is required; null
    /// or an absent section: no publishing.
    mutating func decodeMQTT(_ section: ConfigEntry) {
        let path = "mqtt"
        let node = section.value
        guard !node.isNull else { return }
        guard let entries = mapping(node, path: path, keys: ConfigFile.mqttKeys,
                                    expected: "a mapping of broker:, username: and the other mqtt keys") else { return }
        guard let brokerEntry = entries.first(where: { $0.key == "broker" }) else {
            report(section.keyPosition, "mqtt: broker is required (for example broker: mqtt://localhost)")
            return
        }
        guard let broker = text(brokerEntry, path: "mqtt.broker", MQTTSettings.checked(broker:)) else { return }
        var settings = MQTTSettings(broker: broker)
        mqttBrokerPosition = brokerEntry.value.position
        var valid = true
        func file(_ entry: ConfigEntry, _ key: String) -> String? {
            text(entry, path: key) { (t: String) throws(OptionProblem) -> String in
                guard t.hasPrefix("/") else { throw OptionProblem("must be an absolute path, not '\(t)'") }
                return t
            }
        }
        for entry in entries {
            let key = "\(path).\(entry.key)"
            let before = problems.count
            switch entry.key {
            case "ca-file": settings.caFile = file(entry, key)
            case "cert-file": settings.certificateFile = file(entry, key)
            case "key-file": settings.keyFile = file(entry, key)
            case "username": settings.username = text(entry, path: key) { (t: String) throws(OptionProblem) -> String in
                    guard !t.isEmpty, t.utf8.count <= 65535 else { throw OptionProblem("must be 1 to 65535 bytes") }
                    return t
                }
            case "password-file":
                settings.passwordFile = file(entry, key)
                passwordFilePosition = entry.value.position
            case "client-id": settings.clientID = text(entry, path: key, MQTTSettings.checked(clientID:))
            case "prefix": settings.prefix = text(entry, path: key, MQTTSettings.checked(prefix:))
            case "keepalive":
                if let v = integer(entry, path: key, in: MQTTSettings.keepaliveRange, seconds: true) { settings.keepalive = v }
            case "report-interval":
                if let v = seconds(entry, key, in: MQTTSettings.reportIntervalRange) { settings.reportInterval = v }
            case "report-moved":
                let range = MQTTSettings.reportMovedRange
                let shown = entry.value.text
                if let v = number(entry, named: key, "a number of metres in 0...100", { (d: Double) throws(OptionProblem) -> Double in
                    guard d.isFinite, range.contains(d) else { throw OptionProblem("must be a number of metres in 0...100, not \(shown)") }
                    return d
                }) { settings.reportMoved = v }
            case "hearings": if let b = boolean(entry, path: key) { settings.hearings = b }
            case "allow-plaintext": if let b = boolean(entry, path: key) { settings.allowPlaintext = b }
            case "compat":
                if let modes = compatibility(entry, path: key) { settings.compatibility = modes }
            case "room": settings.room = text(entry, path: key, MQTTSettings.checked(level:))
            case "discovery": if let b = boolean(entry, path: key) { settings.discovery = b }
            case "discovery-prefix": if let v = text(entry, path: key, MQTTSettings.checked(prefix:)) { settings.discoveryPrefix = v }
            case "role":
                if let role = text(entry, path: key, { (t: String) throws(OptionProblem) -> MQTTSettings.Role in
                    guard let role = MQTTSettings.Role(rawValue: t) else { throw OptionProblem("must be fixed or mobile, not '\(t)'") }
                    return role
                }) { settings.role = role }
            case "outbox-size":
                if let v = integer(entry, path: key, in: MQTTSettings.outboxSizeRange) { settings.outboxSize = v }
            case "reconnect-max":
                if let v = integer(entry, path: key, in: MQTTSettings.reconnectRange, seconds: true) { settings.reconnectMax = v }
            default: break
            }
            if problems.count != before { valid = false }
        }
        if settings.certificateFile != nil, settings.keyFile == nil {
            report(section.keyPosition, "mqtt: cert-file needs key-file"); valid = false
        }
        if settings.keyFile != nil, settings.certificateFile == nil {
            report(section.keyPosition, "mqtt: key-file needs cert-file"); valid = false
        }
        if settings.role == .mobile, !settings.compatibility.isEmpty,
           let compat = entries.first(where: { $0.key == "compat" }) {
            report(compat.keyPosition, "mqtt.compat: a mobile node is never a room, and these forms would make it one: " +
                   "leave compat out, or set role: fixed")
            valid = false
        }
        if !settings.broker.tls, settings.caFile != nil || settings.certificateFile != nil {
            report(brokerEntry.value.position, "mqtt.broker: ca-file and cert-file need an mqtts:// broker"); valid = false
        }
        if valid { mqtt = settings }
    }

    /// `compat:`: a list of compatibility modes, or one.
    mutating func compatibility(_ entry: ConfigEntry, path: String) -> [MQTTSettings.Compatibility]? {
        let names = MQTTSettings.Compatibility.allCases.map(\.rawValue)
        let items: [ConfigNode]
        switch entry.value.kind {
        case .null: return []
        case .sequence(let list): items = list
        default: items = [entry.value]
        }
        var modes: [MQTTSettings.Compatibility] = []
        var valid = true
        for (i, item) in items.enumerated() {
            guard let name = item.stringValue, let mode = MQTTSettings.Compatibility(rawValue: name) else {
                report(at: item, fallback: entry.keyPosition,
                       "\(path)[\(i)]: must be one of \(YAMLKeys.alternatives(names)), not \(item.summary)")
                valid = false
                continue
            }
            if !modes.contains(mode) { modes.append(mode) }
        }
        return valid ? modes : nil
    }
}
