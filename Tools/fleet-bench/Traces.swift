import ArgumentParser
import BlueZSim
import Foundation
import ProximityCore

/// The radio of one benchmark condition: the simulator's parameters for every device→box link
/// (ranging-bench's `RadioCondition`).
struct RadioCondition: Hashable, Codable, Sendable {
    /// The simple model (log-distance, independent Gaussian shadowing and loss), or bluez-sim's
    /// realistic preset (device offsets, a shadowing field, AR(1) shadowing, channel offsets,
    /// outliers, bursty loss; docs/simulator.md), whose own σ and losses replace `sigma` and `loss`.
    /// `calibrated` is the realistic preset with every node calibrated for the device: its
    /// measured power is what `proximityctl calibrate` finds at 1 m, the device's and the box's
    /// offsets (the shadowing field and the channel offsets remain).
    enum Kind: String, Hashable, Codable, Sendable, CaseIterable, ExpressibleByArgument {
        case simple, realistic, calibrated
    }

    var sigma: Double
    var exponent: Double
    var interval: Double
    var loss: Double
    var measuredPower: Double
    var kind: Kind

    var model: RadioModel {
        var parameters: RadioParameters
        switch kind {
        case .simple:
            parameters = RadioParameters(pathLossExponent: exponent, measuredPower: measuredPower, shadowingSigma: sigma,
                                         advertisingInterval: interval, packetLoss: loss)
        case .realistic, .calibrated:
            parameters = .realistic
            parameters.pathLossExponent = exponent
            parameters.measuredPower = measuredPower
            parameters.advertisingInterval = interval
        }
        return RadioModel(parameters)
    }

    var label: String {
        switch kind {
        case .simple:
            "simple σ=\(format(sigma, 0)) dB, n=\(format(exponent, 1)), adv \(format(interval * 1000, 0)) ms, loss \(format(loss * 100, 0))%"
        case .realistic:
            "realistic preset, n=\(format(exponent, 1)), adv \(format(interval * 1000, 0)) ms"
        case .calibrated:
            "realistic, nodes calibrated, n=\(format(exponent, 1)), adv \(format(interval * 1000, 0)) ms"
        }
    }
}

/// Where the nodes are: one box (a node, a room) per position.
struct Layout: Sendable {
    var name: String
    var boxes: [(name: String, position: Position)]

    static let spacing = 8.0

    static let two = Layout(name: "2 boxes", boxes: [("A", Position(x: 0, y: 0)), ("B", Position(x: spacing, y: 0))])
    static let line = Layout(name: "3 in a line", boxes: [
        ("A", Position(x: 0, y: 0)), ("B", Position(x: spacing, y: 0)), ("C", Position(x: 2 * spacing, y: 0)),
    ])
    static let triangle = Layout(name: "3 in a triangle", boxes: [
        ("A", Position(x: 0, y: 0)), ("B", Position(x: spacing, y: 0)),
        ("C", Position(x: spacing / 2, y: spacing * 3.0.squareRoot() / 2)),
    ])
    static let all = [two, line, triangle]

    var a: Position { boxes[0].position }
    var b: Position { boxes[1].position }

    /// The point `fraction` of the way from box A to box B.
    func between(_ fraction: Double) -> Position {
        Position(x: a.x + (b.x - a.x) * fraction, y: a.y + (b.y - a.y) * fraction)
    }

    /// The centroid of the boxes (for three, equidistant from all).
    var centre: Position {
        let n = Double(boxes.count)
        return Position(x: boxes.map(\.position.x).reduce(0, +) / n, y: boxes.map(\.position.y).reduce(0, +) / n)
    }

    /// The boxes nearest to `p` (several when equidistant within 1 cm).
    func nearest(to p: Position) -> Set<String> {
        let d = boxes.map { ($0.name, $0.position.distance(to: p)) }
        let m = d.map(\.1).min()!
        return Set(d.filter { $0.1 - m < 0.01 }.map(\.0))
    }
}

enum TraceKind: String, Codable, Sendable {
    /// Standing still at one point for the whole trace.
    case stand
    /// Walk from near A to near B at 1 m/s and back, holding at each end.
    case walk
    /// Teleport from near A to near B and back, holding at each end.
    case teleport
}

/// A move whose lag is measured: at `start` the device leaves for `target`'s room; `reference` is
/// when it crosses the midpoint (walk) or teleports.
struct Move: Sendable {
    var start: Double
    var reference: Double
    var target: String
    var origin: String
    /// The move is scored until here (the next move's start, or the end).
    var end: Double
}

/// One simulated trace of one device in one layout.
struct Trace: Sendable {
    var kind: TraceKind
    var label: String
    var layout: Layout
    var duration: Double
    var trajectory: Trajectory
    /// Stand traces: which point (a fraction of A→B, or the centre) and whether it is a midpoint.
    var point: String = ""
    var isMidpoint = false
    var moves: [Move] = []

    /// What each box hears of the device: received advertisements, in time order.
    var samples: [[Sample]] = []

    static let device = "device"

    /// Fills `samples` from the radio model, one link per box: advertising events every interval
    /// plus the 0–10 ms advDelay (one schedule, the device's), each lost or received per link with
    /// log-distance RSSI plus the link's deviations. On the realistic preset each link has its own
    /// realistic state (`RealisticRadio.link`: the device's and the box's offsets, the link's
    /// shadowing field at the device's position, AR(1) shadowing, channels, outliers) and burst
    /// process. `installation` seeds what is fixed in a home (offsets, fields): the same for every
    /// trace of a seed; `rng` the rest. Virtual time only.
    mutating func simulate(_ radio: RadioModel, installation: UInt64, rng: SeededGenerator) {
        var advertising = rng.derived("adv \(Self.device)")
        let realistic = radio.parameters.realistic
        let interval = radio.parameters.advertisingInterval
        let positions = layout.boxes.map(\.position)
        var links = layout.boxes.map { rng.derived("link \(Self.device)->\($0.name)") }
        var realisticLinks = layout.boxes.map {
            realistic.link(seed: installation, stream: "realistic \(label) \(Self.device)->\($0.name)", from: Self.device, to: $0.name)
        }
        var bursts = layout.boxes.map { radio.burstProcess(using: rng.derived("burst \(Self.device)->\($0.name)")) }
        samples = Array(repeating: [], count: links.count)
        for i in samples.indices { samples[i].reserveCapacity(Int(duration / interval) + 1) }
        var t = advertising.uniform(0...interval)
        while t < duration {
            let p = trajectory.position(at: t)
            for i in links.indices {
                var deviation = 0.0
                if !realistic.isOff { deviation = realisticLinks[i].deviation(at: t, x: p.x, y: p.y) }
                let d = p.distance(to: positions[i])
                let rssi = radio.parameters.burstLossRate > 0
                    ? radio.sampleRSSI(distance: d, deviation: deviation, at: t, burst: &bursts[i], using: &links[i])
                    : radio.sampleRSSI(distance: d, deviation: deviation, using: &links[i])
                if let rssi { samples[i].append(Sample(t: t, rssi: Double(rssi))) }
            }
            t = radio.nextAdvertisement(after: t, interval: interval, using: &advertising)
        }
    }
}

/// One received advertisement.
struct Sample: Sendable {
    var t: Double
    var rssi: Double
}

/// The scenario set. Every random choice comes from the seed, so a seed gives the same traces to
/// every rule: the comparison is paired.
enum TraceSet {
    static let walkSpeed = 1.0
    /// Where the moves start and end: this far along A→B, and as far from B.
    static let moveEnd = 0.1
    /// Holds before, between and after the moves (the first one is the warm-up).
    static let hold = 60.0
    /// Stand traces: the warm-up (not scored) and the scored time after it.
    static let warmup = 60.0
    static let standFractions = [0.1, 0.25, 0.4, 0.5]

    static func stand(_ layout: Layout, fraction: Double, scored: Double) -> Trace {
        Trace(kind: .stand, label: "stand \(format(fraction * 100, 0)) %", layout: layout, duration: warmup + scored,
              trajectory: Trajectory(fixed: layout.between(fraction)), point: "\(format(fraction * 100, 0)) %",
              isMidpoint: abs(fraction - 0.5) < 1e-9)
    }

    static func centre(_ layout: Layout, scored: Double) -> Trace {
        Trace(kind: .stand, label: "stand centre", layout: layout, duration: warmup + scored,
              trajectory: Trajectory(fixed: layout.centre), point: "centre", isMidpoint: true)
    }

    /// Hold near A, walk to near B at 1 m/s, hold, walk back, hold. The start is at a random phase.
    static func walk(_ layout: Layout, rng: inout SeededGenerator) -> Trace {
        let from = layout.between(moveEnd), to = layout.between(1 - moveEnd)
        let length = from.distance(to: to)
        var t = hold + rng.uniform(0...1)
        var waypoints = [Waypoint(time: 0, position: from), Waypoint(time: t, position: from)]
        var moves: [Move] = []
        let (a, b) = (layout.boxes[0].name, layout.boxes[1].name)
        for (target, origin, destination) in [(b, a, to), (a, b, from)] {
            let start = t
            t += length / walkSpeed
            waypoints.append(Waypoint(time: t, position: destination))
            t += hold
            waypoints.append(Waypoint(time: t, position: destination))
            moves.append(Move(start: start, reference: start + length / 2 / walkSpeed, target: target, origin: origin, end: t))
        }
        return Trace(kind: .walk, label: "walk", layout: layout, duration: t, trajectory: try! Trajectory(waypoints: waypoints), moves: moves)
    }

    /// Hold near A, teleport to near B, hold, teleport back, hold.
    static func teleport(_ layout: Layout, rng: inout SeededGenerator) -> Trace {
        let from = layout.between(moveEnd), to = layout.between(1 - moveEnd)
        var t = hold + rng.uniform(0...1)
        var waypoints = [Waypoint(time: 0, position: from)]
        var moves: [Move] = []
        let (a, b) = (layout.boxes[0].name, layout.boxes[1].name)
        var here = from
        for (target, origin, destination) in [(b, a, to), (a, b, from)] {
            waypoints.append(Waypoint(time: t, position: here))
            waypoints.append(Waypoint(time: t + 0.001, position: destination))
            moves.append(Move(start: t, reference: t, target: target, origin: origin, end: t + hold))
            here = destination
            t += hold + (target == b ? rng.uniform(0...1) : 0)
        }
        moves[0].end = moves[1].start
        return Trace(kind: .teleport, label: "teleport", layout: layout, duration: moves[1].end, trajectory: try! Trajectory(waypoints: waypoints),
                     moves: moves)
    }
}

func format(_ x: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", x)
}
