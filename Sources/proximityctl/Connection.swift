import ArgumentParser
import DBusKit
import Foundation
import ProximityNode

/// Where the node is: shared by every subcommand.
struct NodeOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The node's bus: system, session, or a D-Bus address.", valueName: "bus"))
    var bus: String = "system"

    @Option(name: .customLong("bus-name"), help: ArgumentHelp("The node's well-known name.", valueName: "name"))
    var busName: String = NodeConfiguration.defaultBusName.rawValue

    func validate() throws {
        do { _ = try BusAddress(parsing: bus) } catch { throw ValidationError("--bus: \(error.message)") }
        do { _ = try BusName(busName) } catch { throw ValidationError("--bus-name: \(error)") }
    }

    /// Connects and checks the node is there; any failure is one clear line and exit 69.
    func connect() async -> (DBusConnection, BusName) {
        let address = try! BusAddress(parsing: bus)
        let name = try! BusName(busName)
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: address)
        } catch {
            fail("cannot connect to the \(bus) bus: \(error.message)")
        }
        let owner: BusName?
        do {
            owner = try await connection.nameOwner(of: name)
        } catch {
            await connection.close()
            fail("cannot ask the \(bus) bus who owns \(name): \(error)")
        }
        if owner == nil {
            await connection.close()
            fail("proximityd is not running on the \(bus) bus (\(name) has no owner)")
        }
        return (connection, name)
    }
}

func fail(_ message: String, status: Int32 = 69) -> Never {
    FileHandle.standardError.write(Data("proximityctl: error: \(message)\n".utf8))
    exit(status)
}
