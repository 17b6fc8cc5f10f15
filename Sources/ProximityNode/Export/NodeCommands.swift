import DBusKit
import ProximityAPI

/// The bus's way into the engine: a handler's ``NodeCommand`` runs there, a refusal comes back
/// as the bus's error (`org.proximityd.Error.*`), and the answer waits until the exporter shows
/// the change (objects exported, signals sent), so a caller sees what it did.
struct NodeCommands: Sendable {
    let engine: NodeEngine
    let exporter: BusExporter

    @discardableResult
    func run(_ command: NodeCommand) async throws(DBusError) -> StepOutcome {
        let outcome: StepOutcome
        do { outcome = try await engine.command(command) } catch { throw error.busError }
        await exporter.waitUntilShown(outcome.sequence)
        return outcome
    }

    /// A value of the node's state.
    func read<T: Sendable>(_ value: @Sendable (NodeStep) -> T) async -> T { await engine.read(value) }

    /// A value of the node's state, or a refusal as the bus's error.
    func read<T: Sendable>(_ value: @Sendable (NodeStep) -> Result<T, NodeRefusal>) async throws(DBusError) -> T {
        do { return try await engine.read(value).get() } catch { throw error.busError }
    }
}

extension NodeRefusal {
    /// The refusal as the bus names it.
    var busError: DBusError {
        let name: ErrorName = switch kind {
        case .invalidArguments: ProximityBus.Errors.invalidArguments
        case .doesNotExist: ProximityBus.Errors.doesNotExist
        case .notPermitted: ProximityBus.Errors.notPermitted
        case .limitReached: ProximityBus.Errors.limitReached
        case .alreadyExists: ProximityBus.Errors.alreadyExists
        case .notOffered: ProximityBus.Errors.notOffered
        case .invalidConfiguration: ProximityBus.Errors.invalidConfiguration
        case .failed: ProximityBus.Errors.failed
        }
        return DBusError(name, message)
    }
}
