import Foundation
import ProximityCore
import Testing

@Suite("Zones and hysteresis")
struct ZoneTests {
    @Test("plain thresholds", arguments: [(0.1, Proximity.immediate), (0.49, .immediate), (0.5, .near), (2.99, .near), (3.0, .far), (40, .far)])
    func thresholds(distance: Double, zone: Proximity) {
        #expect(ZoneThresholds().zone(forDistance: distance) == zone)
    }

    @Test("standing on the 3 m boundary does not flap")
    func noFlapOnBoundary() {
        var tracker = ZoneTracker(margin: 0.2, dwell: 1)
        var changes = 0
        var last = tracker.update(distance: 2.9, at: 0)
        for i in 1..<600 {
            let d = i % 2 == 0 ? 2.7 : 3.3   // ±10% around the boundary, inside the 20% margin
            let zone = tracker.update(distance: d, at: Double(i) * 0.1)
            if zone != last { changes += 1 }
            last = zone
        }
        #expect(changes == 0)
        #expect(last == .near)
    }

    @Test("a real move is followed once it passes the margin and holds for the dwell time")
    func realMove() {
        var tracker = ZoneTracker(margin: 0.2, dwell: 1)
        #expect(tracker.update(distance: 1, at: 0) == .near)
        #expect(tracker.update(distance: 5, at: 1) == .near)      // candidate far, not yet held
        #expect(tracker.update(distance: 5, at: 1.5) == .near)
        #expect(tracker.update(distance: 5, at: 2.0) == .far)     // held for 1 s
        #expect(tracker.update(distance: 2.6, at: 3) == .far)     // inside 3 m but not below 2.4 m
        #expect(tracker.update(distance: 2.0, at: 4) == .far)
        #expect(tracker.update(distance: 2.0, at: 5) == .near)
        #expect(tracker.update(distance: 0.3, at: 6) == .near)
        #expect(tracker.update(distance: 0.3, at: 7) == .immediate)
    }

    @Test("a candidate that does not hold is dropped")
    func bounceBack() {
        var tracker = ZoneTracker(margin: 0.2, dwell: 1)
        tracker.update(distance: 1, at: 0)
        tracker.update(distance: 5, at: 1)
        tracker.update(distance: 1, at: 1.5)
        #expect(tracker.update(distance: 5, at: 2.1) == .near)   // the far candidate restarted at 2.1
        #expect(tracker.update(distance: 5, at: 3.2) == .far)
    }

    @Test("ordering")
    func ordering() {
        #expect(Proximity.immediate < .near && Proximity.near < .far && Proximity.far < .unknown)
        #expect(Proximity.allCases.map(\.rawValue) == ["immediate", "near", "far", "unknown"])
    }
}

@Suite("RSSI filters and distance models")
struct FilterTests {
    @Test("the Kalman filter converges on a constant and clips an outlier")
    func kalman() {
        var filter = KalmanRSSIFilter()
        for i in 0..<50 { filter.add(-70, at: Double(i) * 0.1) }
        #expect(abs((filter.estimate(at: 5) ?? 0) + 70) < 0.01)
        filter.add(-20, at: 5.1)   // a 50 dB spike
        #expect((filter.estimate(at: 5.1) ?? 0) < -60)
    }

    @Test("the Kalman filter follows a real step in a few seconds, whatever the sample rate", arguments: [0.05, 0.2, 1.0])
    func kalmanStep(interval: Double) {
        var filter = KalmanRSSIFilter()
        var t = 0.0
        while t < 10 { filter.add(-60, at: t); t += interval }
        while t < 15 { filter.add(-80, at: t); t += interval }
        #expect(abs((filter.estimate(at: t) ?? 0) + 80) < 3)
    }

    @Test("the Kalman filter learns the noise level", arguments: [4.0, 8.0])
    func learnsNoise(sigma: Double) {
        var noise = TestNoise(seed: 7)
        var filter = KalmanRSSIFilter()
        for i in 0..<1200 { filter.add(-70 + noise.gaussian(sigma), at: Double(i) * 0.1) }
        let learnt = filter.noiseVariance.squareRoot()
        #expect(abs(learnt - sigma) < 0.2 * sigma)
    }

    @Test("standing still it smooths hard; a move restarts it within a second")
    func changeDetection() {
        var followed = 0
        var errors: [Double] = []
        for seed in UInt64(1)...50 {
            var noise = TestNoise(seed: seed)
            var filter = KalmanRSSIFilter()
            var plain = KalmanRSSIFilter(changeThreshold: .infinity)
            var t = 0.0
            while t < 60 {
                let rssi = -62.5 + noise.gaussian(6)
                filter.add(rssi, at: t)
                plain.add(rssi, at: t)
                if t > 10 { errors.append(abs((filter.estimate(at: t) ?? 0) + 62.5)) }
                t += 0.1
            }
            // 1.5 m → 6 m: 12 dB weaker, for 0.7 s.
            while t < 60.7 {
                let rssi = -74.6 + noise.gaussian(6)
                filter.add(rssi, at: t)
                plain.add(rssi, at: t)
                t += 0.1
            }
            // Past the 3 m boundary (-68.5 dBm) and its 12.5% margin (-69.6 dBm)...
            if (filter.estimate(at: t) ?? 0) < -70 { followed += 1 }
            // ...while without change detection the same smoothing has not even reached the boundary.
            #expect((plain.estimate(at: t) ?? 0) > -68.5)
        }
        #expect(followed >= 45)
        // σ = 6 dB samples (95% within ±11.8 dB), yet 95% of the estimates within ±3 dB.
        errors.sort()
        #expect(errors[errors.count * 95 / 100] < 3)
    }

    @Test("a spike hardly moves it; a burst of spikes is forgotten within a second")
    func spikes() {
        var noise = TestNoise(seed: 3)
        var filter = KalmanRSSIFilter()
        var t = 0.0
        func steady(until end: Double) {
            while t < end { filter.add(-70 + noise.gaussian(4), at: t); t += 0.1 }
        }
        steady(until: 30)
        filter.add(-30, at: t)
        #expect(abs((filter.estimate(at: t) ?? 0) + 70) < 3)
        t += 0.1
        steady(until: 40)
        // Three samples 40 dB high in a row look like a move, and restart it...
        for _ in 0..<3 { filter.add(-30, at: t); t += 0.1 }
        #expect((filter.estimate(at: t) ?? 0) > -60)
        // ...until the samples that follow say otherwise.
        steady(until: t + 1)
        #expect(abs((filter.estimate(at: t) ?? 0) + 70) < 3)
    }

    @Test("mean of the last ten")
    func meanOfLast() {
        var filter = MeanOfLastFilter(count: 10)
        for i in 0..<20 { filter.add(Double(-i), at: Double(i)) }
        #expect(filter.estimate(at: 20) == -14.5)
    }

    @Test("the trimmed running average drops a little over 10% at each end, and old samples")
    func trimmed() {
        var filter = TrimmedRunningAverageFilter(window: 20)
        filter.add(0, at: 0)   // will fall out of the window
        for i in 1...10 { filter.add(-60, at: 20 + Double(i)) }
        filter.add(-10, at: 31)
        filter.add(-100, at: 31)
        // 12 recent samples: 12 / 10 + 1 = 2 dropped at each end (the library's calculateRssi),
        // leaving eight times -60.
        #expect(filter.estimate(at: 31) == -60)
        filter.add(-61, at: 31)
        filter.add(-59, at: 31)
        // 14: still 2 at each end; -100, -61 and -10, -59 go, leaving ten times -60.
        #expect(filter.estimate(at: 31) == -60)
    }

    @Test("log-distance model", arguments: [(-59.0, 1.0), (-65.0, 1.995), (-79.0, 10.0), (-53.0, 0.501)])
    func logDistance(rssi: Double, metres: Double) {
        #expect(abs(LogDistanceModel(exponent: 2).distance(rssi: rssi, measuredPower: -59) - metres) < 0.01)
    }

    @Test("curve-fitted models")
    func curves() {
        #expect(abs(CurveFittedDistanceModel.androidBeaconLibrary.distance(rssi: -59, measuredPower: -59) - 0.97085) < 1e-4)
        #expect(abs(CurveFittedDistanceModel.roomAssistant.distance(rssi: -59, measuredPower: -59) - 1.01076) < 1e-4)
        #expect(CurveFittedDistanceModel.androidBeaconLibrary.distance(rssi: -40, measuredPower: -59) < 0.1)
    }
}

/// Deterministic Gaussian noise for tests (SplitMix64 and Box–Muller).
struct TestNoise {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func unit() -> Double {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return Double((z ^ (z >> 31)) >> 11) * 0x1p-53
    }

    mutating func gaussian(_ sigma: Double) -> Double {
        let u1 = 1 - unit(), u2 = unit()
        return sigma * (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}
