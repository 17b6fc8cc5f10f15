import ArgumentParser
import ProximityDiagnostics

/// `proximityctl doctor`: the checks are ProximityDiagnostics' ``Doctor``; this prints them.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check this box: kernel Bluetooth, controllers, bluetoothd, BlueZ's privacy, the adapter, advertising, " +
            "proximityd and its policy.",
        discussion: """
            Prints one line per check: "ok", "warn" or "FAIL", what was found, and for each problem \
            how to fix it. Exit status: 0 when nothing failed, 1 when a check failed, 64 for a bad \
            argument.

            Examples:
              $ proximityctl doctor
                Every check, for the adapter hci0.
              $ proximityctl doctor --adapter hci1 --json
                The checks of another adapter, as JSON.
              $ proximityctl doctor --bluez-config /etc/bluetooth/main.conf
                With bluetoothd's configuration file named (its Privacy setting is checked).
            """)

    @OptionGroup var node: NodeOptions

    @Option(name: .long, help: ArgumentHelp("The adapter proximityd uses.", valueName: "name"))
    var adapter: String = "hci0"

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    @Option(name: .customLong("bluez-config"),
            help: ArgumentHelp("bluetoothd's configuration file, whose Privacy setting is checked.", valueName: "file"))
    var bluezConfig: String = BlueZMainConf.defaultPath

    func validate() throws {
        guard ProximityDiagnostics.Doctor.adapterIndex(adapter) != nil else {
            throw ValidationError("--adapter: '\(adapter)' is not an adapter name such as hci0")
        }
        if bluezConfig.isEmpty { throw ValidationError("--bluez-config: must not be empty") }
    }

    func run() async throws {
        let report = await ProximityDiagnostics.Doctor(bus: node.address, busName: node.name, adapter: adapter,
                                                       bluezConfig: bluezConfig).run()
        print(json ? try report.json() : report.text, terminator: json ? "\n" : "")
        if report.failed { throw ExitCode(1) }
    }
}
