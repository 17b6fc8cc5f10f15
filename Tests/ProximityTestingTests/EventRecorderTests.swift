import ProximityTesting
import Testing

@Suite("EventRecorder")
struct EventRecorderTests {
    @Test("a wait takes an event already recorded, or is resumed by the one that matches")
    func resumedByTheEvent() async throws {
        let recorder = EventRecorder<Int>()
        recorder.record(1)
        #expect(await recorder.wait(timeout: .seconds(5)) { $0 == 1 } == 1)
        async let later = recorder.wait(timeout: .seconds(30)) { $0 > 10 }
        recorder.record(2)
        recorder.record(11)
        // Resumed by 11, long before its timeout.
        let clock = ContinuousClock()
        let start = clock.now
        #expect(await later == 11)
        #expect(start.duration(to: clock.now) < .seconds(10))
        #expect(recorder.events == [1, 2, 11])
    }

    @Test("from skips the events before it; a wait with no match ends with nil after its timeout")
    func fromAndTimeout() async throws {
        let recorder = EventRecorder<Int>()
        recorder.record(1)
        let clock = ContinuousClock()
        let start = clock.now
        #expect(await recorder.wait(from: 1, timeout: .milliseconds(100)) { $0 == 1 } == nil)
        #expect(start.duration(to: clock.now) >= .milliseconds(100))
        await #expect(throws: TestKitError.self) {
            try await recorder.require("a 2", timeout: .milliseconds(50)) { $0 == 2 }
        }
    }

    @Test("a recorder of a sequence keeps its elements and finishes with it: waits still open end")
    func recordsASequence() async throws {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let recorder = EventRecorder(recording: stream)
        async let never = recorder.wait(timeout: .seconds(30)) { $0 == "never" }
        continuation.yield("a")
        try await recorder.require("a", timeout: .seconds(5)) { $0 == "a" }
        continuation.finish()
        #expect(await never == nil)
        #expect(recorder.events == ["a"])
    }

    @Test("until checks its condition again at each event, and fails after its timeout")
    func until() async throws {
        let recorder = EventRecorder<Int>()
        let box = EventRecorder<Int>()  // the state the condition reads
        async let done: Void = recorder.until("three", timeout: .seconds(30)) { box.count == 3 }
        for i in 0..<3 {
            box.record(i)
            recorder.record(i)
        }
        try await done
        await #expect(throws: TestKitError.self) {
            try await recorder.until("four", timeout: .milliseconds(50)) { box.count == 4 }
        }
    }
}
