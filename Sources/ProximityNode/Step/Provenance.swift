import Logging
import ProximityCore

/// Where each definition of one kind (regions, alerts, rules) came from: the config file or the
/// bus. One policy for the three: at start the config file's come first and a bus definition of
/// the same identifier gives way; the bus may not change or remove a config definition; a reload
/// replaces the config file's definitions and takes over bus ones it now defines.
struct Provenance: Sendable, Hashable {
    /// "region", "alert", "rule".
    let noun: String
    /// The config section where definitions of the bus must go to be changed there.
    private(set) var sources: [String: RegionSource] = [:]

    init(noun: String, sources: [String: RegionSource] = [:]) {
        self.noun = noun
        self.sources = sources
    }

    subscript(id: String) -> RegionSource? { sources[id] }
    var count: Int { sources.count }

    func identifiers(from source: RegionSource) -> [String] {
        sources.filter { $0.value == source }.keys.sorted()
    }

    private var article: String { "aeiou".contains(noun.first ?? "x") ? "an" : "a" }

    /// The definitions at start: `config`'s, then `bus`'s (saved) unless the config file defines
    /// the same identifier. `add` keeps one and returns false when a limit leaves no room.
    static func start<Item>(noun: String, config: [Item], bus: [Item], id: (Item) -> String, limit: Int,
                            add: (Item, RegionSource) -> Bool) -> (Provenance, [LogLine]) {
        var provenance = Provenance(noun: noun)
        var lines: [LogLine] = []
        for (item, source) in config.map({ ($0, RegionSource.config) }) + bus.map({ ($0, RegionSource.bus) }) {
            let identifier = id(item)
            if source == .bus, provenance.sources[identifier] == .config {
                lines.append(provenance.takenOver(identifier))
                continue
            }
            guard add(item, source) else {
                lines.append(LogLine(.error, "\(noun) limit reached: \(provenance.article) \(noun) was not restored",
                                     [noun: "\(identifier)", "limit": "\(limit)"]))
                continue
            }
            provenance.sources[identifier] = source
        }
        return (provenance, lines)
    }

    private func takenOver(_ identifier: String) -> LogLine {
        LogLine(.notice, "\(article) \(noun) added over the bus is now defined in the config file", [noun: "\(identifier)"])
    }

    /// A bus command defining `identifier`: refused when the config file defines it, or when it is
    /// new and `limit` definitions exist. `hint`: what to do at the limit.
    func checkBusDefinition(_ identifier: String, limit: Int, hint: String = "remove some first") throws(NodeRefusal) {
        if sources[identifier] == .config {
            throw NodeRefusal(.notPermitted,
                              "\(noun) \(identifier.debugDescription) is defined in the config file; change it there and reload")
        }
        if sources[identifier] == nil, sources.count >= limit {
            throw NodeRefusal(.limitReached, "at most \(limit) \(noun)s may be defined; \(hint)")
        }
    }

    /// A bus command removing `identifier`: it must exist and come from the bus.
    func checkBusRemoval(_ identifier: String, missing: String? = nil) throws(NodeRefusal) {
        guard let source = sources[identifier] else {
            throw NodeRefusal(.doesNotExist, missing ?? "no \(noun) \(identifier.debugDescription) is defined")
        }
        guard source == .bus else {
            throw NodeRefusal(.notPermitted,
                              "\(noun) \(identifier.debugDescription) is defined in the config file; remove it there and reload")
        }
    }

    mutating func set(_ identifier: String, _ source: RegionSource?) { sources[identifier] = source }

    /// What a reload with `config`'s identifiers does: the config definitions it no longer has
    /// (to remove), the log lines for bus definitions it takes over, and the provenance after.
    struct Reload {
        var removed: [String]
        var lines: [LogLine]
        var next: Provenance
    }

    func reload(config: [String]) -> Reload {
        let wanted = Set(config)
        var next = self
        let removed = identifiers(from: .config).filter { !wanted.contains($0) }
        for id in removed { next.sources[id] = nil }
        var lines: [LogLine] = []
        for id in config {
            if next.sources[id] == .bus { lines.append(takenOver(id)) }
            next.sources[id] = .config
        }
        return Reload(removed: removed, lines: lines, next: next)
    }
}

/// What was last written of one state file, and when: a save is due when the value differs, and
/// for values that drift (last-seen times), once ``refresh`` seconds passed.
struct Persisted<Value: Equatable & Sendable>: Sendable {
    private(set) var last: Value?
    private(set) var savedAt: Timestamp
    let refresh: Double

    init(_ value: Value?, at t: Timestamp, refresh: Double = .infinity) {
        last = value
        savedAt = t
        self.refresh = refresh
    }

    func differs(_ value: Value) -> Bool { last != value }
    func isDue(at t: Timestamp) -> Bool { t - savedAt >= refresh }

    mutating func wrote(_ value: Value, at t: Timestamp) {
        last = value
        savedAt = t
    }

    /// A write failed: the next save writes again.
    mutating func lost() { last = nil }
}
