import DBusKit
import Foundation
import Logging
import ProximityAPI
import ProximityCore
@testable import ProximityNode
import ProximityTesting
import Testing

/// The node's events reach a slow subscriber without losing a region delta: whole-state events
/// give way, and region changes merge rather than drop.
@Suite("lossless region deltas")
struct LosslessRegionEventsTests {
    /// The statuses of regions `ids`, as the monitor makes them.
    static func statuses(_ ids: [String]) throws -> [RegionStatus] {
        var monitor = RegionMonitor()
        for id in ids { _ = try monitor.start(Region(identifier: id, matcher: RegionMatcher(), source: .bus), at: 0) }
        return ids.compactMap { monitor.status(of: $0) }
    }

    static func define(_ ids: [String], sequence: UInt64) throws -> NodeEvent {
        .regions(RegionChanges(sequence: sequence, defined: try statuses(ids)))
    }

    static func remove(_ ids: [String], sequence: UInt64) -> NodeEvent {
        .regions(RegionChanges(sequence: sequence, removed: ids))
    }

    /// What a subscriber that applies removals, then definitions, shows after `events`.
    static func shown(_ events: [NodeEvent]) -> Set<String> {
        var shown = Set<String>()
        for case .regions(let changes) in events {
            shown.subtract(changes.removed)
            shown.formUnion(changes.defined.map(\.region.identifier))
        }
        return shown
    }

    static func drain(_ stream: NodeEventStream) async -> [NodeEvent] {
        var out: [NodeEvent] = []
        for await event in stream { out.append(event) }
        return out
    }

    @Test("with a buffer of 2, whole events give way and every region delta arrives, in order")
    func wholeEventsGiveWay() async throws {
        let events = NodeEvents()
        let stream = events.subscribe(buffer: 2)
        events.publish(try Self.define(["a", "b"], sequence: 1))
        for i in 0 ..< 20 { events.publish(.clearInterval(Double(i))) }
        events.publish(Self.remove(["a"], sequence: 2))
        for i in 20 ..< 40 { events.publish(.clearInterval(Double(i))) }
        events.finish()
        let seen = await Self.drain(stream)
        #expect(Self.shown(seen) == ["b"])
        let sequences = seen.compactMap { if case .regions(let c) = $0 { c.sequence } else { nil } }
        #expect(sequences.last == 2, "the last region change is the removal, alone or merged: \(sequences)")
        #expect(seen.last == .clearInterval(39), "the newest of a kind stays")
        #expect(seen.count <= 2, "\(seen.count) events held")
    }

    @Test("with only region deltas pending, the oldest merge with the same outcome")
    func deltasMerge() async throws {
        let events = NodeEvents()
        let stream = events.subscribe(buffer: 2)
        let steps: [NodeEvent] = [
            try Self.define(["a"], sequence: 1), try Self.define(["b"], sequence: 2), Self.remove(["a"], sequence: 3),
            try Self.define(["c"], sequence: 4), Self.remove(["b"], sequence: 5), try Self.define(["a"], sequence: 6),
            Self.remove(["c"], sequence: 7), try Self.define(["d"], sequence: 8),
        ]
        for step in steps { events.publish(step) }
        events.finish()
        let seen = await Self.drain(stream)
        #expect(seen.count <= 2)
        #expect(Self.shown(seen) == Self.shown(steps))
        #expect(Self.shown(seen) == ["a", "d"])
        if case .regions(let last)? = seen.last { #expect(last.sequence == 8) } else { Issue.record("no region change last") }
    }

    @Test("a merge keeps each region's last determined state when it trims events")
    func mergeTrims() {
        let many = (0 ..< RegionChanges.maxMergedEvents).map { RegionEvent.entered("r\($0 % 7)") }
        let a = RegionChanges(sequence: 1, events: [.determined("x", .inside)] + many)
        let b = RegionChanges(sequence: 2, events: [.exited("x")] + many)
        let merged = a.merged(with: b)
        #expect(merged.events.count == RegionChanges.maxMergedEvents)
        #expect(merged.events.contains(.determined("x", .inside)))
        #expect(merged.events.last == b.events.last)
    }

    @Test("the bus exporter, fed through a buffer of 2 while busy, unexports every removed region")
    func exporterUnexports() async throws {
        let bus = try await PrivateBus.start()
        let server = try await bus.connect()
        let client = try await bus.connect()
        let exporter = BusExporter(connection: server, logger: Logger(label: "test"))
        // Five regions shown.
        let first = NodeEvents()
        let firstStream = first.subscribe(buffer: 64)
        first.publish(try Self.define(["r1", "r2", "r3", "r4", "r5"], sequence: 1))
        first.finish()
        await exporter.run(firstStream)
        for id in ["r1", "r5"] {
            #expect(try await client.call(destination: server.uniqueName, path: ProximityBus.regionPath(id), interface: .properties,
                                          member: "Get", [.string("org.proximityd.Region1"), .string("Identifier")]) == [.variant(.string(id))])
        }
        // Four removed while the exporter is busy (it reads nothing until all is published), among
        // many whole events: a buffer of 2 loses those, not the removal.
        let second = NodeEvents()
        let secondStream = second.subscribe(buffer: 2)
        for i in 0 ..< 10 { second.publish(.clearInterval(Double(i))) }
        second.publish(Self.remove(["r1", "r2"], sequence: 2))
        for i in 10 ..< 20 { second.publish(.clearInterval(Double(i))) }
        second.publish(Self.remove(["r3", "r4"], sequence: 3))
        for i in 20 ..< 30 { second.publish(.clearInterval(Double(i))) }
        second.finish()
        await exporter.run(secondStream)
        for id in ["r1", "r2", "r3", "r4"] {
            do {
                _ = try await client.call(destination: server.uniqueName, path: ProximityBus.regionPath(id), interface: .properties,
                                          member: "Get", [.string("org.proximityd.Region1"), .string("Identifier")])
                Issue.record("\(id) is still exported")
            } catch let error as DBusError {
                #expect(error.name == .unknownObject, "\(id): \(error)")
            }
        }
        #expect(try await client.call(destination: server.uniqueName, path: ProximityBus.regionPath("r5"), interface: .properties,
                                      member: "Get", [.string("org.proximityd.Region1"), .string("Identifier")]) == [.variant(.string("r5"))])
        await client.close()
        await server.close()
        await bus.stop()
    }
}
