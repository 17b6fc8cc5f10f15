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

    @Test("mean of the last ten")
    func meanOfLast() {
        var filter = MeanOfLastFilter(count: 10)
        for i in 0..<20 { filter.add(Double(-i), at: Double(i)) }
        #expect(filter.estimate(at: 20) == -14.5)
    }

    @Test("the trimmed running average drops the top and bottom 10% and old samples")
    func trimmed() {
        var filter = TrimmedRunningAverageFilter(window: 20)
        filter.add(0, at: 0)   // will fall out of the window
        for i in 1...10 { filter.add(-60, at: 20 + Double(i)) }
        filter.add(-10, at: 31)
        filter.add(-100, at: 31)
        // 12 recent samples: trim 1 from each end, leaving ten times -60.
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
