import Foundation
import ProximityCore
import ProximityTrust

/// `settings.json`: ``NodeSettings`` read (checked as a hand-written file) and written (mode 0600).
extension NodeSettings {
    public static func load(from state: StateDirectory) throws(StateError) -> NodeSettings {
        guard let data = try state.read(fileName, secret: true) else { return NodeSettings() }
        let path = state.file(fileName).path
        let settings: NodeSettings
        do {
            settings = try JSONDecoder().decode(NodeSettings.self, from: data)
        } catch {
            throw StateError(kind: .corrupt, path: path, detail: "not a settings file: \(decodingSummary(error))")
        }
        guard settings.version == currentVersion else {
            throw StateError(kind: .corrupt, path: path,
                             detail: "version \(settings.version) is not supported (expected \(currentVersion))")
        }
        if let interval = settings.clearInterval, !NodeSettings.clearIntervalRange.contains(interval) {
            throw StateError(kind: .corrupt, path: path, detail: "clearInterval \(interval) is outside 0 < seconds <= 3600")
        }
        for (identifier, power) in settings.measuredPower {
            if let problem = NodeSettings.problem(identifier: identifier) ?? NodeSettings.problem(measuredPower: power) {
                throw StateError(kind: .corrupt, path: path, detail: "measuredPower[\(identifier.debugDescription)]: \(problem)")
            }
        }
        guard settings.names.count <= PeerNames.maxGiven else {
            throw StateError(kind: .corrupt, path: path, detail: "\(settings.names.count) names are more than \(PeerNames.maxGiven)")
        }
        for (identifier, name) in settings.names {
            if let problem = PeerID.formProblem(identifier) ?? PeerNames.problem(name: name) {
                throw StateError(kind: .corrupt, path: path, detail: "names[\(identifier.debugDescription)]: \(problem)")
            }
        }
        guard settings.irks.count <= TrustSettings.maxIRKs else {
            throw StateError(kind: .corrupt, path: path, detail: "\(settings.irks.count) IRKs are more than \(TrustSettings.maxIRKs)")
        }
        for (name, key) in settings.irks {
            if let problem = PeerID.irkNameProblem(name) {
                throw StateError(kind: .corrupt, path: path, detail: "irks[\(name.debugDescription)]: \(problem)")
            }
            do { _ = try IdentityResolvingKey(parsing: key) } catch {
                throw StateError(kind: .corrupt, path: path, detail: "irks[\(name.debugDescription)]: \(error)")
            }
        }
        return settings
    }

    public func save(to state: StateDirectory) throws(StateError) {
        try state.writeJSON(Self.fileName, self, mode: 0o600)
    }
}

private func decodingSummary(_ error: Error) -> String {
    switch error {
    case DecodingError.dataCorrupted(let c): c.debugDescription
    case DecodingError.keyNotFound(let key, _): "no \(key.stringValue)"
    case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c):
        "\(c.codingPath.map(\.stringValue).joined(separator: ".")): \(c.debugDescription)"
    default: "\(error)"
    }
}
