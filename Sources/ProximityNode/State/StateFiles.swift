import Foundation
import Logging
import ProximityCore

/// The state directory's files as the step names them: loads them at start (``NodeStep/Saved``)
/// and writes the ``StateFile`` a step asks for, each atomically, with the clock's times.
public struct StateFiles: Sendable {
    public let state: StateDirectory
    let clock: any NodeClock
    let logger: Logger

    public init(state: StateDirectory, clock: any NodeClock, logger: Logger) {
        self.state = state
        self.clock = clock
        self.logger = logger
    }

    var peerDirectory: PeerDirectory { PeerDirectory(state: state, clock: clock, logger: logger) }

    /// What the node keeps, as saved. The identified peers are a cache: an unreadable file is
    /// ignored with a warning; the other files stop the start with a clear error.
    public func load() throws(StateError) -> NodeStep.Saved {
        var saved = NodeStep.Saved()
        saved.settings = try NodeSettings.load(from: state)
        saved.peers = peerDirectory.load()
        saved.regions = try RegionStore(state: state).load(clock: clock)
        saved.alerts = try AlertStore(state: state).load(clock: clock)
        saved.profile = try ProfileStore(state: state).load(clock: clock)
        return saved
    }

    public func write(_ file: StateFile) throws(StateError) {
        switch file {
        case .settings(let settings): try settings.save(to: state)
        case .regions(let regions): try RegionStore(state: state).save(regions, clock: clock)
        case .alerts(let bus, let engine): try AlertStore(state: state).save(busAlerts: bus, engine: engine, clock: clock)
        case .profile(let saved): try ProfileStore(state: state).save(saved, clock: clock)
        case .peers(let peers): try peerDirectory.save(peers)
        }
    }

    /// Writes `files` in order, all or nothing: should one fail, those written before it are
    /// written back as `previous` gives them, and the failure is the caller's refusal.
    public func commit(_ files: [StateFile], previous: (StateFileKind) -> StateFile) throws(NodeRefusal) {
        for (i, file) in files.enumerated() {
            do { try write(file) } catch {
                for written in files[..<i] {
                    do { try write(previous(written.kind)) } catch {
                        logger.error("cannot write \(written.what) back as it was", metadata: ["error": "\(error)"])
                    }
                }
                throw NodeRefusal(.failed, "cannot save \(file.what): \(error)")
            }
        }
    }

    public func exists(_ kind: StateFileKind) -> Bool {
        let name = switch kind {
        case .settings: NodeSettings.fileName
        case .regions: RegionStore.fileName
        case .alerts: AlertStore.fileName
        case .profile: ProfileStore.fileName
        case .peers: PeerDirectory.fileName
        }
        return FileManager.default.fileExists(atPath: state.file(name).path)
    }
}
