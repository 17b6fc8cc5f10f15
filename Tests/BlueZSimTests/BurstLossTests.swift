import BlueZSim
import DBusKit
import Foundation
import ProximityTesting
import Testing
import SimTesting

/// Bursty loss: each link's Gilbert–Elliott process (``BurstProcess``) and what it does to the
/// packets. Tolerances are 4 standard errors, derived in each test from the number of spells or
/// the span of time (bad spells make neighbouring packets' fates correlated, so a count of
/// packets alone would understate the error); with fixed seeds every run is identical anyway.
@Suite struct BurstLossTests {
    /// A radio far from its sensitivity at 2 m (mean −65 dBm, σ 4 dB, sensitivity −100 dBm), so
    /// only the two kinds of loss take packets.
    static func radio(packetLoss: Double = 0, burstLossRate: Double = 0, burstDuration: Double = 1) -> RadioModel {
        RadioModel(RadioParameters(shadowingSigma: 4, packetLoss: packetLoss, sensitivity: -100,
                                   burstLossRate: burstLossRate, burstDuration: burstDuration))
    }

    /// The fate of every advertising event of one link over `span` seconds: the event's time and
    /// its RSSI, nil when lost. Timing, shadowing and bursts draw from three streams of `seed`.
    static func packets(_ model: RadioModel, seed: UInt64, span: Double) -> [(time: Double, rssi: Int16?)] {
        let root = SeededGenerator(seed: seed)
        var timing = root.derived("adv"), rng = root.derived("rssi")
        var burst = model.burstProcess(using: root.derived("burst"))
        var result: [(time: Double, rssi: Int16?)] = []
        var t = model.nextAdvertisement(after: 0, interval: model.parameters.advertisingInterval, using: &timing)
        while t <= span {
            result.append((t, model.sampleRSSI(distance: 2, at: t, burst: &burst, using: &rng)))
            t = model.nextAdvertisement(after: t, interval: model.parameters.advertisingInterval, using: &timing)
        }
        return result
    }

    // MARK: The process

    /// Spells alternate; bad ones last `burstDuration` on average, good ones
    /// `burstDuration · (1 − rate) / rate`, both exponential (standard deviation = mean), and the
    /// link is bad the fraction `rate` of the time.
    @Test(arguments: [(0.3, 1.0), (0.05, 0.2), (0.9, 3.0)])
    func spellsHaveTheirMeanLengths(rate: Double, duration: Double) {
        var process = BurstProcess(badFraction: rate, meanBadSpell: duration, using: SeededGenerator(seed: 31).derived("spells"))
        var bad: [Double] = [], good: [Double] = []
        var previous: BurstProcess.State?
        for _ in 0..<40_000 {
            #expect(process.state != previous)
            previous = process.state
            let length = process.spellEnd - process.spellStart
            if process.state == .bad { bad.append(length) } else { good.append(length) }
            #expect(process.state(at: process.spellEnd) != previous)
        }
        let goodMean = duration * (1 - rate) / rate
        #expect(process.meanSpell(.bad) == duration && abs(process.meanSpell(.good) - goodMean) < 1e-12)
        for (lengths, mean) in [(bad, duration), (good, goodMean)] {
            let n = Double(lengths.count)
            // An exponential's mean has standard error mean/√n; its sample σ about √2·mean/√n.
            #expect(abs(ModelStatistics.mean(lengths) - mean) < 4 * mean / n.squareRoot(),
                    "mean spell \(ModelStatistics.mean(lengths)), want \(mean)")
            #expect(abs(ModelStatistics.standardDeviation(lengths) - mean) < 4 * 2.0.squareRoot() * mean / n.squareRoot())
        }
        // B/(B + G) over n spells of each kind has standard error √2·rate·(1 − rate)/√n.
        let fraction = bad.reduce(0, +) / (bad.reduce(0, +) + good.reduce(0, +))
        #expect(abs(fraction - rate) < 4 * 2.0.squareRoot() * rate * (1 - rate) / Double(bad.count).squareRoot(),
                "bad \(fraction) of the time, want \(rate)")
    }

    /// The spells do not depend on when, or how often, the process is asked: the same seed gives
    /// the same process whether packets come every 100 ms, every 20 ms, or once.
    @Test func spellsDoNotDependOnTheAdvertisingInterval() {
        let seed = SeededGenerator(seed: 5).derived("burst")
        var slow = BurstProcess(badFraction: 0.3, meanBadSpell: 0.5, using: seed)
        var fast = slow, once = slow
        var agree = 0
        for k in 1...50_000 {
            let fastState = fast.state(at: Double(k) * 0.02)
            if k % 5 == 0 {
                #expect(slow.state(at: Double(k / 5) * 0.1) == fastState)
                agree += 1
            }
        }
        _ = once.state(at: 1000)
        _ = slow.state(at: 1000)
        _ = fast.state(at: 1000)
        #expect(slow == fast && fast == once)
        #expect(agree == 10_000 && once.spellStart > 900)  // ~300 spells went by
    }

    @Test func theEndsOfTheRange() {
        let seed = SeededGenerator(seed: 6)
        // 0: always good, no draws, no end.
        let off = BurstProcess(badFraction: 0, meanBadSpell: 1, using: seed)
        var running = off
        #expect(running.state(at: 1e9) == .good && running == off && off.spellEnd == .infinity)
        // 1: bad all the time (good spells last 0 s).
        var always = BurstProcess(badFraction: 1, meanBadSpell: 0.5, using: seed)
        #expect((1...10_000).allSatisfy { always.state(at: Double($0) * 0.0137) == .bad })
        #expect(always.meanSpell(.good) == 0)
    }

    // MARK: What it does to packets

    /// In a bad spell every packet is lost; in a good one only the independent loss applies.
    @Test func aBadSpellLosesEveryPacket() {
        let model = Self.radio(burstLossRate: 0.3, burstDuration: 1)
        var rng = SeededGenerator(seed: 7).derived("rssi")
        var burst = model.burstProcess(using: SeededGenerator(seed: 7).derived("burst"))
        var bad = 0
        for k in 1...20_000 {
            let rssi = model.sampleRSSI(distance: 2, at: Double(k) * 0.1, burst: &burst, using: &rng)
            #expect((rssi == nil) == (burst.state == .bad))
            if burst.state == .bad { bad += 1 }
        }
        #expect(bad > 4_000 && bad < 8_000)
    }

    /// The long-run loss is `packet_loss + (1 − packet_loss) · burst_loss_rate`.
    @Test(arguments: [(0.3, 0.3, 1.0), (0.0, 0.1, 0.5), (0.1, 0.5, 2.0)])
    func longRunLossCombinesBothKinds(packetLoss: Double, rate: Double, duration: Double) {
        let model = Self.radio(packetLoss: packetLoss, burstLossRate: rate, burstDuration: duration)
        let span = 20_000.0
        let fates = Self.packets(model, seed: 8, span: span)
        let n = Double(fates.count)
        let loss = Double(fates.filter { $0.rssi == nil }.count) / n
        let expected = packetLoss + (1 - packetLoss) * rate
        // The fraction of time bad over a span T has variance 2·r·(1 − r)·τ/T, with τ = 1/(sum
        // of the two switching rates) = duration·(1 − r); the independent loss adds a binomial
        // term on top.
        let timeVariance = 2 * rate * (1 - rate) * duration * (1 - rate) / span
        let tolerance = 4 * ((1 - packetLoss) * (1 - packetLoss) * timeVariance + expected * (1 - expected) / n).squareRoot()
        #expect(abs(loss - expected) < tolerance, "loss \(loss), want \(expected) ± \(tolerance)")
    }

    /// What bursts are for: silences that independent loss at the same rate practically never
    /// gives. 30 % packet loss with a bad link 30 % of the time (1 s spells) loses 51 % of the
    /// packets; a gap over 2 s (19 events) then comes from a long bad spell, hundreds of times in
    /// 10 000 s, where independent loss of 51 % makes one with probability 0.51^19 ≈ 3e-6 per
    /// packet.
    @Test func burstsMakeLongSilences() {
        func gapsOverTwoSeconds(_ model: RadioModel) -> (gaps: Int, loss: Double) {
            let fates = Self.packets(model, seed: 9, span: 10_000)
            let received = fates.filter { $0.rssi != nil }.map(\.time)
            let gaps = zip(received, received.dropFirst()).filter { $1 - $0 > 2 }.count
            return (gaps, 1 - Double(received.count) / Double(fates.count))
        }
        let bursty = gapsOverTwoSeconds(Self.radio(packetLoss: 0.3, burstLossRate: 0.3, burstDuration: 1))
        let independent = gapsOverTwoSeconds(Self.radio(packetLoss: 0.51))
        #expect(abs(bursty.loss - independent.loss) < 0.03)
        #expect(bursty.gaps > 200, "\(bursty.gaps) gaps over 2 s")
        #expect(independent.gaps <= 1, "\(independent.gaps) gaps over 2 s")
    }

    // MARK: Reproducibility

    /// With `burst_loss_rate` 0 (the default) a link gives exactly the samples it gave before
    /// bursts existed, and the burst process draws nothing.
    @Test func zeroBurstRateChangesNothing() {
        #expect(RadioParameters().burstLossRate == 0 && RadioParameters().burstDuration == 1)
        let model = Self.radio(packetLoss: 0.1)
        var plain = SeededGenerator(seed: 10), withProcess = SeededGenerator(seed: 10)
        let initial = model.burstProcess(using: SeededGenerator(seed: 11))
        var burst = initial
        for k in 1...5_000 {
            let t = Double(k) * 0.1
            #expect(model.sampleRSSI(distance: 1 + Double(k % 7), at: t, burst: &burst, using: &withProcess)
                    == model.sampleRSSI(distance: 1 + Double(k % 7), using: &plain))
        }
        #expect(burst == initial && plain == withProcess)
    }

    /// Turning bursts on shifts no other stream: the packets that still arrive carry the RSSI
    /// they carried without bursts, and the timing is untouched.
    @Test func burstsDoNotShiftTheOtherStreams() {
        let without = Self.packets(Self.radio(packetLoss: 0.2), seed: 12, span: 2_000)
        let with = Self.packets(Self.radio(packetLoss: 0.2, burstLossRate: 0.4, burstDuration: 0.7), seed: 12, span: 2_000)
        #expect(with.map(\.time) == without.map(\.time))
        var survived = 0
        for (a, b) in zip(with, without) where a.rssi != nil {
            #expect(a.rssi == b.rssi)
            survived += 1
        }
        #expect(survived > 7_000 && survived < without.filter { $0.rssi != nil }.count)
    }

    // MARK: Scenario keys

    /// The shipped example, and where its links' bad spells fall: over its first ten minutes
    /// neither direction is bad for 10 s at a stretch (the regions' default exit period).
    @Test func theBurstyLossExample() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scenarios/bursty-loss.yaml")
        let scenario = try Scenario.load(from: file)
        #expect(scenario.radio == RadioParameters(
            pathLossExponent: 2, measuredPower: -59, shadowingSigma: 3, advertisingInterval: 0.1, packetLoss: 0.3,
            sensitivity: -92, burstLossRate: 0.2, burstDuration: 1, reportBatching: 0.5))
        #expect(scenario.boxes.map(\.name) == ["alpha", "bravo"])
        let model = scenario.radioModel
        #expect(model.meanRSSI(distance: 3) - 7 * scenario.radio.shadowingSigma > scenario.radio.sensitivity)
        for (from, to) in [("alpha", "bravo"), ("bravo", "alpha")] {
            var process = model.burstProcess(seed: scenario.seed, from: from, to: to)
            var longest = 0.0, bad = 0.0
            while process.spellStart < 600 {
                if process.state == .bad {
                    let length = min(process.spellEnd, 600) - process.spellStart
                    longest = max(longest, length)
                    bad += length
                }
                _ = process.state(at: process.spellEnd)
            }
            #expect(longest < 10, "\(from) → \(to): a bad spell of \(longest) s")
            #expect(bad / 600 > 0.1 && bad / 600 < 0.3)
        }
    }

    @Test func theKeysAreReadFromYAMLAndJSON() throws {
        let yaml = try Scenario.parse("""
            radio: { packet_loss: 0.3, burst_loss_rate: 0.25, burst_duration: 1.5, report_batching: 0.5 }
            boxes: [{ name: a, address: "02:00:00:00:00:01", position: [0, 0] }]
            """, format: .yaml)
        let json = try Scenario.parse("""
            {"radio": {"packet_loss": 0.3, "burst_loss_rate": 0.25, "burst_duration": 1.5, "report_batching": 0.5},
             "boxes": [{"name": "a", "address": "02:00:00:00:00:01", "position": [0, 0]}]}
            """, format: .json)
        #expect(yaml == json)
        #expect(yaml.radio == RadioParameters(packetLoss: 0.3, burstLossRate: 0.25, burstDuration: 1.5, reportBatching: 0.5))
        #expect(RadioParameters().reportBatching == 0)
        let process = yaml.radioModel.burstProcess(using: SeededGenerator(seed: 1))
        #expect(process.badFraction == 0.25 && process.meanBadSpell == 1.5)
        // The ends of the ranges are allowed.
        for radio in ["burst_loss_rate: 0", "burst_loss_rate: 1", "burst_duration: 0.01", "burst_duration: 86400",
                      "report_batching: 0", "report_batching: 10"] {
            #expect(throws: Never.self) {
                try Scenario.parse("radio: { \(radio) }\nboxes: [{ name: a, address: \"02:00:00:00:00:01\", position: [0, 0] }]",
                                   format: .yaml)
            }
        }
    }

    @Test(arguments: [
        ("burst_loss_rate: 1.5", "line 1: radio.burst_loss_rate: must be a fraction of time in 0...1 (0: no bursts), not 1.5"),
        ("burst_loss_rate: -0.1", "line 1: radio.burst_loss_rate: must be a fraction of time in 0...1 (0: no bursts), not -0.1"),
        ("burst_loss_rate: .nan", "line 1: radio.burst_loss_rate: must be a finite number, not .nan"),
        (#"burst_loss_rate: "0.3""#, #"line 1: radio.burst_loss_rate: must be a number, not the string "0.3""#),
        ("burst_duration: 0", "line 1: radio.burst_duration: must be 0.01 or more seconds (the mean length of a bad spell), not 0"),
        ("burst_duration: -1", "line 1: radio.burst_duration: must be 0.01 or more seconds (the mean length of a bad spell), not -1"),
        ("burst_duration: 0.005",
         "line 1: radio.burst_duration: must be 0.01 or more seconds (the mean length of a bad spell), not 0.005"),
        ("burst_duration: .inf", "line 1: radio.burst_duration: must be a finite number, not .inf"),
        ("report_batching: -0.5", "line 1: radio.report_batching: must be 0...10 seconds (0: each report as it is received), not -0.5"),
        ("report_batching: 11", "line 1: radio.report_batching: must be 0...10 seconds (0: each report as it is received), not 11"),
        // The config file's words for a key (YAMLKeys): the nearest when it is a typo.
        ("burst_length: 1", "line 1: radio.burst_length: unknown key 'burst_length'"),
        ("burst_duratoin: 1", "line 1: radio.burst_duratoin: unknown key 'burst_duratoin' (did you mean 'burst_duration'?)"),
    ])
    func badKeysAreRejectedWithTheirMessages(radio: String, message: String) {
        do {
            let scenario = try Scenario.parse("radio: { \(radio) }\nboxes: [{ name: a, address: \"02:00:00:00:00:01\", position: [0, 0] }]",
                                              format: .yaml)
            Issue.record("accepted: \(scenario.radio)")
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func programmaticParametersAreValidatedToo() {
        #expect(throws: ScenarioError(path: "burst_duration",
                                      message: "must be 0.01 or more seconds (the mean length of a bad spell), not 0.001")) {
            try RadioParameters(burstDuration: 0.001).validate()
        }
        #expect(throws: ScenarioError(path: "radio.burst_loss_rate",
                                      message: "must be a fraction of time in 0...1 (0: no bursts), not 2")) {
            try Scenario(radio: RadioParameters(burstLossRate: 2),
                         boxes: [BoxSpec(name: "a", address: "02:00:00:00:00:01", trajectory: Trajectory(fixed: Position(x: 0, y: 0)))])
                .validate()
        }
    }
}

/// Bursts on the air: a box hears a beacon through its bursts, and takes its reports in bunches;
/// `Configure` changes both.
@Suite(.serialized) struct BusBurstLossTests {
    /// Alpha listens to a beacon 2 m away under 30 % packet loss, the link bad 30 % of the time
    /// in 1 s spells, for 300 simulated seconds in half-second windows; then with bursts
    /// configured off for 100 s.
    @Test func aBeaconHeardThroughBursts() async throws {
        var scenario = twoBoxes(beacons: [iBeacon("door", "C0:00:00:00:00:01", at: Position(x: 0, y: 2))], seed: 4)
        scenario.boxes.removeLast()
        scenario.radio.packetLoss = 0.3
        scenario.radio.burstLossRate = 0.3
        scenario.radio.burstDuration = 1
        try await withSimBoxes(scenario, time: .simulated) { sim in
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("StartDiscovery")
            try await log.wait { $0.isChange(adapterPath, BlueZ.adapterInterface) && $0.changed["Discovering"] == .boolean(true) }
            let air = sim.simulator.air

            // Where the link's bad spells fall, known in advance from the seed.
            var predicted = scenario.radioModel.burstProcess(seed: scenario.seed, from: "door", to: "alpha")
            var inBadSpell = 0

            /// Over `windows` half-seconds: the fraction of the beacon's packets received, and the
            /// windows without any. With `bursts`, every window inside a predicted bad spell must be
            /// silent.
            func listen(windows: Int, bursts: Bool) async -> (received: Double, silent: Int) {
                let start = await air.stats
                var silent = 0
                for _ in 0..<windows {
                    let before = await air.stats.reports
                    let from = sim.simulator.clock.now
                    await sim.advance(0.5)
                    let heard = await air.stats.reports != before
                    if !heard { silent += 1 }
                    if bursts && predicted.state(at: from) == .bad && predicted.spellEnd > sim.simulator.clock.now {
                        inBadSpell += 1
                        #expect(!heard, "heard the beacon inside the bad spell \(predicted.spellStart)...\(predicted.spellEnd)")
                    }
                }
                let end = await air.stats
                return (Double(end.reports - start.reports) / Double(end.transmissions - start.transmissions), silent)
            }

            // Received: (1 − 0.3)·(1 − 0.3) = 0.49. Over 300 s the time bad has a standard error
            // √(2·0.3·0.7·1·0.7/300) = 0.031, times 0.7: tolerance 4·0.022 ≈ 0.09. A half-second
            // window is silent mostly when a bad spell covers it: 0.3·e^(−0.5) ≈ 18 % of windows,
            // against 0.3^4.8 ≈ 0.3 % under independent loss alone.
            let bursty = await listen(windows: 600, bursts: true)
            #expect(abs(bursty.received - 0.49) < 0.09, "received \(bursty.received)")
            #expect(bursty.silent > 50, "\(bursty.silent) silent windows")
            #expect(inBadSpell > 40 && inBadSpell <= bursty.silent, "\(inBadSpell) windows in a bad spell")

            try await sim.control("Configure", [.vardict(["BurstLossRate": .double(0)])])
            let state = try await sim.control("GetState").first?.string ?? ""
            #expect(state.contains("\"burst_loss_rate\":0") && state.contains("\"burst_duration\":1"))
            let independent = await listen(windows: 200, bursts: false)
            #expect(abs(independent.received - 0.7) < 0.04, "received \(independent.received)")  // binomial, ~950 packets
            #expect(independent.silent <= 3, "\(independent.silent) silent windows")

            await expectError("org.proximityd.BlueZSim.Error.InvalidArguments",
                              "burst_duration: must be 0.01 or more seconds (the mean length of a bad spell), not 0") {
                try await sim.control("Configure", [.vardict(["BurstDuration": .double(0)])])
            }
            await alpha.close()
        }
    }

    /// With `report_batching` 1 s, alpha's bluetoothd takes the beacon's reports in once a
    /// second, about ten at a time (a beacon every 105 ms on average); configured back to 0,
    /// each as it comes.
    @Test func reportsTakenInBunches() async throws {
        var scenario = twoBoxes(beacons: [iBeacon("door", "C0:00:00:00:00:01", at: Position(x: 0, y: 2))], seed: 5)
        scenario.boxes.removeLast()
        scenario.radio.reportBatching = 1
        try await withSimBoxes(scenario, time: .simulated) { sim in
            let alpha = try await sim.client("alpha")
            let log = try await SignalLog.bluez(alpha)
            try await alpha.adapter("StartDiscovery")
            try await log.wait { $0.isChange(adapterPath, BlueZ.adapterInterface) && $0.changed["Discovering"] == .boolean(true) }
            let air = sim.simulator.air

            /// The reports taken in during each of `steps` tenths of a second.
            func reportsPerTenth(_ steps: Int) async -> [Int] {
                var counts: [Int] = []
                for _ in 0..<steps {
                    let before = await air.stats.reports
                    await sim.advance(0.1)
                    counts.append(await air.stats.reports - before)
                }
                return counts
            }

            let batched = await reportsPerTenth(200)
            let bunches = batched.indices.filter { batched[$0] > 0 }
            #expect((19...21).contains(bunches.count), "\(batched)")
            #expect(zip(bunches, bunches.dropFirst()).allSatisfy { (9...11).contains($1 - $0) }, "\(bunches)")
            #expect(bunches.dropFirst().allSatisfy { batched[$0] >= 7 }, "\(batched)")

            try await sim.control("Configure", [.vardict(["ReportBatching": .double(0)])])
            let direct = await reportsPerTenth(50)
            // (The first report takes in the ones still waiting with it.)
            #expect(direct.filter { $0 > 0 }.count >= 40 && direct.dropFirst().allSatisfy { $0 <= 2 }, "\(direct)")
            #expect(direct.reduce(0, +) >= 40)

            await expectError("org.proximityd.BlueZSim.Error.InvalidArguments",
                              "report_batching: must be 0...10 seconds (0: each report as it is received), not 11") {
                try await sim.control("Configure", [.vardict(["ReportBatching": .double(11)])])
            }
            await alpha.close()
        }
    }
}
