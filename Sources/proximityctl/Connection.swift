import ArgumentParser
import DBusKit
import Foundation
import ProximityAPI

/// Where the node is: shared by every subcommand, and the one place a subcommand reaches it.
///
/// These options may also come before the subcommand (`proximityctl --bus ADDRESS peers`):
/// ``NodeOptionPlacement`` moves them after it before ArgumentParser sees the command line.
/// Without any of them the bus is `PROXIMITYD_BUS`'s, or else the system bus, whose address
/// libdbus takes from `DBUS_SYSTEM_BUS_ADDRESS` (default `unix:path=/run/dbus/system_bus_socket`).
struct NodeOptions: ParsableArguments {
    /// The environment variable naming the bus when no option does.
    static let busVariable = "PROXIMITYD_BUS"

    @Option(name: .customLong("bus"),
            help: ArgumentHelp("The node's bus: system, session, or a D-Bus address (default: $PROXIMITYD_BUS, else the system bus).",
                               valueName: "bus"))
    var busOption: String?

    @Flag(name: .customLong("system"), help: "The system bus: the same as --bus system.")
    var system = false

    @Flag(name: .customLong("session"), help: "The session bus: the same as --bus session.")
    var session = false

    @Option(name: [.customShort("H"), .customLong("host")],
            help: ArgumentHelp("The node on another box: its system bus over ssh, as busctl -H " +
                               "(ssh -xT [-p PORT] [USER@]HOST systemd-stdio-bridge).",
                               valueName: "[user@]host[:port]"))
    var host: String?

    @Option(name: .customLong("bus-name"), help: ArgumentHelp("The node's well-known name.", valueName: "name"))
    var busName: String = ProximityBus.defaultBusName.rawValue

    func validate() throws {
        let given = [busOption.map { _ in "--bus" }, system ? "--system" : nil, session ? "--session" : nil, host.map { _ in "--host" }]
            .compactMap { $0 }
        if given.count > 1 { throw ValidationError("give one of \(given.joined(separator: ", ")), not several") }
        if let host {
            do { _ = try RemoteBus.address(host: host) } catch { throw ValidationError("--host: \(error)") }
        } else if let busOption {
            do { _ = try BusAddress(parsing: busOption) } catch { throw ValidationError("--bus: \(error.message)") }
        } else if given.isEmpty, let variable = Self.environmentBus {
            do { _ = try BusAddress(parsing: variable) } catch { throw ValidationError("\(Self.busVariable): \(error.message)") }
        }
        do { _ = try BusName(busName) } catch { throw ValidationError("--bus-name: \(error)") }
    }

    /// `PROXIMITYD_BUS`, when set and not empty.
    static var environmentBus: String? {
        guard let value = ProcessInfo.processInfo.environment[busVariable], !value.isEmpty else { return nil }
        return value
    }

    /// The bus, as given: the option, then `PROXIMITYD_BUS`, then `system`; with `--host`, the
    /// `unixexec:` address of ``RemoteBus``.
    var bus: String {
        if let host { return try! RemoteBus.address(host: host) }
        if let busOption { return busOption }
        if system { return "system" }
        if session { return "session" }
        return Self.environmentBus ?? "system"
    }

    /// The bus, parsed (``validate()`` has checked it).
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
