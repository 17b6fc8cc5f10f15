import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI

/// Where the node is: shared by every subcommand, and the one place a subcommand reaches it.
struct NodeOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The node's bus: system, session, or a D-Bus address.", valueName: "bus"))
    var bus: String = "system"

    @Option(name: .customLong("bus-name"), help: ArgumentHelp("The node's well-known name.", valueName: "name"))
    var busName: String = ProximityBus.defaultBusName.rawValue

    func validate() throws {
        do { _ = try BusAddress(parsing: bus) } catch { throw ValidationError("--bus: \(error.message)") }
        do { _ = try BusName(busName) } catch { throw ValidationError("--bus-name: \(error)") }
    }

    /// `--bus`, parsed (``validate()`` has checked it).
    var address: BusAddress { try! BusAddress(parsing: bus) }
    /// `--bus-name`, parsed (``validate()`` has checked it).
    var name: BusName { try! BusName(busName) }

    /// Connects and checks the node is there, runs `body`, and closes the connection. A failure to
    /// reach the node, or an error out of `body` (reported as "`what`: error"), is one clear line
    /// on stderr and exit 69.
    func withNode<T: Sendable>(_ what: String, _ body: (NodeProxy) async throws -> T) async -> T {
        let node: NodeProxy
        do {
            node = try await NodeProxy.connect(to: address, name: name)
        } catch {
            fail("\(error)")
        }
        do {
            let result = try await body(node)
            await node.close()
            return result
        } catch {
            await node.close()
            fail("\(what): \(error)")
        }
    }
}

func fail(_ message: String, status: Int32 = 69) -> Never {
    FileHandle.standardError.write(Data("proximityctl: error: \(message)\n".utf8))
    exit(status)
}
