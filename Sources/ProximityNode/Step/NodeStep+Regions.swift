import Logging
import ProximityAPIValues
import ProximityCore

/// The region monitor's part of the step: the monitor (each region carries where it came from),
/// and what was last written to `regions.json` (a change of state is on disk before it is announced;
/// last-seen times follow within ``SavedRegions/refreshInterval``).
struct RegionStage: Sendable {
    var monitor: RegionMonitor
    var persisted: Persisted<[RegionStatus]>
    /// A last-seen time moved since the last save.
    var seenSinceSave = false
    /// The states determined at start, published once the node runs.
    var initialEvents: [RegionEvent]
    var startLines: [LogLine]

    /// The config file's regions, then those added over the bus, each with its saved state when
    /// young enough.
    init(_ configuration: NodeConfiguration, _ saved: SavedRegions, at t: Timestamp) {
        var monitor = RegionMonitor(configuration: configuration.regionMonitor)
        var events: [RegionEvent] = []
        (_, startLines) = Provenance.start(
            noun: "region", config: configuration.regions, bus: saved.busRegions, id: \.identifier,
            limit: configuration.regionMonitor.maxRegions) { region, _ in
                guard let determined = try? monitor.start(region, restoring: saved.states[region.identifier], at: t) else { return false }
                events += determined
                return true
            }
        self.monitor = monitor
        initialEvents = events
        persisted = Persisted(nil, at: t, refresh: SavedRegions.refreshInterval)
    }

    /// Where each region came from, as the monitor's regions say (`Region.source`).
    var provenance: Provenance {
        Provenance(noun: "region", sources: Dictionary(monitor.regions.map { ($0.region.identifier, $0.region.source) }) { a, _ in a })
    }
}

extension NodeStep {
    /// Every region as it is now, for the exporter to show before the node takes its name.
    public var regionSnapshot: RegionChanges { RegionChanges(sequence: sequence, defined: regions.monitor.regions) }

    /// `GetMonitoredRegions`: the identifiers, sorted.
    public var monitoredRegions: [String] { regions.monitor.regions.map(\.region.identifier) }

    /// Publishes `changes` with the next sequence number; `logged`: the events go to the event log
    /// and through the rules first (false for what only answers a question, `RequestState`).
    mutating func publishRegions(_ changes: RegionChanges, logged: Bool = true, at time: NodeTime) -> [NodeEffect] {
        var effects: [NodeEffect] = []
        var offers: [AlertEvent] = []
        if logged, !changes.events.isEmpty {
            (effects, offers) = react(Self.regionHappenings(changes.events, ranging: changes.ranging, at: time.epoch), at: time)
        }
        var numbered = changes
        numbered.sequence = nextSequence()
        effects.append(.publish(.regions(numbered)))
        if !offers.isEmpty { effects += settleAlerts(offers, at: time) }
        return effects
    }

    mutating func monitorRegions(_ peers: [PeerSnapshot], at time: NodeTime) -> [NodeEffect] {
        guard regions.monitor.count > 0 else { return [] }
        let t = time.now
        let update = regions.monitor.update(peers, at: t)
        if !update.ranging.isEmpty { regions.seenSinceSave = true }
        var effects: [NodeEffect] = []
        if update.stateChanged || (regions.seenSinceSave && regions.persisted.isDue(at: t)) {
            effects.append(save(.regions(regions.monitor.regions), at: t))
        }
        for event in update.events {
            switch event {
            case .entered(let id): effects.append(.log(LogLine(.info, "entered region", ["region": "\(id)"])))
            case .exited(let id): effects.append(.log(LogLine(.info, "exited region", ["region": "\(id)"])))
            case .determined: break
            }
        }
        return effects + publishRegions(RegionChanges(sequence: 0, events: update.events, ranging: update.ranging), at: time)
    }

    // MARK: - Commands (RegionMonitor1)

    mutating func startMonitoring(_ region: Region, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        try regions.provenance.checkBusDefinition(region.identifier, limit: .max)
        let determined: [RegionEvent]
        do { determined = try regions.monitor.start(region, at: time.now) } catch {
            throw NodeRefusal(.limitReached,
                              "at most \(error.limit) regions may be monitored; stop some first (or raise region-monitor.max-regions)")
        }
        commit(.regions(regions.monitor.regions), into: &outcome, at: time)
        outcome.effects.append(.log(LogLine(.info, "monitoring a region", ["region": "\(region.identifier)", "source": "bus"])))
        outcome.effects += publishRegions(RegionChanges(sequence: 0,
                                                        defined: regions.monitor.status(of: region.identifier).map { [$0] } ?? [],
                                                        events: determined), at: time)
    }

    mutating func stopMonitoring(_ identifier: String, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        try regions.provenance.checkBusRemoval(identifier, missing: "no region \(identifier.debugDescription) is monitored")
        regions.monitor.stop(identifier)
        commit(.regions(regions.monitor.regions), into: &outcome, at: time)
        outcome.effects.append(.log(LogLine(.info, "stopped monitoring a region", ["region": "\(identifier)"])))
        outcome.effects += publishRegions(RegionChanges(sequence: 0, removed: [identifier]), at: time)
    }

    /// `StopMonitoringAll`: every region added over the bus (the config file's stay).
    mutating func stopMonitoringAll(into outcome: inout StepOutcome, at time: NodeTime) {
        let stopped = regions.provenance.identifiers(from: .bus)
        for id in stopped { regions.monitor.stop(id) }
        commit(.regions(regions.monitor.regions), into: &outcome, at: time)
        outcome.effects.append(.log(LogLine(.info, "stopped monitoring the regions added over the bus", ["count": "\(stopped.count)"])))
        outcome.effects += publishRegions(RegionChanges(sequence: 0, removed: stopped), at: time)
    }

    /// `RequestState`: the state, also announced with a `StateDetermined`; signalled, not logged
    /// (the state did not change, and anyone may ask: they must not fill the durable log or run
    /// the rules with it).
    mutating func requestState(_ identifier: String, into outcome: inout StepOutcome, at time: NodeTime) throws(NodeRefusal) {
        guard let event = regions.monitor.requestState(identifier), case .determined(_, let state) = event else {
            throw NodeRefusal(.doesNotExist, "no region \(identifier.debugDescription) is monitored")
        }
        outcome.regionState = state
        outcome.effects += publishRegions(RegionChanges(sequence: 0, events: [event]), logged: false, at: time)
    }

    // MARK: - Reload

    /// The config file's regions and monitor settings after a reload; the change to publish.
    mutating func reconfigureRegions(_ configuration: NodeConfiguration,
                                     at t: Timestamp) throws(NodeRefusal) -> (RegionChanges, [LogLine]) {
        regions.monitor.configuration = configuration.regionMonitor
        let reload = regions.provenance.reload(config: configuration.regions.map(\.identifier))
        for id in reload.removed { regions.monitor.stop(id) }
        var defined: [String] = []
        var determined: [RegionEvent] = []
        for region in configuration.regions where regions.monitor.status(of: region.identifier)?.region != region {
            do { determined += try regions.monitor.start(region, at: t) } catch {
                let busCount = reload.next.identifiers(from: .bus).count
                throw NodeRefusal(.invalidConfiguration,
                                  "\(configuration.regions.count) regions in the config file and \(busCount) added over the bus " +
                                      "exceed region-monitor.max-regions (\(error.limit)); nothing changed")
            }
            defined.append(region.identifier)
        }
        if regions.monitor.count > configuration.regionMonitor.maxRegions {
            throw NodeRefusal(.invalidConfiguration,
                              "\(regions.monitor.count) regions exceed region-monitor.max-regions " +
                                  "(\(configuration.regionMonitor.maxRegions)); stop some first; nothing changed")
        }
        var lines = reload.lines
        if !reload.removed.isEmpty || !defined.isEmpty {
            lines.append(LogLine(.info, "regions of the config file applied",
                                 ["defined": "\(defined.count)", "removed": "\(reload.removed.count)"]))
        }
        return (RegionChanges(sequence: 0, removed: reload.removed, defined: defined.compactMap { regions.monitor.status(of: $0) },
                              events: determined), lines)
    }
}

extension NodeCommand {
    public static func startMonitoring(_ region: Region) -> NodeCommand {
        NodeCommand("StartMonitoring") { step, outcome, time throws(NodeRefusal) in
            try step.startMonitoring(region, into: &outcome, at: time)
        }
    }

    public static func stopMonitoring(_ identifier: String) -> NodeCommand {
        NodeCommand("StopMonitoring") { step, outcome, time throws(NodeRefusal) in
            try step.stopMonitoring(identifier, into: &outcome, at: time)
        }
    }

    public static var stopMonitoringAll: NodeCommand {
        NodeCommand("StopMonitoringAll") { step, outcome, time in step.stopMonitoringAll(into: &outcome, at: time) }
    }

    /// Answered with the state (``StepOutcome/regionState``); signalled, not logged.
    public static func requestState(_ identifier: String) -> NodeCommand {
        NodeCommand("RequestState") { step, outcome, time throws(NodeRefusal) in
            try step.requestState(identifier, into: &outcome, at: time)
        }
    }
}
