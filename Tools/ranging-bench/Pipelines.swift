import Foundation
import ProximityBenchmarking
import ProximityCore

/// How a pipeline's zones are scored.
enum ZoneTruth: String, Codable, Sendable {
    /// Against the true distance and the 0.5 m / 3 m thresholds.
    case metres
    /// In the scheme's own terms: its RSSI thresholds applied to the noise-free mean RSSI at the
    /// true distance (AltBeacon iOS has RSSI zones, not metres).
    case ownRSSIThresholds
}

enum PipelineRole: String, Codable, Sendable {
    /// `reference`: the node as it was before a change, for comparison in the same run.
    case node, baseline, reference, filterOnly
}

/// A pipeline and how to judge it.
struct PipelineSpec: Sendable {
    var name: String
    var role: PipelineRole
    var truth: ZoneTruth
    var hasDistance: Bool
    /// Its departure rule, for the report; nil when departure is not scored.
    var departureRule: String?
    var make: @Sendable (RadioCondition) -> any Pipeline
    /// The zone it settles on for a noise-free RSSI (used to find its own boundaries).
    var noiseFreeZone: @Sendable (_ rssi: Double, _ measuredPower: Double) -> Proximity
}

// MARK: - AltBeacon iOS (v0.3, the seed)

/// The AltBeacon iOS library as its v0.3 source does it (`AltBeacon.m`):
/// - each sighting first drops the "aging" marks (−205), appends the RSSI and keeps the last 10;
///   the very first sighting of a peripheral only creates its (empty) list;
/// - once a second `calculateRanges` sums the list (a value above −25 is replaced by the mean so
///   far, or −55) and divides by 10 — not by the count;
/// - zones: < −200 unknown, < −90 far, < −72 near, < 0 immediate (so RSSI ≥ −72 is immediate);
/// - after each report a −205 aging mark is appended to every list: a silent peripheral's mean
///   sinks by 20.5 dB a second until it is below −200, which is how it departs.
/// v0.3 no longer schedules the 0.2 API's `clearFoundDevicesInterval` timer (`clearValues:` is
/// never called, and the detected list is refilled at every report), so aging is its departure
/// rule. The scheme has no distance.
struct AltBeaconIOSPipeline: Pipeline {
    var values: [Double] = []
    var seen = false
    static let agingMark = -205.0

    mutating func observe(_ rssi: Double, at t: Double) {
        guard seen else {
            seen = true
            return
        }
        values.removeAll { $0 <= Self.agingMark }
        values.append(rssi)
        if values.count > 10 { values.removeFirst(values.count - 10) }
    }

    mutating func report(at t: Double) -> (zone: Proximity, distance: Double?) {
        guard seen else { return (.unknown, nil) }
        var sum = 0.0, i = 0.0
        for value in values {
            if value > -25 {
                var replacement = i > 0 ? sum / i : 0
                if replacement > -25 { replacement = -55 }
                sum += replacement
            } else {
                sum += value
            }
            i += 1
        }
        let zone = Self.zone(sum / 10)
        values.append(Self.agingMark)
        return (zone, nil)
    }

    static func zone(_ proximity: Double) -> Proximity {
        if proximity < -200 { return .unknown }
        if proximity < -90 { return .far }
        if proximity < -72 { return .near }
        if proximity < 0 { return .immediate }
        return .unknown
    }
}

/// The AltBeacon iOS 0.2 departure rule, for the departure table only: the found-devices list is
/// cleared by a free-running timer every `clearInterval` seconds, whatever each peer is doing.
struct AltBeaconIOSClearTimerPipeline: Pipeline {
    let clearInterval: Double
    let phase: Double
    var lastSeen: Double?
    var lastClear: Double = 0

    mutating func observe(_ rssi: Double, at t: Double) { lastSeen = t }

    mutating func report(at t: Double) -> (zone: Proximity, distance: Double?) {
        // The most recent clear at or before t.
        let clears = ((t - phase) / clearInterval).rounded(.down)
        let clearedAt = phase + clears * clearInterval
        guard let lastSeen, lastSeen > clearedAt || clears < 0 else { return (.unknown, nil) }
        return (.near, nil)  // present: the zone itself is not scored here
    }
}

// MARK: - Android Beacon Library

/// The Android Beacon Library's defaults: `RunningAverageRssiFilter` (20 s, trimmed), the Nexus 4
/// curve, zones by the 0.5 m / 3 m thresholds without hysteresis, and region exit after
/// `regionExitPeriod` (10 s) without a sighting.
struct AndroidBeaconLibraryPipeline: Pipeline {
    var filter = TrimmedRunningAverageFilter(window: 20)
    let measuredPower: Double
    var lastSeen: Double?
    static let regionExitPeriod = 10.0

    mutating func observe(_ rssi: Double, at t: Double) {
        filter.add(rssi, at: t)
        lastSeen = t
    }

    mutating func report(at t: Double) -> (zone: Proximity, distance: Double?) {
        guard let lastSeen, t - lastSeen <= Self.regionExitPeriod, let rssi = filter.estimate(at: t) else {
            return (.unknown, nil)
        }
        let d = CurveFittedDistanceModel.androidBeaconLibrary.distance(rssi: rssi, measuredPower: measuredPower)
        return (ZoneThresholds().zone(forDistance: d), d)
    }
}

// MARK: - room-assistant

/// room-assistant's BLE integration: kalmanjs (R 0.8, Q 15) per sample, its curve, the distance
/// rounded to 0.1 m (`_.round(d, 1)`), zones by the thresholds without hysteresis, and `not_home`
/// once the last distance is `timeout` (5 s) old. room-assistant checks the timeout on a
/// `timeout`-second interval timer; here it is checked at every tick, which can only make it
/// faster.
struct RoomAssistantPipeline: Pipeline {
    var filter = RoomAssistantKalmanFilter()
    let measuredPower: Double
    var distance: Double?
    var lastUpdate: Double?
    static let timeout = 5.0

    mutating func observe(_ rssi: Double, at t: Double) {
        filter.add(rssi, at: t)
        let smoothed = filter.estimate(at: t) ?? rssi
        distance = Self.distance(smoothed, measuredPower: measuredPower)
        lastUpdate = t
    }

    static func distance(_ rssi: Double, measuredPower: Double) -> Double {
        (CurveFittedDistanceModel.roomAssistant.distance(rssi: rssi, measuredPower: measuredPower) * 10).rounded() / 10
    }

    mutating func report(at t: Double) -> (zone: Proximity, distance: Double?) {
        guard let lastUpdate, let distance, t < lastUpdate + Self.timeout else { return (.unknown, nil) }
        return (ZoneThresholds().zone(forDistance: distance), distance)
    }
}

// MARK: - Filter only

/// A filter with the node's distance model and plain thresholds (no hysteresis, no dwell): to
/// compare the filters alone, all calibrated the same way. Departure is not scored.
struct FilterOnlyPipeline: Pipeline {
    var filter: any RSSIFilter
    let measuredPower: Double
    let model = LogDistanceModel()
    var lastSeen: Double?
    let clearInterval: Double

    mutating func observe(_ rssi: Double, at t: Double) {
        filter.add(rssi, at: t)
        lastSeen = t
    }

    mutating func report(at t: Double) -> (zone: Proximity, distance: Double?) {
        guard let lastSeen, t - lastSeen <= clearInterval, let rssi = filter.estimate(at: t) else { return (.unknown, nil) }
        let d = model.distance(rssi: rssi, measuredPower: measuredPower)
        return (ZoneThresholds().zone(forDistance: d), d)
    }
}

// MARK: - The set

enum Pipelines {
    static let thresholds = ZoneThresholds()

    static func node(_ name: String = "node", role: PipelineRole = .node,
                     configuration: @escaping @Sendable () -> RangingConfiguration) -> PipelineSpec {
        let c = configuration()
        return PipelineSpec(
            name: name, role: role, truth: .metres, hasDistance: true,
            departureRule: "unknown once stale: unheard for max(\(format(c.minimumStale, 0)) s, \(format(c.staleGaps, 1)) × its usual gap, "
                + "the silence its holes say a present peer outlasts \(format(c.staleShare * 100, 1))% of the time); "
                + "removed after \(format(c.clearInterval, 0)) s (clearInterval)",
            // The node's table as fleet-bench's boxes run it too (ProximityBenchmarking's adapter).
            make: { NodePipeline(configuration: configuration(), measuredPower: $0.measuredPower) },
            noiseFreeZone: { rssi, power in c.thresholds.zone(forDistance: c.distanceModel.distance(rssi: rssi, measuredPower: power)) })
    }

    static let altBeaconIOS = PipelineSpec(
        name: "altbeacon-ios", role: .baseline, truth: .ownRSSIThresholds, hasDistance: false,
        departureRule: "v0.3 aging: −205 appended per report, unknown when sum/10 < −200",
        make: { _ in AltBeaconIOSPipeline() },
        noiseFreeZone: { rssi, _ in AltBeaconIOSPipeline.zone(rssi) })

    static let androidBeaconLibrary = PipelineSpec(
        name: "android-beacon-lib", role: .baseline, truth: .metres, hasDistance: true,
        departureRule: "region exit after 10 s without a sighting (regionExitPeriod)",
        make: { AndroidBeaconLibraryPipeline(measuredPower: $0.measuredPower) },
        noiseFreeZone: { rssi, power in
            thresholds.zone(forDistance: CurveFittedDistanceModel.androidBeaconLibrary.distance(rssi: rssi, measuredPower: power))
        })

    static let roomAssistant = PipelineSpec(
        name: "room-assistant", role: .baseline, truth: .metres, hasDistance: true,
        departureRule: "not_home when the last distance is 5 s old (timeout), checked every tick",
        make: { RoomAssistantPipeline(measuredPower: $0.measuredPower) },
        noiseFreeZone: { rssi, power in thresholds.zone(forDistance: RoomAssistantPipeline.distance(rssi, measuredPower: power)) })

    static func filterOnly(_ name: String, _ filter: @escaping @Sendable () -> any RSSIFilter) -> PipelineSpec {
        PipelineSpec(
            name: name, role: .filterOnly, truth: .metres, hasDistance: true, departureRule: nil,
            make: { FilterOnlyPipeline(filter: filter(), measuredPower: $0.measuredPower, clearInterval: 10) },
            noiseFreeZone: { rssi, power in thresholds.zone(forDistance: LogDistanceModel().distance(rssi: rssi, measuredPower: power)) })
    }

    /// The departure-only variant of AltBeacon iOS with the 0.2 clear timer.
    static func altBeaconIOSClearTimer(clearInterval: Double, phase: Double) -> any Pipeline {
        AltBeaconIOSClearTimerPipeline(clearInterval: clearInterval, phase: phase)
    }
}
