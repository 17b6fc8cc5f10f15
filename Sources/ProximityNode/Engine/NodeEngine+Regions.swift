import DBusKit
import Foundation
import Logging
import ProximityAPI
import ProximityCore

/// The region monitor stage: fed by each report, commanded from the bus (`RegionMonitor1`) and by
/// a reload. Every change is written to `regions.json` before it is published or answered.
extension NodeEngine {
    typealias Errors = ProximityBus.Errors

    /// The monitor at start: the config file's regions, then those added over the bus (a config
    /// region of the same identifier wins), each with its saved state when young enough.
    static func startRegions(_ configuration: NodeConfiguration, _ saved: RegionStore.Saved, at t: Timestamp,
                             logger: Logger) -> (RegionMonitor, [RegionEvent]) {
        var monitor = RegionMonitor(configuration: configuration.regionMonitor)
        var events: [RegionEvent] = []
        let configured = Set(configuration.regions.map(\.identifier))
        for region in configuration.regions + saved.busRegions {
            if region.source == .bus, configured.contains(region.identifier) {
                logger.notice("a region added over the bus is now defined in the config file", metadata: ["region": "\(region.identifier)"])
                continue
            }
            do {
                events += try monitor.start(region, restoring: saved.states[region.identifier], at: t)
            } catch {
                logger.error("region limit reached: a region was not restored (raise region-monitor.max-regions)",
                             metadata: ["region": "\(region.identifier)", "limit": "\(error.limit)"])
            }
        }
        return (monitor, events)
    }

    /// Every region as it is now, for the exporter to show before the node takes its name.
    public var regionSnapshot: RegionChanges {
        RegionChanges(sequence: changeSequence, defined: regions.regions)
    }

    func publishInitialRegions() {
        let initial = initialRegionEvents
        guard !initial.isEmpty else { return }
        publishRegions(RegionChanges(sequence: 0, events: initial))
        for case .determined(let id, let state) in initial where state != .unknown {
            logger.info("region state restored", metadata: ["region": "\(id)", "state": "\(state.rawValue)"])
        }
    }

    /// Publishes `changes` with the next sequence number, which it returns.
    @discardableResult
    /// `logged`: the events go to the event log and through the rules first; false for what only
    /// answers a question (`RequestState`), which anyone may ask as often as they like.
    func publishRegions(_ changes: RegionChanges, logged: Bool = true) -> UInt64 {
        // Logged (and through the rules) before the signals go out.
        let offers = logged ? react(Self.regionHappenings(changes.events, ranging: changes.ranging, at: clock.epoch(clock.now)), at: clock.now) : []
        defer { if !offers.isEmpty { settleAlerts(offers) } }
        changeSequence += 1
        var numbered = changes
        numbered.sequence = changeSequence
        events.publish(.regions(numbered))
        return changeSequence
    }

    /// Writes `monitor`'s regions; a failure is the caller's error, with nothing changed.
    func saveRegions(_ monitor: RegionMonitor) throws(DBusError) {
        do { try regionStore.save(monitor.regions, clock: clock) } catch {
            throw DBusError(Errors.failed, "cannot save the regions: \(error)")
        }
        regionsSavedAt = clock.now
        regionsSeenSinceSave = false
    }

    func saveRegionsOnStop() {
        guard regions.count > 0 || regionStore.exists else { return }
        do { try saveRegions(regions) } catch {
            logger.error("cannot save the regions at shutdown", metadata: ["error": "\(error.message)"])
        }
    }

    // MARK: - Each report

    func monitorRegions(_ candidates: [RegionCandidate], at t: Timestamp) {
        guard regions.count > 0 else { return }
        let update = regions.update(candidates, at: t)
        if !update.ranging.isEmpty { regionsSeenSinceSave = true }
        // A change of state is on disk before it is announced; last-seen times follow within
        // RegionStore.refreshInterval.
        if update.stateChanged || (regionsSeenSinceSave && t - regionsSavedAt >= RegionStore.refreshInterval) {
            do { try saveRegions(regions) } catch {
                logger.error("cannot save the regions' state", metadata: ["error": "\(error.message)"])
            }
        }
        for event in update.events {
            switch event {
            case .entered(let id): logger.info("entered region", metadata: ["region": "\(id)"])
            case .exited(let id): logger.info("exited region", metadata: ["region": "\(id)"])
            case .determined: break
            }
        }
        publishRegions(RegionChanges(sequence: 0, events: update.events, ranging: update.ranging))
    }

    // MARK: - Commands (RegionMonitor1)

    /// `StartMonitoring`: adds or replaces a region of the bus; saved, then published. Returns the
    /// sequence of the published change.
    public func startMonitoring(_ region: Region) throws(DBusError) -> UInt64 {
        if let existing = regions.status(of: region.identifier), existing.region.source == .config {
            throw DBusError(Errors.notPermitted, "region \(region.identifier.debugDescription) is defined in the config file; change it there and reload")
        }
        var next = regions
        let determined: [RegionEvent]
        do { determined = try next.start(region, at: clock.now) } catch {
            throw DBusError(Errors.limitReached, "at most \(error.limit) regions may be monitored; stop some first (or raise region-monitor.max-regions)")
        }
        try saveRegions(next)
        regions = next
        logger.info("monitoring a region", metadata: ["region": "\(region.identifier)", "source": "bus"])
        return publishRegions(RegionChanges(sequence: 0, defined: [regions.status(of: region.identifier)!], events: determined))
    }

    /// `StopMonitoring`.
    public func stopMonitoring(_ identifier: String) throws(DBusError) -> UInt64 {
        guard let status = regions.status(of: identifier) else {
            throw DBusError(Errors.doesNotExist, "no region \(identifier.debugDescription) is monitored")
        }
        guard status.region.source == .bus else {
            throw DBusError(Errors.notPermitted, "region \(identifier.debugDescription) is defined in the config file; remove it there and reload")
        }
        var next = regions
        next.stop(identifier)
        try saveRegions(next)
        regions = next
        logger.info("stopped monitoring a region", metadata: ["region": "\(identifier)"])
        return publishRegions(RegionChanges(sequence: 0, removed: [identifier]))
    }

    /// `StopMonitoringAll`: every region added over the bus (the config file's stay).
    public func stopMonitoringAll() throws(DBusError) -> UInt64 {
        var next = regions
        let stopped = regions.regions.filter { $0.region.source == .bus }.map(\.region.identifier)
        for id in stopped { next.stop(id) }
        try saveRegions(next)
        regions = next
        logger.info("stopped monitoring the regions added over the bus", metadata: ["count": "\(stopped.count)"])
        return publishRegions(RegionChanges(sequence: 0, removed: stopped))
    }

    /// `RequestState`: the state, also announced with a `StateDetermined`.
    public func requestState(_ identifier: String) throws(DBusError) -> (RegionState, UInt64) {
        guard let event = regions.requestState(identifier), case .determined(_, let state) = event else {
            throw DBusError(Errors.doesNotExist, "no region \(identifier.debugDescription) is monitored")
        }
        // Signalled (DidDetermineState), not logged: the state did not change, and RequestState
        // is open to every caller, who must not fill the durable log or run the rules with it.
        return (state, publishRegions(RegionChanges(sequence: 0, events: [event]), logged: false))
    }

    /// `GetMonitoredRegions`: the identifiers, sorted.
    public var monitoredRegions: [String] { regions.regions.map(\.region.identifier) }

    // MARK: - Reload

    /// Applies a reloaded configuration's regions and monitor settings, its alerts, and its clear
    /// interval, as one change: checked first, saved, then published. Returns the sequence of the change.
    public func reconfigure(_ configuration: NodeConfiguration) throws(DBusError) -> UInt64 {
        var next = regions
        next.configuration = configuration.regionMonitor
        let wanted = Dictionary(configuration.regions.map { ($0.identifier, $0) }) { first, _ in first }
        var removed: [String] = []
        for status in regions.regions where status.region.source == .config && wanted[status.region.identifier] == nil {
            next.stop(status.region.identifier)
            removed.append(status.region.identifier)
        }
        var defined: [String] = []
        var determined: [RegionEvent] = []
        for region in configuration.regions {
            let old = next.status(of: region.identifier)
            if old?.region == region { continue }
            if old?.region.source == .bus {
                logger.notice("a region added over the bus is now defined in the config file", metadata: ["region": "\(region.identifier)"])
            }
            do { determined += try next.start(region, at: clock.now) } catch {
                let busCount = next.regions.filter { $0.region.source == .bus }.count
                throw DBusError(Errors.invalidConfiguration,
                                "\(configuration.regions.count) regions in the config file and \(busCount) added over the bus exceed region-monitor.max-regions (\(error.limit)); nothing changed")
            }
            defined.append(region.identifier)
        }
        if next.count > configuration.regionMonitor.maxRegions {
            throw DBusError(Errors.invalidConfiguration,
                            "\(next.count) regions exceed region-monitor.max-regions (\(configuration.regionMonitor.maxRegions)); stop some first; nothing changed")
        }
        let nextAlerts = try reconfiguredAlerts(configuration)
        let nextProfile = try reconfiguredProfile(configuration)
        // Every file first; should a later one fail, the earlier ones are written back as they
        // were, and nothing changes.
        try saveRegions(next)
        do {
            try saveAlerts(nextAlerts.0, sources: nextAlerts.1, force: true)
            try saveProfile(nextProfile)
        } catch {
            try? saveRegions(regions)
            try? saveAlerts(alerts, sources: alertSources, force: true)
            throw error
        }
        regions = next
        let alertSequence = commitAlerts(nextAlerts)
        let profileSequence = commitProfile(nextProfile)
        reconfigureClearInterval(configuration.clearInterval)
        reconfigureRSSIOffset(configuration.rssiOffset)
        if !removed.isEmpty || !defined.isEmpty {
            logger.info("regions of the config file applied", metadata: ["defined": "\(defined.count)", "removed": "\(removed.count)"])
        }
        let regionSequence = publishRegions(RegionChanges(sequence: 0, removed: removed, defined: defined.compactMap { regions.status(of: $0) },
                                                          events: determined))
        return max(regionSequence, alertSequence ?? 0, profileSequence)
    }
}

extension RegionStore {
    var exists: Bool { FileManager.default.fileExists(atPath: state.file(Self.fileName).path) }
}
