import Foundation
import Testing

@testable import BlueZSim

/// The radio's acceptance tests: with the seed fixed, sampled RSSI, loss, sensitivity, advertising
/// timing and connection attempts follow the model within tolerances derived from the number of
/// samples (4 standard errors, so a correct model fails with probability ~6e-5 per check, and a
/// fixed seed makes each run identical anyway).
@Suite struct RadioTests {
    /// The acceptance scenario's radio: σ = 4 dB, free-space exponent, −59 dBm at 1 m.
    static let acceptance = RadioParameters(
        pathLossExponent: 2.0, measuredPower: -59, shadowingSigma: 4, advertisingInterval: 0.1,
        packetLoss: 0, connectionLatency: 0.05, connectionFailureRate: 0, sensitivity: -100)
    static let samples = 20_000

    // MARK: The mean

    @Test func meanFollowsTheLogDistanceFormula() {
        let model = RadioModel(RadioParameters(pathLossExponent: 2.5, measuredPower: -60))
        #expect(model.meanRSSI(distance: 1) == -60)
        #expect(abs(model.meanRSSI(distance: 10) - -85) < 1e-12)
        #expect(abs(model.meanRSSI(distance: 2) - (-60 - 25 * log10(2.0))) < 1e-12)
        // Floored at 0.1 m, so coinciding points stay finite.
        #expect(model.meanRSSI(distance: 0) == model.meanRSSI(distance: 0.1))
        #expect(abs(model.meanRSSI(distance: 0) - -35) < 1e-12)
        // A beacon's own calibration replaces the scenario's.
        #expect(model.meanRSSI(distance: 1, measuredPower: -70) == -70)
        #expect(abs(model.distance(forMeanRSSI: model.meanRSSI(distance: 7.3)) - 7.3) < 1e-9)
    }

    // MARK: Acceptance: the mean and spread of samples at 1, 2, 4 and 8 m

    @Test(arguments: [1.0, 2.0, 4.0, 8.0])
    func sampledMeanAndSpreadMatchTheModel(distance: Double) throws {
        let model = RadioModel(Self.acceptance)
        var rng = SeededGenerator(seed: 2024).derived("acceptance \(distance) m")
        let values = (0..<Self.samples).compactMap { _ in model.sampleRSSI(distance: distance, using: &rng) }.map(Double.init)
        try #require(values.count == Self.samples)  // no loss, and far above the sensitivity
        let sigma = Self.acceptance.shadowingSigma, n = Double(Self.samples)
        // The mean of N samples has standard error σ/√N: tolerance 4σ/√N (0.11 dB here).
        // Rounding to whole dBm adds no bias worth mentioning when σ ≫ 1 dB.
        let expectedMean = model.meanRSSI(distance: distance)
        #expect(abs(ModelStatistics.mean(values) - expectedMean) < 4 * sigma / n.squareRoot(),
                "mean at \(distance) m: \(ModelStatistics.mean(values)), model \(expectedMean)")
        // Rounding adds a uniform ±0.5 dB error, variance 1/12; the sample σ has standard error
        // σ/√(2N): tolerance 4σ/√(2N) (0.08 dB).
        let expectedSigma = (sigma * sigma + 1.0 / 12).squareRoot()
        #expect(abs(ModelStatistics.standardDeviation(values) - expectedSigma) < 4 * sigma / (2 * n).squareRoot())
        #expect(values.allSatisfy { $0 == $0.rounded() })
    }

    @Test func theMeansAtOneTwoFourEightMetresAreTheDocumentedOnes() {
        // The table in docs/simulator.md: −59, −65.02, −71.04, −77.06 dBm (6.02 dB per doubling).
        let model = RadioModel(Self.acceptance)
        let means = [1.0, 2, 4, 8].map { (model.meanRSSI(distance: $0) * 100).rounded() / 100 }
        #expect(means == [-59, -65.02, -71.04, -77.06])
    }

    @Test func zeroSigmaGivesTheRoundedMeanExactly() {
        var parameters = Self.acceptance
        parameters.shadowingSigma = 0
        let model = RadioModel(parameters)
        var rng = SeededGenerator(seed: 1)
        for _ in 0..<100 {
            #expect(model.sampleRSSI(distance: 2, using: &rng) == -65)
        }
    }

    // MARK: Loss and sensitivity

    @Test(arguments: [0.05, 0.1, 0.5])
    func packetLossRateIsHonoured(loss: Double) {
        var parameters = Self.acceptance
        parameters.packetLoss = loss
        let model = RadioModel(parameters)
        var rng = SeededGenerator(seed: 77)
        let n = Self.samples
        let lost = (0..<n).filter { _ in model.sampleRSSI(distance: 3, using: &rng) == nil }.count
        // Binomial: standard error √(p(1−p)/N).
        let rate = Double(lost) / Double(n)
        #expect(abs(rate - loss) < 4 * (loss * (1 - loss) / Double(n)).squareRoot(), "loss \(rate), want \(loss)")
    }

    @Test func lossDoesNotShiftTheShadowing() {
        // Every sample draws the same amount whatever the loss rate, so with the same seed the
        // packets that do arrive carry the same RSSI as without loss.
        var lossless = Self.acceptance, lossy = Self.acceptance
        lossy.packetLoss = 0.3
        var a = SeededGenerator(seed: 8), b = SeededGenerator(seed: 8)
        var compared = 0
        for _ in 0..<1000 {
            let clean = RadioModel(lossless).sampleRSSI(distance: 2, using: &a)
            if let received = RadioModel(lossy).sampleRSSI(distance: 2, using: &b) {
                #expect(received == clean)
                compared += 1
            }
        }
        #expect(compared > 600)
        lossless.packetLoss = 1
        var c = SeededGenerator(seed: 8)
        #expect((0..<100).allSatisfy { _ in RadioModel(lossless).sampleRSSI(distance: 2, using: &c) == nil })
    }

    @Test func farBeyondSensitivityNothingIsReceived() {
        // At 1 km the mean is −119 dBm, 19 dB (4.75σ) below the −100 dBm sensitivity.
        let model = RadioModel(Self.acceptance)
        var rng = SeededGenerator(seed: 9)
        #expect((0..<2000).allSatisfy { _ in model.sampleRSSI(distance: 1000, using: &rng) == nil })
    }

    @Test func atTheSensitivityEdgeAboutHalfIsReceived() {
        // Where the mean equals the sensitivity, a rounded sample is kept when mean + z ≥ −100.5,
        // i.e. z ≥ −0.5 dB: probability Φ(0.5/σ) = Φ(0.125) = 0.5497.
        let model = RadioModel(Self.acceptance)
        let edge = model.distance(forMeanRSSI: Self.acceptance.sensitivity)
        var rng = SeededGenerator(seed: 10)
        var received: [Int16] = []
        for _ in 0..<Self.samples {
            if let rssi = model.sampleRSSI(distance: edge, using: &rng) { received.append(rssi) }
        }
        let fraction = Double(received.count) / Double(Self.samples)
        let expected = 0.549_738
        #expect(abs(fraction - expected) < 4 * (0.25 / Double(Self.samples)).squareRoot())
        #expect(received.allSatisfy { $0 >= -100 })
    }

    @Test func samplesAreClampedToWhatHCIReports() {
        var parameters = Self.acceptance
        parameters.shadowingSigma = 0
        parameters.sensitivity = -127
        let model = RadioModel(parameters)
        var rng = SeededGenerator(seed: 11)
        #expect(model.sampleRSSI(distance: 0.1, measuredPower: 10, using: &rng) == 20)  // mean +30
        #expect(model.sampleRSSI(distance: 1e9, using: &rng) == -127)  // mean −239
    }

    // MARK: Acceptance: advertising timing

    @Test(arguments: [0.02, 0.1, 1.0])
    func sampleRateFollowsTheAdvertisingIntervalAndLoss(interval: Double) {
        var parameters = Self.acceptance
        parameters.advertisingInterval = interval
        parameters.packetLoss = 0.2
        let model = RadioModel(parameters)
        var timing = SeededGenerator(seed: 12).derived("adv")
        var radio = SeededGenerator(seed: 12).derived("rssi")
        let span = 36_000 * interval  // 360 000 events' worth at the nominal interval
        var t = 0.0, events = 0, received = 0
        var shortest = Double.infinity, longest = 0.0
        while true {
            let next = model.nextAdvertisement(after: t, interval: interval, using: &timing)
            shortest = min(shortest, next - t)
            longest = max(longest, next - t)
            t = next
            guard t <= span else { break }
            events += 1
            if model.sampleRSSI(distance: 2, using: &radio) != nil { received += 1 }
        }
        // Every gap is the interval plus an advDelay in [0, 10 ms].
        #expect(shortest >= interval - 1e-9 && longest <= interval + RadioModel.maximumAdvertisingDelay + 1e-9)
        // A renewal process with mean gap μ = interval + 5 ms and gap variance v = (10 ms)²/12
        // has about span/μ events, with variance span·v/μ³.
        let mu = interval + 0.005, v = 0.01 * 0.01 / 12
        let expectedEvents = span / mu
        #expect(abs(Double(events) - expectedEvents) < 4 * (span * v / (mu * mu * mu)).squareRoot() + 1,
                "\(events) events in \(span) s, want \(expectedEvents)")
        // Received ≈ (1 − p)·events, binomial.
        let p = parameters.packetLoss
        #expect(abs(Double(received) - (1 - p) * Double(events)) < 4 * (Double(events) * p * (1 - p)).squareRoot())
    }

    @Test func advDelayIsUniformOverTenMilliseconds() {
        let model = RadioModel(Self.acceptance)
        var rng = SeededGenerator(seed: 13)
        let n = Self.samples
        let delays = (0..<n).map { _ in model.nextAdvertisement(after: 100, interval: 0.1, using: &rng) - 100.1 }
        // Uniform on [0, 10 ms]: mean 5 ms, σ = 10 ms/√12.
        #expect(abs(ModelStatistics.mean(delays) - 0.005) < 4 * (0.01 / 12.0.squareRoot()) / Double(n).squareRoot())
        #expect(delays.min()! > -1e-12 && delays.max()! < 0.01 + 1e-12)
    }

    // MARK: Connections

    @Test(arguments: [0.0, 0.1, 0.5])
    func connectionLatencyAndFailureRate(failureRate: Double) {
        var parameters = Self.acceptance
        parameters.connectionLatency = 0.2
        parameters.connectionFailureRate = failureRate
        let model = RadioModel(parameters)
        var rng = SeededGenerator(seed: 14).derived("connect")
        let n = Self.samples
        var latencies: [Double] = [], failures = 0
        for _ in 0..<n {
            let attempt = model.connectionAttempt(using: &rng)
            latencies.append(attempt.latency)
            if attempt.fails { failures += 1 }
        }
        #expect(latencies.allSatisfy { $0 > 0 })
        // Lognormal with log-σ s: coefficient of variation √(e^{s²} − 1) ≈ 0.533.
        let s = RadioModel.connectionLatencyLogSigma
        let cv = (exp(s * s) - 1).squareRoot()
        #expect(abs(ModelStatistics.mean(latencies) - 0.2) < 4 * cv * 0.2 / Double(n).squareRoot())
        // The median is mean·e^{−s²/2} ≈ 0.88 of the mean: never piled up at zero.
        let median = latencies.sorted()[n / 2]
        #expect(abs(median - 0.2 * exp(-s * s / 2)) < 0.01)
        let rate = Double(failures) / Double(n)
        #expect(abs(rate - failureRate) < 4 * (failureRate * (1 - failureRate) / Double(n)).squareRoot() + 1e-12)
    }

    @Test func zeroLatencyAndCertainFailure() {
        var parameters = Self.acceptance
        parameters.connectionLatency = 0
        parameters.connectionFailureRate = 1
        var rng = SeededGenerator(seed: 15)
        for _ in 0..<100 {
            let attempt = RadioModel(parameters).connectionAttempt(using: &rng)
            #expect(attempt.latency == 0 && attempt.fails)
        }
    }

    // MARK: Determinism

    @Test func sameSeedSameSamples() {
        let model = RadioModel(RadioParameters(shadowingSigma: 4, packetLoss: 0.1))
        func run() -> [Int16?] {
            var rng = SeededGenerator(seed: 42).derived("adv alpha->bravo")
            return (0..<500).map { i in model.sampleRSSI(distance: 1 + Double(i % 10), using: &rng) }
        }
        #expect(run() == run())
    }

    @Test func parametersOutOfRangeAreRejected() {
        func path(_ change: (inout RadioParameters) -> Void) -> String? {
            var parameters = RadioParameters()
            change(&parameters)
            do {
                try parameters.validate()
                return nil
            } catch {
                return error.path
            }
        }
        #expect(path { _ in } == nil)
        #expect(path { $0.pathLossExponent = 0 } == "path_loss_exponent")
        #expect(path { $0.measuredPower = 30 } == "measured_power")
        #expect(path { $0.shadowingSigma = -1 } == "shadowing_sigma")
        #expect(path { $0.advertisingInterval = 0.01 } == "advertising_interval")
        #expect(path { $0.packetLoss = 1.5 } == "packet_loss")
        #expect(path { $0.connectionLatency = -0.1 } == "connection_latency")
        #expect(path { $0.connectionFailureRate = .nan } == "connection_failure_rate")
        #expect(path { $0.sensitivity = -200 } == "sensitivity")
        #expect(path { $0.burstLossRate = 1.01 } == "burst_loss_rate")
        #expect(path { $0.burstDuration = 0 } == "burst_duration")
        #expect(path { $0.burstDuration = .infinity } == "burst_duration")
    }
}
