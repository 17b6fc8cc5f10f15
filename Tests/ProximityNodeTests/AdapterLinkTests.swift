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
        #expect(link.discoveryEnded(succeeded: true, generation: link.generation, at: 1).0 == [.publish(advertising: true, discovering: true)])
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
            #expect(link.tick(at: t + delay - 0.001) == [])
            t += delay
            #expect(link.tick(at: t) == [.register])
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
        #expect(link.tick(at: 1) == [.startDiscovery])
        #expect(link.discoveryEnded(succeeded: false, generation: link.generation, at: 1).1 == [.discoveryFailed(retryIn: 2)])
    }

    @Test("losing the adapter or bluetoothd publishes nothing on, and results from before are stale")
    func lostAndStale() {
        var link = readyLink()
        let before = link.generation
        let (actions, notes) = link.bluezGone()
        #expect(actions == [.publish(advertising: false, discovering: false)])
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
        #expect(link.tick(at: 10.5) == [])
        #expect(link.tick(at: 11) == [.register])
        #expect(link.registrationEnded(succeeded: true, generation: link.generation, at: 11).0 == [.publish(advertising: true, discovering: true)])
    }

    @Test("discovery stopped by someone else is started again")
    func discoveryStopped() {
        var link = readyLink()
        let (actions, notes) = link.adapterSeen(powered: true, discovering: false, address: Self.address, at: 3)
        #expect(actions == [.startDiscovery, .publish(advertising: true, discovering: false)] && notes == [.discoveryStoppedByOthers])
        #expect(link.adapterSeen(powered: true, discovering: true, address: Self.address, at: 3.1) == ([], []))
    }
}
