import ArgumentParser

/// `dbuskit-bench`: the root command only lists the subcommands.
@main
struct DBusKitBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dbuskit-bench",
        abstract: "Measure DBusKit on a private bus: method calls per second, and signals per second decoded side by side " +
            "with Python clients.",
        subcommands: [Calls.self, Signals.self, Emit.self, Receive.self]
    )
}
