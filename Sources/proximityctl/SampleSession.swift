import ArgumentParser
import DBusKit
import Dispatch
import Foundation
import ProximityAPI
import ProximityCore

/// A recording session with a node (`Node1.StartRecording`): the node's `Samples` signals for some
/// peers, one batch per report, until SIGINT or SIGTERM, a time limit, or the node leaving. Shared
/// by `record` and `calibrate`.
enum SampleSession {
    enum End: Sendable, Equatable {
        /// SIGINT or SIGTERM.
        case interrupted(Int32)
        /// The time limit passed.
        case timeUp
        /// The node left the bus, or the connection closed: what was received is kept, exit 69.
        case nodeLeft
        case disconnected
    }

    private enum Event: Sendable {
        case batch(RecordedBatch)
        case ended(End)
    }

    /// Subscribes (the node leaving, then `Samples`), starts recording `peers` (already checked),
    /// calls `started` once the node records, then `handle` with each batch in order until the
    /// session ends; then stops recording (unless the node is gone). `seconds` counts from the
    /// start. Errors of the calls and of `handle` are thrown.
    static func run(_ node: NodeProxy, peers: [String], seconds: Double?, started: () async throws -> Void,
                    handle: (RecordedBatch) throws -> Void) async throws -> End {
        let (events, sink) = AsyncStream<Event>.makeStream()
        // SIGINT and SIGTERM end the session, so the last batch is written and the node told.
        let sources = await interruptionSources { sink.yield(.ended(.interrupted($0))) }
        defer { for source in sources { source.cancel() } }

        let departure = try await node.departure()
        let batches = try await node.recordedBatches()
        var tasks: [Task<Void, Never>] = []
        defer { for task in tasks { task.cancel() } }
        tasks.append(Task {
            for await _ in departure {
                sink.yield(.ended(.nodeLeft))
                return
            }
            sink.yield(.ended(.disconnected))
        })
        tasks.append(Task {
            for await batch in batches { sink.yield(.batch(batch)) }
            sink.yield(.ended(.disconnected))
        })
        // It may have left before the subscriptions.
        guard try await node.isStillThere() else { return .nodeLeft }
        try await node.startRecording(peers)
        try await started()
        if let seconds {
            tasks.append(Task {
                // The length of the recording the user asked for; then the report that carries
                // the samples of the last moments, unless it takes more than 2 s.
                try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
                if !Task.isCancelled { sink.yield(.ended(.timeUp)) }
                try? await Task.sleep(for: .seconds(2))
                if !Task.isCancelled { sink.yield(.ended(.timeUp)) }
            })
        }
        var end = End.disconnected
        var draining = false
        for await event in events {
            switch event {
            case .batch(let batch):
                try handle(batch)
                guard draining else { continue }
                end = .timeUp
            case .ended(.timeUp) where !draining:
                draining = true
                continue
            case .ended(let reason):
                end = reason
            }
            break
        }
        if end != .nodeLeft && end != .disconnected {
            // The node also stops when this client leaves the bus; this says so at once.
            try? await node.stopRecording()
        }
        return end
    }

    /// The peers as the node names them (capitals put right), or a usage error naming the bad one.
    static func peers(_ given: [String], option: String) throws -> [String] {
        var seen = Set<String>()
        var peers: [String] = []
        for text in given {
            let peer = PeerID.canonical(text)
            if PeerID.formProblem(peer) != nil {
                throw ValidationError("\(option): \(PeerID.formProblem(text) ?? "\(text.debugDescription) is not a peer identifier")")
            }
            if seen.insert(peer).inserted { peers.append(peer) }
        }
        return peers
    }
}
