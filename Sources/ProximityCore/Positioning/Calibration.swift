import Foundation

/// What the fleet learns of its radios from hearings at known distances: each node's receive
/// offset, each transmitter's power at 1 m, and the path-loss exponent (`docs/positioning.md`,
/// Self-calibration).
///
/// The model is the positioning's, in dB: a hearing by receiver *i* of transmitter *j* at a known
/// distance d is
///
///     RSSI = T_j + c_i − n · 10 log10 d + ε
///
/// with T_j the transmitter's RSSI at 1 m as an unbiased receiver would read it, c_i the
/// receiver's bias, n the exponent. That is linear in (c, T, n), so the fit is a weighted least
/// squares, made robust by iteratively reweighting with Huber's weights (a node moved, a door
/// closed, a person standing by a box: their hearings stop counting fully once they stray), and
/// regularised by priors: receivers unbiased (c ~ N(0, 6 dB)), transmitters as they say
/// (T ~ N(stated, 6 dB)), n ~ N(2.5, 0.5). Only differences matter to the positioning (a common
/// shift of every c is a device offset, which it integrates out), and the priors pin the rest.
///
/// Each hearing counts as what it is: one link, whose average strays from the model by about
/// ``Priors/linkSigma`` (a wall, a reflection) however many samples are behind it, plus the
/// samples' own noise (``Priors/sampleSigma`` over their count). Weighting by the sample count
/// alone would take nine averaged hearings for nine exact equations, and the exponent would be
/// whatever made them fit. The exponent is kept within ``Priors/exponentRange``: where the data
/// push it out, it is fixed at the bound and the offsets are fitted again around it (and the fit
/// says so, ``Fit/exponentAtBound``), rather than cut off with the offsets left where the
/// unbounded exponent put them.
public enum Calibration {
    /// One hearing (or the average of several) at a known distance.
    public struct Observation: Sendable, Hashable {
        /// The receiving node's name.
        public var receiver: String
        /// The transmitter: a node's name, or a device's identifier.
        public var transmitter: String
        /// Metres, from the plan (or a calibration walk's marks).
        public var distance: Double
        /// dBm.
        public var rssi: Double
        /// The RSSI at 1 m the transmitter states (its advertised measured power), dBm.
        public var stated: Double
        /// How much it counts (the number of samples behind an average, say).
        public var weight: Double

        public init(receiver: String, transmitter: String, distance: Double, rssi: Double, stated: Double = -59, weight: Double = 1) {
            self.receiver = receiver
            self.transmitter = transmitter
            self.distance = distance
            self.rssi = rssi
            self.stated = stated
            self.weight = weight
        }
    }

    public struct Priors: Sendable, Hashable {
        public var receiverSigma = 6.0
        public var transmitterSigma = 6.0
        public var exponent = 2.5
        public var exponentSigma = 0.5
        /// Residuals beyond this many dB count less and less (Huber's threshold).
        public var huber = 4.0
        public var exponentRange: ClosedRange<Double> = 1.5 ... 4.5
        /// How far one link's average strays from the model, dB, however many samples it has.
        public var linkSigma = 3.0
        /// How far one sample strays from its link's average, dB.
        public var sampleSigma = 5.0

        /// The precision of a hearing averaged over `samples` samples, 1/dB².
        public func precision(samples: Double) -> Double {
            1 / (linkSigma * linkSigma + sampleSigma * sampleSigma / max(samples, 1))
        }

        public init() {}
    }

    /// The fit: what to add to each node's RSSI to unbias it (`rx-offset`, the negative of its
    /// bias), each transmitter's power at 1 m, the exponent, and how well it explains the data.
    public struct Fit: Sendable, Hashable {
        /// Node name → dB to add to what it receives (the plan's `rx-offset`).
        public var rxOffsets: [String: Double]
        /// Transmitter → its RSSI at 1 m as an unbiased receiver reads it (a node's `tx-power`).
        public var txPowers: [String: Double]
        public var exponent: Double
        /// The root mean square of the weighted residuals, dB.
        public var rms: Double
        /// The exponent is at a bound of ``Priors/exponentRange``: the hearings pushed it out
        /// (a site or a set of hearings the model does not explain; more pairs, or a walk, help).
        public var exponentAtBound = false
        /// Each hearing predicted by a fit of the others (leave one out; at most
        /// ``Calibration/holdoutLimit`` of them, spread evenly), root mean square, dB: how well
        /// the fit explains hearings it did not use. Nil with fewer hearings than unknowns + 2,
        /// or when not asked for.
        public var holdoutRMS: Double?
        /// Per node (receiving or transmitting): the median absolute residual of its hearings, dB,
        /// and how many there were. A node moved, or one behind a new obstacle, stands out here.
        public var nodeResiduals: [String: (median: Double, count: Int)]
        /// Each observation's residual, in the order given.
        public var residuals: [Double]

        public static func == (a: Fit, b: Fit) -> Bool {
            a.rxOffsets == b.rxOffsets && a.txPowers == b.txPowers && a.exponent == b.exponent && a.rms == b.rms
                && a.residuals == b.residuals
                && a.exponentAtBound == b.exponentAtBound && a.holdoutRMS == b.holdoutRMS
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(rxOffsets)
            hasher.combine(txPowers)
            hasher.combine(exponent)
        }
    }

    /// Fits the observations (nil when there are none); with `holdout`, also how well fits of all
    /// but one predict the one left out (``Fit/holdoutRMS``).
    public static func fit(_ observations: [Observation], priors: Priors = .init(), iterations: Int = 12, holdout: Bool = false) -> Fit? {
        guard var fit = solve(observations, priors: priors, iterations: iterations) else { return nil }
        let usable = observations.filter(isUsable)
        let unknowns = Set(usable.map(\.receiver)).count + Set(usable.map(\.transmitter)).count + 1
        guard holdout, usable.count >= unknowns + 2 else { return fit }
        var sum = 0.0, weights = 0.0
        // At most `holdoutLimit` of them, spread evenly, each left out in turn: a large fleet's
        // hundreds of pairs would otherwise cost as many fits.
        let step = max(1, (usable.count + holdoutLimit - 1) / holdoutLimit)
        for k in stride(from: 0, to: usable.count, by: step) {
            var others = usable
            let left = others.remove(at: k)
            // A receiver or transmitter heard only in the one left out cannot be predicted.
            guard others.contains(where: { $0.receiver == left.receiver }), others.contains(where: { $0.transmitter == left.transmitter }),
                  let partial = solve(others, priors: priors, iterations: iterations),
                  let c = partial.rxOffsets[left.receiver], let t = partial.txPowers[left.transmitter] else { continue }
            let predicted = t - c - partial.exponent * 10 * Foundation.log10(max(left.distance, PathLossModel.minimumDistance))
            let w = priors.precision(samples: left.weight)
            sum += w * (left.rssi - predicted) * (left.rssi - predicted)
            weights += w
        }
        if weights > 0 { fit.holdoutRMS = (sum / weights).squareRoot() }
        return fit
    }

    /// The most hearings ``fit(_:priors:iterations:holdout:)`` leaves out one at a time.
    public static let holdoutLimit = 64

    static func isUsable(_ o: Observation) -> Bool { o.distance > 0 && o.distance.isFinite && o.rssi.isFinite && o.weight > 0 }

    private static func solve(_ observations: [Observation], priors: Priors, iterations: Int) -> Fit? {
        let usable = observations.filter(isUsable)
        guard !usable.isEmpty else { return nil }
        let receivers = Array(Set(usable.map(\.receiver))).sorted()
        let transmitters = Array(Set(usable.map(\.transmitter))).sorted()
        let ri = Dictionary(uniqueKeysWithValues: receivers.enumerated().map { ($1, $0) })
        let ti = Dictionary(uniqueKeysWithValues: transmitters.enumerated().map { ($1, receivers.count + $0) })
        let nIndex = receivers.count + transmitters.count
        let dim = nIndex + 1
        // Each row: r = θ[c_i] + θ[T_j] − θ[n]·L.
        let rows = usable.map { (c: ri[$0.receiver]!, t: ti[$0.transmitter]!,
                                 l: 10 * Foundation.log10(max($0.distance, PathLossModel.minimumDistance)),
                                 r: $0.rssi, w: priors.precision(samples: $0.weight)) }
        var stated = [Double](repeating: 0, count: transmitters.count)
        var statedCount = [Double](repeating: 0, count: transmitters.count)
        for o in usable {
            stated[ti[o.transmitter]! - receivers.count] += o.stated
            statedCount[ti[o.transmitter]! - receivers.count] += 1
        }
        // The priors: precision and mean of each unknown.
        var precision = [Double](repeating: 0, count: dim), mean = [Double](repeating: 0, count: dim)
        for i in 0 ..< receivers.count { precision[i] = 1 / (priors.receiverSigma * priors.receiverSigma) }
        for j in transmitters.indices {
            precision[receivers.count + j] = 1 / (priors.transmitterSigma * priors.transmitterSigma)
            mean[receivers.count + j] = stated[j] / statedCount[j]
        }
        precision[nIndex] = 1 / (priors.exponentSigma * priors.exponentSigma)
        mean[nIndex] = priors.exponent

        var theta = mean
        var robust = [Double](repeating: 1, count: rows.count)
        /// The exponent once the data pushed it out of its range: fixed there from then on.
        var fixed: Double?
        func residual(_ k: Int, _ x: [Double]) -> Double { rows[k].r - (x[rows[k].c] + x[rows[k].t] - x[nIndex] * rows[k].l) }
        for _ in 0 ..< iterations {
            // (AᵀWA + Λ) θ = AᵀWr + Λμ, by conjugate gradients (A is sparse: 3 entries a row). With
            // the exponent fixed, its column moves to the right-hand side and its row is θ_n = n.
            let free = fixed == nil
            func apply(_ x: [Double]) -> [Double] {
                var out = (0 ..< dim).map { precision[$0] * x[$0] }
                if !free { out[nIndex] = x[nIndex] }
                for (k, row) in rows.enumerated() {
                    let w = row.w * robust[k]
                    let ax = x[row.c] + x[row.t] - (free ? x[nIndex] * row.l : 0)
                    out[row.c] += w * ax
                    out[row.t] += w * ax
                    if free { out[nIndex] -= w * ax * row.l }
                }
                return out
            }
            var b = (0 ..< dim).map { precision[$0] * mean[$0] }
            if let fixed { b[nIndex] = fixed }
            for (k, row) in rows.enumerated() {
                let w = row.w * robust[k]
                let r = row.r + (fixed.map { $0 * row.l } ?? 0)
                b[row.c] += w * r
                b[row.t] += w * r
                if free { b[nIndex] -= w * r * row.l }
            }
            theta = conjugateGradient(apply, b, start: theta, iterations: 4 * dim + 20)
            if free, !priors.exponentRange.contains(theta[nIndex]) {
                // Fixed at the bound, and everything else fitted again around it at once.
                let bound = min(max(theta[nIndex], priors.exponentRange.lowerBound), priors.exponentRange.upperBound)
                fixed = bound
                theta[nIndex] = bound
                continue
            }
            for k in rows.indices {
                let e = abs(residual(k, theta))
                robust[k] = e <= priors.huber ? 1 : priors.huber / e
            }
        }
        let residuals = rows.indices.map { residual($0, theta) }
        var sum = 0.0, weights = 0.0
        var perNode: [String: [Double]] = [:]
        for (k, row) in rows.enumerated() {
            sum += row.w * residuals[k] * residuals[k]
            weights += row.w
            perNode[receivers[row.c], default: []].append(abs(residuals[k]))
            perNode[transmitters[row.t - receivers.count], default: []].append(abs(residuals[k]))
        }
        return Fit(rxOffsets: Dictionary(uniqueKeysWithValues: receivers.enumerated().map { ($1, -theta[$0]) }),
                   txPowers: Dictionary(uniqueKeysWithValues: transmitters.enumerated().map { ($1, theta[receivers.count + $0]) }),
                   exponent: theta[nIndex], rms: (sum / weights).squareRoot(), exponentAtBound: fixed != nil,
                   nodeResiduals: perNode.mapValues { ($0.sorted()[$0.count / 2], $0.count) },
                   residuals: residuals)
    }

    /// Solves A x = b for a symmetric positive definite A given as a function.
    static func conjugateGradient(_ a: ([Double]) -> [Double], _ b: [Double], start: [Double], iterations: Int) -> [Double] {
        var x = start
        let ax = a(x)
        var r = zip(b, ax).map { $0 - $1 }
        var p = r
        var rr = r.reduce(0) { $0 + $1 * $1 }
        let limit = 1e-18 * max(1, b.reduce(0) { $0 + $1 * $1 })
        for _ in 0 ..< iterations where rr > limit {
            let ap = a(p)
            let pap = zip(p, ap).reduce(0) { $0 + $1.0 * $1.1 }
            guard pap > 0 else { break }
            let alpha = rr / pap
            for i in x.indices { x[i] += alpha * p[i]; r[i] -= alpha * ap[i] }
            let next = r.reduce(0) { $0 + $1 * $1 }
            let beta = next / rr
            rr = next
            for i in p.indices { p[i] = r[i] + beta * p[i] }
        }
        return x
    }
}
