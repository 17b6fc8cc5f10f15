import ArgumentParser
import BlueZSim
import DBusKit
import Foundation

/// Options every `ctl` subcommand shares.
struct ControlOptions: ParsableArguments {
    @Option(help: "A box bus of the simulation (default: $DBUS_SYSTEM_BUS_ADDRESS).")
    var bus: String?

    func validate() throws {
        guard bus != nil || ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"] != nil else {
            throw ValidationError("give --bus ADDRESS (a box bus printed by `bluez-sim run`) or set DBUS_SYSTEM_BUS_ADDRESS")
        }
    }

    /// Calls a method of the control service and returns its reply.
    func call(_ member: MemberName, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        let text = bus ?? ProcessInfo.processInfo.environment["DBUS_SYSTEM_BUS_ADDRESS"] ?? ""
        let address: BusAddress
        do {
            address = try BusAddress(parsing: text)
        } catch {
            throw ValidationError("\(error)")
        }
        let connection = try await DBusConnection.connect(to: address)
        defer { Task { await connection.close() } }
        do {
            return try await connection.call(destination: ControlService.busName, path: ControlService.objectPath,
                                             interface: ControlService.interfaceName, member: member, arguments)
        } catch let error as DBusError {
            FileHandle.standardError.write(Data("bluez-sim ctl: \(error.name): \(error.message)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// `bluez-sim ctl`: drives the control service of a running simulator.
struct Ctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Control a running simulator (org.proximityd.BlueZSim on any box bus).",
        subcommands: [Status.self, Move.self, SetAddress.self, Power.self, RestartBluetoothd.self, BeaconCommand.self, Pair.self,
                      Fault.self, Unplug.self, Replug.self, Failures.self, SetValue.self])

    // Declared here too, so `--bus` may come before the subcommand (`ctl --bus ADDR move …`).
    @OptionGroup var options: ControlOptions

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the simulation's state as JSON.")
        @OptionGroup var options: ControlOptions
        func run() async throws {
            let reply = try await options.call("GetState")
            print(reply.first?.string ?? "{}")
        }
    }

    struct Fault: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a box's scanner deaf (Discovering stays true, nothing is delivered) or clear that (SetFault).",
            discussion: """
                A deaf scanner hears again once its adapter is powered off and on, as a controller reset \
                clears a wedged firmware, or once the fault is cleared.

                Examples:
                  $ bluez-sim ctl --bus ADDR fault alpha deaf
                  $ bluez-sim ctl --bus ADDR fault alpha clear
                """)
        @OptionGroup var options: ControlOptions
        @Argument(help: "The box.") var box: String
        @Argument(help: "deaf or clear.") var fault: String
        func validate() throws {
            guard ["deaf", "clear"].contains(fault) else { throw ValidationError("the fault is deaf or clear, not '\(fault)'") }
        }
        func run() async throws {
            _ = try await options.call("SetFault", [.string(box), .string(fault)])
        }
    }

    struct Unplug: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Take a box's adapter off its bluetoothd, as a USB dongle pulled out (Unplug).",
            discussion: """
                Example:
                  $ bluez-sim ctl --bus ADDR unplug alpha
                """)
        @OptionGroup var options: ControlOptions
        @Argument(help: "The box.") var box: String
        func run() async throws {
            _ = try await options.call("Unplug", [.string(box)])
        }
    }

    struct Replug: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put an unplugged adapter back, under its name or another (Replug).",
            discussion: """
                Examples:
                  $ bluez-sim ctl --bus ADDR replug alpha
                  $ bluez-sim ctl --bus ADDR replug alpha --as hci1
                """)
        @OptionGroup var options: ControlOptions
        @Argument(help: "The box.") var box: String
        @Option(name: .customLong("as"), help: ArgumentHelp("The adapter's name when it comes back.", valueName: "hciN"))
        var adapter: String?
        func run() async throws {
            _ = try await options.call("Replug", [.string(box), .string(adapter ?? "")])
        }
    }

    struct Pair: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A private device (a phone) pairs with a box, as from the phone's Bluetooth settings (PairDevice).",
            discussion: """
                Prints the name the phone listed. Fails, with the reason, when the box does not advertise \
                discoverable and connectable with a name, is out of range, is not pairable, has no default \
                agent, or its agent refuses.

                Example:
                  $ bluez-sim ctl --bus ADDR pair anna alpha
                """)
        @OptionGroup var options: ControlOptions
        @Argument(help: "The private device.") var device: String
        @Argument(help: "The box.") var box: String
        func run() async throws {
            let reply = try await options.call("PairDevice", [.string(device), .string(box)])
            print("\(device) paired with \(box), listed as \"\(reply.first?.string ?? "")\"")
        }
    }

    struct Move: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Put a box at a fixed point (metres).")
        @OptionGroup var options: ControlOptions
        @Argument(help: "The box.") var box: String
        @Argument var x: Double
        @Argument var y: Double
        @Argument var z: Double = 0
        func run() async throws {
            _ = try await options.call("MoveBox", [.string(box), .double(x), .double(y), .double(z)])
        }
    }

    struct SetAddress: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "address",
            abstract: "Change the address a box is heard at (a private address rotating); its connections drop.")
        @OptionGroup var options: ControlOptions
        @Argument(help: "The box.") var box: String
        @Argument(help: "The new address, AA:BB:CC:DD:EE:FF.") var address: String
        func run() async throws {
            _ = try await options.call("SetAddress", [.string(box), .string(address)])
        }
    }

    struct Power: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Power a box's adapter on or off.")
        @OptionGroup var options: ControlOptions
        @Argument(help: "The box.") var box: String
        @Argument(help: "on or off.") var state: String
        func validate() throws {
            guard state == "on" || state == "off" else { throw ValidationError("power takes 'on' or 'off', not '\(state)'") }
        }
        func run() async throws {
            _ = try await options.call("SetPowered", [.string(box), .boolean(state == "on")])
        }
    }

    struct RestartBluetoothd: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restart-bluetoothd",
            abstract: "Restart a box's bluetoothd: org.bluez drops, its objects vanish, and it comes back empty.")
        @OptionGroup var options: ControlOptions
        @Argument(help: "The box.") var box: String
        func run() async throws {
            _ = try await options.call("RestartBluetoothd", [.string(box)])
        }
    }

    struct BeaconCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "beacon", abstract: "Add or remove third-party beacons.", subcommands: [Add.self, Remove.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a beacon, given as one entry of a scenario's beacons list in JSON.",
                discussion: """
                    Example: bluez-sim ctl beacon add '{"name": "door", "address": "C0:00:00:00:00:01", \
                    "ibeacon": {"uuid": "f7826da6-4fa2-4e98-8024-bc5b71e0893e", "major": 1, "minor": 2}, \
                    "position": [2, 0]}'
                    """)
            @OptionGroup var options: ControlOptions
            @Argument(help: "The beacon, in JSON.") var json: String
            func run() async throws {
                _ = try await options.call("AddBeacon", [.string(json)])
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Take a beacon off the air.")
            @OptionGroup var options: ControlOptions
            @Argument(help: "The beacon's name.") var name: String
            func run() async throws {
                _ = try await options.call("RemoveBeacon", [.string(name)])
            }
        }
    }

    struct Failures: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set failure rates (0...1).")
        @OptionGroup var options: ControlOptions
        @Option(help: "Probability that a connection attempt fails.") var connect: Double?
        @Option(help: "Probability that an advertisement is lost.") var packetLoss: Double?
        func validate() throws {
            guard connect != nil || packetLoss != nil else { throw ValidationError("give --connect and/or --packet-loss") }
        }
        func run() async throws {
            var settings: [String: DBusValue] = [:]
            if let connect { settings["ConnectionFailureRate"] = .double(connect) }
            if let packetLoss { settings["PacketLoss"] = .double(packetLoss) }
            _ = try await options.call("Configure", [.vardict(settings)])
        }
    }

    struct SetValue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set a radio parameter or link setting.",
            discussion: "Keys: \(ControlService.configurationKeys.joined(separator: ", ")).")
        @OptionGroup var options: ControlOptions
        @Argument(help: "The setting.") var key: String
        @Argument(help: "Its value (a number).") var value: Double
        func run() async throws {
            _ = try await options.call("Configure", [.vardict([key: .double(value)])])
        }
    }
}
