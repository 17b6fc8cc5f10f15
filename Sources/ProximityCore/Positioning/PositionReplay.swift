import Foundation

/// One RSSI sample of a recording: `time,node,device,rssi` (seconds, the node's name, the
/// device's identifier, dBm), with the device's true position when the recording has it.
public struct TraceSample: Sendable, Hashable {
    public var time: Double
    public var node: String
    public var device: String
    public var rssi: Double
    public var truth: PlanPoint?

    public init(time: Double, node: String, device: String, rssi: Double, truth: PlanPoint? = nil) {
        self.time = time
        self.node = node
        self.device = device
        self.rssi = rssi
        self.truth = truth
    }
}

/// A fleet played from its nodes' samples, exactly as live: each node's own ranging (the
/// found-devices table with the node's defaults) takes its samples, reports once a second and
/// publishes a device's report when the MQTT rate control lets it (``ReportThrottle``); the
/// fleet's positioning reads what was published, fresh for ``Configuration/staleAfter`` seconds.
/// Each estimate rests only on samples up to its time. Pure: samples in, estimates out.
public struct PositionReplay: Sendable {
    public struct Configuration: Sendable {
        /// The nodes' ranging, as `proximityd run` sets it by default.
        public var ranging = RangingConfiguration()
        /// The nodes' MQTT rate control (`report-interval`, `report-moved`).
        public var throttle = ReportThrottle.Configuration()
        /// A published report counts for this long, seconds.
        public var staleAfter = 12.0
        /// The RSSI at 1 m a node ranges a device with when nothing says otherwise, dBm.
        public var measuredPower = -59.0
        /// Whether the positioning reads each node's hearings of each second (``HeardSecond``,
        /// as `proximity-fleet` does from nodes that publish them), fresh for ``secondStale``
        /// seconds; false: the published peer reports, fresh for ``staleAfter``.
        public var seconds = true
        public var secondStale = HeardSecond.freshFor

        public init() {}
    }

    /// One estimate: at `time`, `device` is at `estimate` (nil: no node hears it, not_home).
    public struct Row: Sendable, Hashable {
        public var time: Double
        public var device: String
        public var estimate: PositionEstimate?
    }

    public let plan: FloorPlan
    public let configuration: Configuration
    private let makePositioner: @Sendable (String) -> any Positioner
    private var nodes: [String: NodeReporter] = [:]
    /// Device → node → what the node last published of it.
    private var hearings: [String: [String: NodeHearing]] = [:]
    private var positioners: [String: any Positioner] = [:]
    /// Every device seen so far, in order of first appearance.
    public private(set) var devices: [String] = []

    /// `positioner` makes a device's estimator (its identifier given).
    public init(plan: FloorPlan, configuration: Configuration = .init(), positioner: @escaping @Sendable (String) -> any Positioner) {
        self.plan = plan
        self.configuration = configuration
        makePositioner = positioner
    }

    /// A sample, in time order (a node's samples after those before them; nodes may interleave).
    /// Samples of a node the plan does not have are ranged but never placed.
    public mutating func add(_ sample: TraceSample) {
        if positioners[sample.device] == nil {
            positioners[sample.device] = makePositioner(sample.device)
            devices.append(sample.device)
        }
        var node = nodes.removeValue(forKey: sample.node)
            ?? NodeReporter(name: sample.node, ranging: configuration.ranging, throttle: configuration.throttle,
                            hearings: configuration.seconds)
        node.hear(sample.device, rssi: sample.rssi, at: sample.time, measuredPower: configuration.measuredPower)
        nodes[sample.node] = node
    }

    /// The reports due at `t` (a whole second, after every sample up to it), then one estimate
    /// per device seen so far.
    public mutating func step(at t: Double) -> [Row] {
        for name in nodes.keys.sorted() {
            var node = nodes.removeValue(forKey: name)!
            let report = node.hearings(at: t, seconds: configuration.seconds)
            for device in report.gone { hearings[device]?[name] = nil }
            for hearing in report.published { hearings[hearing.device, default: [:]][name] = hearing.hearing }
            nodes[name] = node
        }
        var rows: [Row] = []
        for device in devices {
            let stale = configuration.seconds ? configuration.secondStale : configuration.staleAfter
            let fresh = (hearings[device] ?? [:]).values.filter { t - $0.time < stale }.sorted { $0.node < $1.node }
            var positioner = positioners.removeValue(forKey: device)!
            rows.append(Row(time: t, device: device, estimate: fresh.isEmpty ? nil : positioner.estimate(fresh, at: t)))
            positioners[device] = positioner
        }
        return rows
    }

    /// Plays `samples` (sorted here by time, stably) and returns an estimate per device for each
    /// whole second from the first sample's to the last's.
    public static func play(_ samples: [TraceSample], plan: FloorPlan, configuration: Configuration = .init(),
                            positioner: @escaping @Sendable (String) -> any Positioner) -> [Row] {
        var rows: [Row] = []
        play(samples, plan: plan, configuration: configuration, positioner: positioner) { rows += $0 }
        return rows
    }

    /// As ``play(_:plan:configuration:positioner:)``, handing each second's rows to `each` as they
    /// come (a long trace's rows need not all be held).
    public static func play(_ samples: [TraceSample], plan: FloorPlan, configuration: Configuration = .init(),
                            positioner: @escaping @Sendable (String) -> any Positioner, each: ([Row]) -> Void) {
        var replay = PositionReplay(plan: plan, configuration: configuration, positioner: positioner)
        TraceSample.play(samples, add: { replay.add($0) }, second: { each(replay.step(at: $0)) })
    }
}

extension TraceSample {
    /// Plays `samples` second by second, as a live fleet lives them: sorted by time (stably), each
    /// handed to `add` once its time has come, then `second` at each whole second, from the first
    /// sample's to the last's (so each second rests only on samples up to it).
    public static func play(_ samples: [TraceSample], add: (TraceSample) -> Void, second: (Double) -> Void) {
        let sorted = samples.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        guard let first = sorted.first, let last = sorted.last else { return }
        var i = 0
        var t = first.time.rounded(.up)
        if t == first.time { t += 1 }
        while t <= last.time.rounded(.up) {
            while i < sorted.count, sorted[i].time <= t {
                add(sorted[i])
                i += 1
            }
            second(t)
            t += 1
        }
    }
}

/// One node as the fleet hears it, from its samples: its own ranging (the found-devices table),
/// a report each second, which of its peers the report publishes (``PeerPublishing``, the node's
/// own rate control and `gone`), and what it heard of each in that second (``HeardSecond``,
/// with `hearings`). What `proximity-fleet replay` plays for each node, and what
/// ``PositionReplay`` and a benchmark of the fleet's calibration read.
public struct NodeReporter: Sendable {
    public let name: String
    private var table: FoundDevicesTable
    private var publishing: PeerPublishing

    public init(name: String, ranging: RangingConfiguration = .init(), throttle: ReportThrottle.Configuration = .init(),
                hearings: Bool = false) {
        self.name = name
        table = FoundDevicesTable(configuration: ranging)
        table.collectsSeconds = hearings
        publishing = PeerPublishing(throttle: throttle)
    }

    /// A sample of `device`, in time order.
    public mutating func hear(_ device: String, rssi: Double, at t: Double, measuredPower: Double) {
        table.observe(PeerID(device), rssi: rssi, at: t, measuredPower: measuredPower,
                      details: PeerDetails(kind: Self.kind(of: device), address: ""))
    }

    /// The node's report at `t`, as the node makes it: every peer's snapshot, nearest first (what
    /// its hearings are made of), and the reports it publishes, then the peers no longer heard.
    public mutating func report(at t: Double) -> (peers: [PeerSnapshot], publications: [PeerPublishing.Publication]) {
        let report = table.tick(at: t)
        var peers = table.peers.values.compactMap { PeerSnapshot($0, name: "") }
        peers.sort { ($0.proximity, $0.distance, $0.identifier) < ($1.proximity, $1.distance, $1.identifier) }
        return (peers, publishing.publications(peers: peers, removed: report.removed, at: t))
    }

    /// The report at `t` as the positioning reads it: the hearings published now (with
    /// `seconds`, each peer's second instead of its published report), and the devices said gone.
    public mutating func hearings(at t: Double,
                                  seconds: Bool = false) -> (published: [(device: String, hearing: NodeHearing)], gone: [String]) {
        var published: [(String, NodeHearing)] = [], gone: [String] = []
        let (peers, publications) = report(at: t)
        if seconds {
            for p in peers {
                guard let h = p.heard else { continue }
                published.append((p.identifier.rawValue,
                                  NodeHearing(node: name, rssi: h.rssi, spread: h.spread, samples: h.count,
                                              measuredPower: Double(p.measuredPower), distance: p.distance, time: t)))
            }
        }
        for publication in publications {
            switch publication {
            case .report(let p):
                guard !seconds else { continue }
                published.append((p.identifier.rawValue,
                                  NodeHearing(node: name, rssi: p.smoothedRSSI, spread: p.spread, samples: p.samples,
                                              measuredPower: Double(p.measuredPower), distance: p.distance, time: t)))
            case .gone(let id): gone.append(id.rawValue)
            case .compatibility: break
            }
        }
        return (published, gone)
    }

    /// A device's kind from its identifier's form (`ibeacon:…`, `irk:…`); an iBeacon otherwise
    /// (a recording does not say, and only a node's kind changes what the fleet does).
    static func kind(of device: String) -> PeerKind {
        PeerKind.allCases.first { device.hasPrefix($0.rawValue + ":") } ?? .ibeacon
    }
}

/// How good a replay's estimates are against the truth: position errors (median, mean, p90, the
/// share within 1, 2 and 3 m; metres on the floor, plus the heights apart on the wrong floor),
/// rooms (accuracy, where no room counts as a room: a device in the corridor placed in none is
/// right; wrong, a room that is not the true one; unknown, no room where the truth has one), room
/// changes per minute (the estimates' against the truth's), the room changes of a device standing
/// still (per hour, after ``stillAfter`` seconds in place), and how late each room change comes:
/// from the first second in a new room to the first second the estimate names it (a change the
/// estimate misses before the device leaves again counts as infinitely late).
public struct PositionScore: Sendable, Hashable {
    public var errors: [Double] = []
    public var roomHits = 0
    public var roomTotal = 0
    public var roomWrong = 0
    public var roomUnknown = 0
    public var estimatedChanges = 0
    public var trueChanges = 0
    public var seconds = 0.0
    /// Seconds a device stood still (for ``stillAfter`` and more), and its estimate's room changes then.
    public var stillSeconds = 0.0
    public var stillChanges = 0
    /// Each true room change's lateness, seconds (infinity: missed).
    public var latencies: [Double] = []
    private var lastRoom: [String: Int??] = [:]
    private var lastTrueRoom: [String: Int?] = [:]
    private var lastTruth: [String: PlanPoint] = [:]
    private var stillSince: [String: Double] = [:]
    /// A device's true room change not yet named by its estimate: the room and when.
    private struct Pending: Sendable, Hashable {
        var room: Int?
        var since: Double
    }
    private var pending: [String: Pending] = [:]
    private var clock: [String: Double] = [:]

    /// A device counts as standing still after this long in place, seconds.
    public static let stillAfter = 30.0

    public init() {}

    /// One estimate against the truth at its time (`truth` nil: unknown, not scored). Each row is
    /// a second of one device.
    public mutating func add(device: String, estimate: PositionEstimate?, truth: PlanPoint?, plan: FloorPlan) {
        guard let truth else { return }
        seconds += 1
        let now = (clock[device] ?? 0) + 1
        clock[device] = now
        let floor = plan.floor(atHeight: truth.z)
        let trueRoom = plan.room(x: truth.x, y: truth.y, floor: floor)
        if let previous = lastTrueRoom[device], previous != trueRoom {
            trueChanges += 1
            if let p = pending[device], p.room != nil { latencies.append(.infinity) }
            pending[device] = Pending(room: trueRoom, since: now)
        }
        lastTrueRoom[device] = trueRoom
        if let before = lastTruth[device], before.distance2D(to: truth) > 0.05 { stillSince[device] = now }
        if stillSince[device] == nil { stillSince[device] = now }
        lastTruth[device] = truth
        let still = now - stillSince[device]! >= Self.stillAfter
        if still { stillSeconds += 1 }
        let room = estimate?.room
        if let previous = lastRoom[device], previous != .some(room) {
            estimatedChanges += 1
            if still { stillChanges += 1 }
        }
        lastRoom[device] = .some(room)
        if let p = pending[device], room == p.room {
            if p.room != nil { latencies.append(now - p.since) }
            pending[device] = nil
        }
        roomTotal += 1
        if room == trueRoom { roomHits += 1 } else if room != nil { roomWrong += 1 } else { roomUnknown += 1 }
        if let estimate {
            // On the wrong floor, the heights apart count too.
            errors.append(estimate.position.distance2D(to: truth) + (estimate.floor == floor ? 0 : abs(estimate.position.z - truth.z)))
        }
    }

    public var median: Double { quantile(0.5) }
    public var p90: Double { quantile(0.9) }
    public var p95: Double { quantile(0.95) }
    public var mean: Double { errors.isEmpty ? .nan : errors.reduce(0, +) / Double(errors.count) }
    public func within(_ metres: Double) -> Double {
        errors.isEmpty ? .nan : Double(errors.filter { $0 <= metres }.count) / Double(errors.count)
    }
    public var roomAccuracy: Double { roomTotal == 0 ? .nan : Double(roomHits) / Double(roomTotal) }
    public var wrongRoom: Double { roomTotal == 0 ? .nan : Double(roomWrong) / Double(roomTotal) }
    public var unknownRoom: Double { roomTotal == 0 ? .nan : Double(roomUnknown) / Double(roomTotal) }
    public var changesPerMinute: Double { seconds == 0 ? .nan : Double(estimatedChanges) * 60 / seconds }
    public var trueChangesPerMinute: Double { seconds == 0 ? .nan : Double(trueChanges) * 60 / seconds }
    /// The estimate's room changes per hour while the device stood still.
    public var stillChangesPerHour: Double { stillSeconds == 0 ? .nan : Double(stillChanges) * 3600 / stillSeconds }
    /// The `q` quantile of the room-change latencies, seconds (infinity: a missed change).
    public func latency(_ q: Double) -> Double {
        guard !latencies.isEmpty else { return .nan }
        let sorted = latencies.sorted()
        return sorted[min(sorted.count - 1, Int(q * Double(sorted.count)))]
    }

    /// Another score's rows, as if added here (each device's own history stays its own).
    public mutating func merge(_ other: PositionScore) {
        errors += other.errors
        roomHits += other.roomHits; roomTotal += other.roomTotal; roomWrong += other.roomWrong; roomUnknown += other.roomUnknown
        estimatedChanges += other.estimatedChanges; trueChanges += other.trueChanges; seconds += other.seconds
        stillSeconds += other.stillSeconds; stillChanges += other.stillChanges; latencies += other.latencies
    }

    func quantile(_ q: Double) -> Double {
        guard !errors.isEmpty else { return .nan }
        let sorted = errors.sorted()
        return sorted[min(sorted.count - 1, Int(q * Double(sorted.count)))]
    }
}

/// How late the estimates are: each one's error against where the device truly was `k` seconds
/// before, for k from 0 to ``maxLag``. A tracker that follows a walk 8 s late is closest to where
/// the device was 8 s ago, so the lag with the smallest median error is how late it comes (error
/// alone hides it: a late track along a straight walk is a small error, and a wrong one at every
/// turn). Devices standing still look the same at every lag; ties go to the shortest lag.
public struct LatenessScore: Sendable, Hashable {
    public let maxLag: Int
    private var errors: [[Double]]

    public init(maxLag: Int = 15) {
        self.maxLag = maxLag
        errors = Array(repeating: [], count: maxLag + 1)
    }

    /// An estimate, and the truth `k` seconds before it (nil where unknown).
    public mutating func add(_ estimate: PlanPoint, truthBefore: (Int) -> PlanPoint?) {
        for k in 0 ... maxLag {
            if let truth = truthBefore(k) { errors[k].append(estimate.distance2D(to: truth)) }
        }
    }

    /// The median error against the truth `k` seconds before.
    public func median(atLag k: Int) -> Double {
        guard errors.indices.contains(k), !errors[k].isEmpty else { return .nan }
        let sorted = errors[k].sorted()
        return sorted[sorted.count / 2]
    }

    /// The lag with the smallest median error (within 1 cm of the smallest, the shortest); nil
    /// without estimates.
    public var bestLag: Int? {
        let medians = (0 ... maxLag).map { median(atLag: $0) }
        guard let least = medians.filter(\.isFinite).min() else { return nil }
        return medians.firstIndex { $0.isFinite && $0 <= least + 0.01 }
    }
}

