import ProximityCore

/// One ranging scheme as the benchmarks drive it: every received advertisement goes to `observe`,
/// and once a second (the node's report interval) `report` says the zone and, when the scheme has
/// one, the distance. `.unknown` means "not present" (never seen, or departed).
public protocol Pipeline {
    mutating func observe(_ rssi: Double, at t: Double)
    mutating func report(at t: Double) -> (zone: Proximity, distance: Double?)
}

/// The node as a pipeline: the found-devices table with a ranging configuration (the default one
/// unless tuning), ranging one peer whose advertisements say `measuredPower`.
public struct NodePipeline: Pipeline {
    public var table: FoundDevicesTable
    public let measuredPower: Double
    public let peer: PeerID

    public init(configuration: RangingConfiguration = RangingConfiguration(), measuredPower: Double, peer: PeerID = "walker") {
        table = FoundDevicesTable(configuration: configuration)
        self.measuredPower = measuredPower
        self.peer = peer
    }

    public mutating func observe(_ rssi: Double, at t: Double) {
        // The peer's advertisement says its measured power (as a beacon frame's Tx power does).
        table.observe(peer, rssi: rssi, at: t, measuredPower: measuredPower)
    }

    /// The peer's zone and, unless unknown (not heard, or stale), its distance.
    public mutating func report(at t: Double) -> (zone: Proximity, distance: Double?) {
        let zone = table.tick(at: t).zones[peer] ?? .unknown
        return (zone, zone == .unknown ? nil : table.peers[peer]?.distance)
    }
}

extension Pipeline {
    /// Feeds `samples` (in time order) to the pipeline with a report at `firstTick` and every
    /// second after it up to `duration`: each report after the samples up to its time. Calls
    /// `onTick` with each report.
    public mutating func drive(_ samples: [Sample], firstTick: Double, through duration: Double,
                               onTick: (Double, Proximity, Double?) -> Void) {
        var i = 0
        var tick = firstTick
        while tick <= duration {
            while i < samples.count, samples[i].t <= tick {
                observe(samples[i].rssi, at: samples[i].t)
                i += 1
            }
            let report = report(at: tick)
            onTick(tick, report.zone, report.distance)
            tick += 1
        }
    }
}
