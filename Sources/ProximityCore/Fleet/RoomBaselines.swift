import Foundation

/// room-assistant's room, as the baseline of `fleet-bench`: the node reporting the smallest
/// distance among the nodes heard within ``timeout`` (60 s), re-evaluated at every report and
/// tick, without hysteresis; not_home when no node has reported the device within the timeout.
/// (room-assistant's `RoomPresenceDistanceSensor`: the closest instance whose distance is not
/// older than the timeout.)
public struct NearestInRange: RoomRule {
    /// Seconds a node's last report counts. Valid: > 0.
    public let timeout: Double
    public var name: String { "nearest" }
    private var readings: [String: [String: NodeReading]] = [:]
    private var rooms: [String: String] = [:]
    private var now = -Double.infinity

    public init(timeout: Double = 60) {
        precondition(timeout > 0 && timeout.isFinite, "the timeout must be positive")
        self.timeout = timeout
    }

    public var devices: [String] { readings.keys.sorted() }
    public func room(of device: String) -> String? { rooms[device] }
    public func readings(of device: String) -> [NodeReading] {
        (readings[device] ?? [:]).values.sorted { ($0.distance, $0.node) < ($1.distance, $1.node) }
    }

    public mutating func observe(device: String, node: String, distance: Double, at t: Double) -> [RoomDecision] {
        guard distance.isFinite, distance >= 0 else { return [] }
        now = max(now, t)
        if let old = readings[device]?[node], old.at > t { return [] }
        readings[device, default: [:]][node] = NodeReading(node: node, distance: distance, at: min(t, now))
        return update(device)
    }

    public mutating func tick(at t: Double) -> [RoomDecision] {
        now = max(now, t)
        return readings.keys.sorted().flatMap { update($0) }
    }

    public mutating func forget(node: String, at t: Double) -> [RoomDecision] {
        now = max(now, t)
        var decisions: [RoomDecision] = []
        for device in readings.keys.sorted() where readings[device]?[node] != nil {
            readings[device]![node] = nil
            decisions += update(device)
        }
        return decisions
    }

    private mutating func update(_ device: String) -> [RoomDecision] {
        let inRange = (readings[device] ?? [:]).filter { now - $0.value.at < timeout }
        let room = inRange.values.min { ($0.distance, $0.node) < ($1.distance, $1.node) }?.node
        readings[device] = inRange.isEmpty ? nil : inRange
        let previous = rooms[device]
        rooms[device] = room
        guard room != previous else { return [] }
        return [RoomDecision(device: device, room: room, previous: previous, at: now,
                             reason: room == nil ? .away : previous == nil ? .arrived : .nearer)]
    }
}

/// Bermuda's area selection (Home Assistant integration agittins/bermuda, `coordinator.py`
/// `_refresh_area_by_min_distance` and `bermuda_advert.py` `calculate_data`, as of 2026-07), as the
/// baseline of `fleet-bench`. What the code does, once per update cycle (``tick(at:)``, Bermuda's
/// 1.05 s), per device:
///
/// 1. Per node (Bermuda's "advert"), `calculate_data`: a node with a new report and no distance
///    takes the report as is, with a fresh history; a node without a new report whose last report is
///    older than `DISTANCE_TIMEOUT` (30 s) loses its distance and history; otherwise the last
///    report's distance is pushed on the per-cycle history `hist_distance_by_interval` (newest
///    first, kept to `smoothing_samples`, 20) — or the previous entry again when the last reports
///    imply a retreat faster than `max_velocity` (3 m/s) — and the distance used, `rssi_distance`,
///    is the mean over the history of the running minimum from the newest back (so it follows an
///    approach at once and a retreat slowly), or the last report if that is smaller.
/// 2. The area: starting from the incumbent (the current area's node), each other node in turn
///    challenges the winner so far. A challenger cannot win with a report older than
///    `AREA_MAX_AD_AGE` (10 s), without a distance, or beyond `max_area_radius` (20 m). An
///    incumbent without a distance loses to any valid challenger. A challenger that is not nearer
///    loses. With pd = |d_c − d_i| / ((d_c + d_i)/2), it wins when it has more than 3 cycles of
///    history, its farthest distance over the last 5 cycles is below the incumbent's nearest over
///    them, and pd > 0.15 ("historical"); else when pd ≥ 0.30 ("outright").
/// 3. The device's area is the winner's, if it has a distance; else none (here: not_home).
///
/// Simplifications: Bermuda's raw distance comes from one advertisement's RSSI; here it is the
/// node's reported distance (already filtered by the node), and a report is Bermuda's "advert
/// stamp". The same-area test is left out (one node per room). The device tracker's own away
/// timeout is not modelled: the room is nil once no node has a distance (30 s after its last
/// report). ``smoothingSamples`` 1 turns step 1's smoothing off (the rule on the reported
/// distances alone).
public struct BermudaRule: RoomRule {
    /// `DISTANCE_TIMEOUT`: a node's distance is dropped this long after its last report, seconds.
    public static let distanceTimeout = 30.0
    /// `AREA_MAX_AD_AGE` = max(DISTANCE_TIMEOUT / 3, 2 × UPDATE_INTERVAL): older reports cannot win.
    public static let areaMaxAdAge = max(distanceTimeout / 3, 2 * 1.05)
    /// `DEFAULT_MAX_RADIUS`, metres.
    public static let maxRadius = 20.0
    /// `DEFAULT_MAX_VELOCITY`, m/s.
    public static let maxVelocity = 3.0
    /// `HIST_KEEP_COUNT`: reports kept per node for the velocity check.
    public static let histKeepCount = 10
    /// The outright and historical percentage differences, the history the historical test needs
    /// (more than `minHistory` entries) and the window it compares.
    public static let pdiffOutright = 0.30, pdiffHistorical = 0.15
    public static let minHistory = 3, historyWindow = 5

    /// `smoothing_samples` (default 20): the per-cycle history's length.
    public let smoothingSamples: Int
    public let name: String

    /// One node's view of one device (Bermuda's `BermudaAdvert`).
    struct Advert: Sendable {
        var node: String
        var stamp: Double
        var newStamp: Double?
        var raw: Double
        var distance: Double?
        /// Per cycle, newest first.
        var history: [Double] = []
        /// Per report, newest first (`hist_distance`, `hist_stamp`).
        var reports: [(distance: Double, at: Double)] = []
    }

    struct Device: Sendable {
        /// In order of first report (Python's dict order).
        var adverts: [Advert] = []
        var area: String?
    }

    private var state: [String: Device] = [:]
    private var now = -Double.infinity

    public init(smoothingSamples: Int = 20, name: String = "bermuda") {
        precondition(smoothingSamples >= 1, "at least one sample")
        self.smoothingSamples = smoothingSamples
        self.name = name
    }

    public var devices: [String] { state.keys.sorted() }
    public func room(of device: String) -> String? { state[device]?.area }
    public func readings(of device: String) -> [NodeReading] {
        (state[device]?.adverts ?? []).compactMap { a in a.distance.map { NodeReading(node: a.node, distance: $0, at: a.stamp) } }
            .sorted { ($0.distance, $0.node) < ($1.distance, $1.node) }
    }

    /// A report only updates the node's advert; the area is decided at the next cycle.
    public mutating func observe(device: String, node: String, distance: Double, at t: Double) -> [RoomDecision] {
        guard distance.isFinite, distance >= 0 else { return [] }
        now = max(now, t)
        var d = state[device] ?? Device()
        if let i = d.adverts.firstIndex(where: { $0.node == node }) {
            guard d.adverts[i].stamp <= t else { return [] }
            d.adverts[i].stamp = t
            d.adverts[i].newStamp = t
            d.adverts[i].raw = distance
            d.adverts[i].reports.insert((distance, t), at: 0)
            if d.adverts[i].reports.count > Self.histKeepCount { d.adverts[i].reports.removeLast() }
        } else {
            d.adverts.append(Advert(node: node, stamp: t, newStamp: t, raw: distance, reports: [(distance, t)]))
        }
        state[device] = d
        return []
    }

    public mutating func tick(at t: Double) -> [RoomDecision] {
        now = max(now, t)
        var decisions: [RoomDecision] = []
        for id in state.keys.sorted() {
            var d = state[id]!
            for i in d.adverts.indices { calculate(&d.adverts[i]) }
            if let decision = selectArea(id, &d) { decisions.append(decision) }
            // A device no node has a distance for, and not home, is dropped.
            state[id] = d.area == nil && d.adverts.allSatisfy({ $0.distance == nil }) ? nil : d
        }
        return decisions
    }

    public mutating func forget(node: String, at t: Double) -> [RoomDecision] {
        now = max(now, t)
        var decisions: [RoomDecision] = []
        for id in state.keys.sorted() where state[id]!.adverts.contains(where: { $0.node == node }) {
            var d = state[id]!
            d.adverts.removeAll { $0.node == node }
            if let decision = selectArea(id, &d) { decisions.append(decision) }
            state[id] = d
        }
        return decisions
    }

    /// `BermudaAdvert.calculate_data`.
    private func calculate(_ a: inout Advert) {
        let newStamp = a.newStamp
        a.newStamp = nil
        if a.distance == nil, newStamp != nil {
            a.distance = a.raw
            a.history = [a.raw]
        } else if newStamp == nil, a.stamp < now - Self.distanceTimeout {
            a.distance = nil
            a.history = []
        } else {
            var velocity = 0.0
            if a.reports.count > 1 {
                let (d0, t0) = a.reports[0]
                var peak = 0.0
                if t0 - a.reports[1].at > 0 { peak = (d0 - a.reports[1].distance) / (t0 - a.reports[1].at) }
                if peak >= 0 {
                    for old in a.reports.dropFirst(2) {
                        let dt = t0 - old.at
                        guard dt > 0 else { continue }
                        peak = max(peak, (d0 - old.distance) / dt)
                    }
                }
                velocity = peak
            }
            if velocity > Self.maxVelocity {
                a.history.insert(a.history.first ?? a.raw, at: 0)
            } else {
                a.history.insert(a.raw, at: 0)
            }
            if a.history.count > smoothingSamples { a.history.removeLast(a.history.count - smoothingSamples) }
            var total = 0.0
            var localMin = a.raw
            for d in a.history {
                if d <= localMin { localMin = d }
                total += localMin
            }
            let average = a.history.isEmpty ? localMin : total / Double(a.history.count)
            a.distance = average < a.raw ? average : a.raw
        }
    }

    /// `_refresh_area_by_min_distance` and `apply_scanner_selection`.
    private func selectArea(_ id: String, _ d: inout Device) -> RoomDecision? {
        var incumbent = d.adverts.firstIndex { $0.node == d.area }
        for c in d.adverts.indices where c != incumbent {
            let challenger = d.adverts[c]
            guard challenger.stamp >= now - Self.areaMaxAdAge,
                  let dc = challenger.distance, dc <= Self.maxRadius else { continue }
            guard let i = incumbent, let di = d.adverts[i].distance else {
                incumbent = c
                continue
            }
            if di < dc { continue }
            let pd = abs(dc - di) / ((dc + di) / 2)
            if challenger.history.count > Self.minHistory, !d.adverts[i].history.isEmpty {
                let incumbentNearest = d.adverts[i].history.prefix(Self.historyWindow).min()!
                let challengerFarthest = challenger.history.prefix(Self.historyWindow).max()!
                if challengerFarthest < incumbentNearest && pd > Self.pdiffHistorical {
                    incumbent = c
                    continue
                }
            }
            if pd < Self.pdiffOutright { continue }
            incumbent = c
        }
        let area = incumbent.flatMap { d.adverts[$0].distance == nil ? nil : d.adverts[$0].node }
        let previous = d.area
        d.area = area
        guard area != previous else { return nil }
        let reason: RoomDecision.Reason
        if area == nil { reason = .away }
        else if previous == nil { reason = .arrived }
        else if !d.adverts.contains(where: { $0.node == previous && $0.distance != nil }) { reason = .stale }
        else { reason = .nearer }
        return RoomDecision(device: id, room: area, previous: previous, at: now, reason: reason)
    }
}

/// The room rules `fleet-bench` compares, by name (for a `--rule` option).
public enum RoomRuleKind: String, Sendable, Hashable, CaseIterable, Codable {
    case fleet, nearest, bermuda

    /// A new rule of this kind with its defaults.
    public func make() -> any RoomRule {
        switch self {
        case .fleet: RoomDecider()
        case .nearest: NearestInRange()
        case .bermuda: BermudaRule()
        }
    }
}

/// Home Assistant's `mqtt_room` sensor, as a baseline of `fleet-bench`: at each report of the
/// device, the room changes to the reporting node's when the sensor has no room yet, or the report
/// is from its room, or it is nearer than the sensor's last distance, or the sensor's last update
/// is ``timeout`` old (Home Assistant's default: 5 s). Nothing happens between reports
/// (`away_timeout` is 0 by default: the device is never not_home). A node whose heartbeat is as
/// long as the timeout makes a device standing near one node and farther from another flap:
/// the far node's report arrives once the near one is `timeout` old.
public struct MQTTRoomSensor: RoomRule {
    public let timeout: Double
    public var name: String { "mqtt_room" }
    private struct Sensor {
        var room: String
        var distance: Double
        var updated: Double
        var readings: [String: NodeReading]
    }
    private var sensors: [String: Sensor] = [:]

    public init(timeout: Double = 5) {
        precondition(timeout >= 0 && timeout.isFinite, "the timeout must be 0 or more")
        self.timeout = timeout
    }

    public var devices: [String] { sensors.keys.sorted() }
    public func room(of device: String) -> String? { sensors[device]?.room }
    public func readings(of device: String) -> [NodeReading] {
        (sensors[device]?.readings ?? [:]).values.sorted { ($0.distance, $0.node) < ($1.distance, $1.node) }
    }

    public mutating func observe(device: String, node: String, distance: Double, at t: Double) -> [RoomDecision] {
        guard distance.isFinite, distance >= 0 else { return [] }
        let reading = NodeReading(node: node, distance: distance, at: t)
        guard var sensor = sensors[device] else {
            sensors[device] = Sensor(room: node, distance: distance, updated: t, readings: [node: reading])
            return [RoomDecision(device: device, room: node, previous: nil, at: t, reason: .arrived)]
        }
        sensor.readings[node] = reading
        let previous = sensor.room
        let nearer = distance < sensor.distance
        if node == sensor.room || nearer || t - sensor.updated >= timeout {
            sensor.room = node
            sensor.distance = distance
            sensor.updated = t
        }
        sensors[device] = sensor
        guard sensor.room != previous else { return [] }
        return [RoomDecision(device: device, room: sensor.room, previous: previous, at: t, reason: nearer ? .nearer : .stale)]
    }

    public mutating func tick(at t: Double) -> [RoomDecision] { [] }

    /// `mqtt_room` knows nothing of the nodes' availability.
    public mutating func forget(node: String, at t: Double) -> [RoomDecision] { [] }
}
