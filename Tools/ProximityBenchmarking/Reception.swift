import BlueZSim

/// One received advertisement.
public struct Sample: Sendable, Hashable {
    public var t: Double
    public var rssi: Double

    public init(t: Double, rssi: Double) {
        self.t = t
        self.rssi = rssi
    }
}

/// What each listener hears of one transmitter moving along `trajectory` for `duration` seconds:
/// received advertisements, in time order, one list per listener. Virtual time only.
///
/// The transmitter advertises every interval plus the spec's 0–10 ms advDelay (one schedule,
/// stream `adv <transmitter>`), and stops at `silentFrom` when given. Each event goes to every
/// listener through the air's sampling function (``RadioModel/receive(from:at:time:measuredPower:txOffset:link:)``)
/// on that listener's ``RadioLink``: stream `link <transmitter>-><listener>` for loss and
/// shadowing; on the realistic preset the link's realistic state (the transmitter's and the
/// listener's offsets and the link's field, from `installation`, the seed of what is fixed in a
/// home; its time-varying part from stream `realistic <realisticLabel><transmitter>-><listener>`
/// of `installation`); with bursts, its burst process (stream `burst <transmitter>-><listener>`).
/// Streams other than the realistic one are derived from `rng`.
public func receptions(of transmitter: String, along trajectory: Trajectory, by listeners: [(name: String, position: Position)],
                       duration: Double, silentFrom: Double? = nil, radio: RadioModel, installation: UInt64,
                       realisticLabel: String = "", rng: SeededGenerator) -> [[Sample]] {
    var advertising = rng.derived("adv \(transmitter)")
    let realistic = radio.parameters.realistic
    let interval = radio.parameters.advertisingInterval
    var links = listeners.map { listener in
        RadioLink(
            rng: rng.derived("link \(transmitter)->\(listener.name)"),
            realistic: realistic.isOff ? nil
                : realistic.link(seed: installation, stream: "realistic \(realisticLabel)\(transmitter)->\(listener.name)",
                                 from: transmitter, to: listener.name),
            burst: radio.parameters.burstLossRate > 0
                ? radio.burstProcess(using: rng.derived("burst \(transmitter)->\(listener.name)")) : nil)
    }
    var samples = Array(repeating: [Sample](), count: listeners.count)
    for i in samples.indices { samples[i].reserveCapacity(Int(duration / interval) + 1) }
    var t = advertising.uniform(0...interval)
    while t < duration {
        if let silentFrom, t >= silentFrom { break }
        let p = trajectory.position(at: t)
        for i in listeners.indices {
            if let rssi = radio.receive(from: p, at: listeners[i].position, time: t, link: &links[i]) {
                samples[i].append(Sample(t: t, rssi: Double(rssi)))
            }
        }
        t = radio.nextAdvertisement(after: t, interval: interval, using: &advertising)
    }
    return samples
}
