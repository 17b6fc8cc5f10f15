import ProximityCore
@testable import ProximityNode
import Testing

/// The adapter link on a manual clock: each input's actions and notes, nothing sleeps.
@Suite struct AdapterLinkTests {
    static let address = "02:00:00:00:00:01"

    /// A link that saw its adapter powered, and whose registration and discovery succeeded.
    func readyLink() -> AdapterLink {
        var link = AdapterLink(powerOn: false)
        _ = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 0)
        _ = link.registrationEnded(succeeded: true, generation: link.generation, at: 0.1)
        _ = link.discoveryEnded(succeeded: true, generation: link.generation, at: 0.1)
        return link
    }

    @Test("a powered adapter: register, start discovery, consider known devices; success publishes Advertising and Discovering")
    func ready() {
        var link = AdapterLink(powerOn: false)
        let (actions, notes) = link.adapterSeen(powered: true, discovering: false, address: "02:00:00:00:00:0a", at: 0)
        #expect(actions == [.register, .startDiscovery, .considerKnownDevices])
        #expect(notes == [.ready(address: "02:00:00:00:00:0A")])
        #expect(link.registrationEnded(succeeded: true, generation: link.generation, at: 1).0 == [.publish(advertising: true, discovering: false)])
        #expect(link.discoveryEnded(succeeded: true, generation: link.generation, at: 1).0 == [.publish(advertising: true, discovering: true), .health(.ok)])
        #expect(link.isRegistered)
    }

    @Test("an adapter that is off is powered on once with --power-on, else reported once")
    func off() {
        var powering = AdapterLink(powerOn: true)
        #expect(powering.adapterSeen(powered: false, discovering: false, address: Self.address, at: 0) == ([.powerOn], [.poweringOn]))
        #expect(powering.adapterSeen(powered: false, discovering: false, address: Self.address, at: 1) == ([], []))
        var waiting = AdapterLink(powerOn: false)
        #expect(waiting.adapterSeen(powered: false, discovering: false, address: Self.address, at: 0) == ([], [.adapterOff]))
        #expect(waiting.adapterSeen(powered: false, discovering: false, address: Self.address, at: 1) == ([], []))
        #expect(waiting.adapterSeen(powered: true, discovering: false, address: Self.address, at: 2).0.contains(.register))
    }

    @Test("failed registration is retried after 1, 2, 4 … 60 s, at exactly its time")
    func registrationBackoff() {
        var link = AdapterLink(powerOn: false)
        _ = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 0)
        var t = 0.0
        var delays: [Double] = []
        for _ in 0..<8 {
            let (_, notes) = link.registrationEnded(succeeded: false, generation: link.generation, at: t)
            guard case .registrationFailed(let delay)? = notes.first else { Issue.record("\(notes)"); return }
            delays.append(delay)
            #expect(link.tick(at: t + delay - 0.001).0 == [])
            t += delay
            #expect(link.tick(at: t).0 == [.register])
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60])
        let (actions, notes) = link.registrationEnded(succeeded: true, generation: link.generation, at: t)
        #expect(actions == [.publish(advertising: true, discovering: false)] && notes == [.registered(afterFailure: true)])
    }

    @Test("discovery failures back off on their own schedule")
    func discoveryBackoff() {
        var link = AdapterLink(powerOn: false)
        _ = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 0)
        #expect(link.discoveryEnded(succeeded: false, generation: link.generation, at: 0).1 == [.discoveryFailed(retryIn: 1)])
        #expect(link.tick(at: 1).0 == [.startDiscovery])
        #expect(link.discoveryEnded(succeeded: false, generation: link.generation, at: 1).1 == [.discoveryFailed(retryIn: 2)])
    }

    @Test("losing the adapter or bluetoothd publishes nothing on, and results from before are stale")
    func lostAndStale() {
        var link = readyLink()
        let before = link.generation
        let (actions, notes) = link.bluezGone()
        #expect(actions == [.publish(advertising: false, discovering: false), .health(.recovering("bluetoothd went away: waiting for bluetoothd (org.bluez)"))])
        #expect(notes == [.lost("bluetoothd went away", waitingFor: "bluetoothd (org.bluez)")])
        #expect(link.bluezGone() == ([], []), "lost once")
        _ = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 5)
        // The registration started before the loss answers late: ignored.
        #expect(link.registrationEnded(succeeded: true, generation: before, at: 6) == ([], []))
        #expect(!link.isRegistered)
        var off = readyLink()
        #expect(off.adapterSeen(powered: false, discovering: false, address: Self.address, at: 1).1
                == [.lost("the adapter was powered off", waitingFor: "the adapter")])
        var removed = readyLink()
        #expect(removed.adapterRemoved().1 == [.lost("the adapter was removed", waitingFor: "the adapter")])
    }

    @Test("BlueZ's Release: Advertising false at once, registered again a second later")
    func released() {
        var link = readyLink()
        #expect(link.released(at: 10) == ([.publish(advertising: false, discovering: true)], [.released]))
        #expect(link.tick(at: 10.5).0 == [])
        #expect(link.tick(at: 11).0 == [.register])
        #expect(link.registrationEnded(succeeded: true, generation: link.generation, at: 11).0 == [.publish(advertising: true, discovering: true)])
    }

    @Test("discovery stopped by someone else is started again")
    func discoveryStopped() {
        var link = readyLink()
        let (actions, notes) = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 3)
        #expect(actions == [.startDiscovery, .publish(advertising: true, discovering: false)] && notes == [.discoveryStoppedByOthers])
        #expect(link.adapterSeen(powered: true, discovering: true, address: Self.address, at: 3.1) == ([], []))
    }

    // MARK: - The watchdog

    /// `rate` reports a second from `from` to `to`.
    func hear(_ link: inout AdapterLink, rate: Double, from: Double, to: Double) {
        var t = from
        while t < to {
            _ = link.heard(at: t)
            t += 1 / rate
        }
    }

    @Test("health: recovering while starting, ok once discovery runs; a lost bluetoothd is recovering (counted) until discovery runs again")
    func healthFollowsTheLink() {
        var link = AdapterLink(powerOn: false)
        #expect(link.health == .starting)
        _ = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 0)
        _ = link.registrationEnded(succeeded: true, generation: link.generation, at: 0.1)
        let (actions, notes) = link.discoveryEnded(succeeded: true, generation: link.generation, at: 0.1)
        #expect(actions.contains(.health(.ok)) && link.health == .ok)
        #expect(notes.contains { if case .recovered = $0 { true } else { false } })
        let gone = link.bluezGone()
        #expect(gone.0.contains(.health(.recovering("bluetoothd went away: waiting for bluetoothd (org.bluez)"))))
        #expect(link.recoveries == ["bluetoothd": 1])
        // bluetoothd powers its adapter off as it stops, then leaves: the health says the latest cause.
        var stopping = readyLink()
        _ = stopping.adapterSeen(powered: false, discovering: false, address: Self.address, at: 1)
        #expect(stopping.health == .recovering("the adapter was powered off: waiting for the adapter"))
        #expect(stopping.bluezGone() == ([.health(.recovering("bluetoothd went away: waiting for bluetoothd (org.bluez)"))], []))
        #expect(stopping.recoveries == ["adapter": 1], "one recovery")
        _ = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 5)
        #expect(link.health.state == "recovering")
        #expect(link.discoveryEnded(succeeded: true, generation: link.generation, at: 5.1).0.contains(.health(.ok)))
    }

    @Test("a quiet room is not a deaf scanner: a few advertisements a minute, then minutes of silence, and nothing is done")
    func quietRoomIsNoFault() {
        var link = readyLink()
        hear(&link, rate: 0.1, from: 1, to: 61)  // 6 reports in a minute
        for t in stride(from: 61.0, through: 600, by: 1) {
            #expect(link.tick(at: t).0.isEmpty, "at \(t)")
        }
        #expect(link.health == .ok)
    }

    @Test("a deaf scanner: after a silence the reception before makes implausible, discovery restarted; 15 s later the adapter power-cycled; 30 s later failed, then a power cycle again after 60, 120 … 600 s; the first advertisement ends it, ok; each step noted once")
    func deafScannerRecovered() {
        var link = readyLink()
        hear(&link, rate: 10, from: 1, to: 61)
        // 10 a second: 20 missed reports take 2 s, so the floor of 20 s decides.
        for t in stride(from: 61.0, through: 80.5, by: 0.5) { #expect(link.tick(at: t).0.isEmpty, "at \(t)") }
        var (actions, notes) = link.tick(at: 81.5)
        #expect(actions.first == .restartDiscovery)
        #expect(link.health.state == "recovering" && link.health.detail.contains("restarting it"), "\(link.health)")
        #expect(notes.count == 1 && { if case .deaf = notes[0] { true } else { false } }())
        #expect(link.recoveries["deaf"] == 1)
        // The restart's own Discovering false and true are not "stopped by others".
        #expect(link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 82).0.isEmpty)
        #expect(link.tick(at: 96).0.isEmpty)
        (actions, notes) = link.tick(at: 96.5)
        #expect(actions.first == .powerCycle && notes == [.stillDeafPowerCycling])
        // The power cycle: off (part of the recovery, health unchanged), on, set up again.
        let off = link.adapterSeen(powered: false, discovering: false, address: Self.address, at: 96.6)
        #expect(!off.0.contains { if case .health = $0 { true } else { false } })
        _ = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 96.8)
        _ = link.registrationEnded(succeeded: true, generation: link.generation, at: 96.9)
        #expect(!link.discoveryEnded(succeeded: true, generation: link.generation, at: 96.9).0.contains(.health(.ok)), "not ok before it hears")
        #expect(link.tick(at: 126).0.isEmpty)
        (actions, notes) = link.tick(at: 126.5)
        #expect(link.health.state == "failed" && notes == [.recoveryFailed(retryIn: 60)], "\(link.health) \(notes)")
        #expect(link.tick(at: 186).0.isEmpty)
        #expect(link.tick(at: 186.5).0 == [.powerCycle])
        #expect(link.tick(at: 216.5).1 == [.recoveryFailed(retryIn: 120)])
        #expect(link.tick(at: 336.5).0 == [.powerCycle])
        // It hears again: ok, noted once.
        let back = link.heard(at: 340)
        #expect(back.0 == [.health(.ok)] && back.1.count == 1)
        #expect(link.heard(at: 340.1) == ([], []))
        #expect(link.tick(at: 350).0.isEmpty)
    }
}
