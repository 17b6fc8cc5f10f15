import ArgumentParser
import Foundation

extension AsyncParsableCommand {
    /// Parses `arguments` (nil: the command line), runs the command, and reports an error in the
    /// style of every error of proximityctl, proximityd and proximity-fleet: one line on standard
    /// error, `COMMAND: error: MESSAGE`. A usage error (ArgumentParser's own, or a
    /// `ValidationError`) adds the line `See 'COMMAND SUBCOMMAND --help'.` in place of the usage
    /// ArgumentParser prints; the exit status is ArgumentParser's (64 for a usage error). Help and
    /// `--version` go to standard output, as before.
    public static func runReportingErrors(_ arguments: [String]?) async {
        do {
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exitReporting(error)
        }
    }

    /// Prints `error` in the one error style and exits with ArgumentParser's status for it.
    public static func exitReporting(_ error: any Error) -> Never {
        let status = exitCode(for: error)
        let full = fullMessage(for: error)
        if full.isEmpty { Foundation.exit(status.rawValue) }  // an ExitCode: nothing to say
        if status == .success {  // help, --version
            print(full)
            Foundation.exit(status.rawValue)
        }
        let name = configuration.commandName ?? _commandName
        var text = "\(name): error: \(message(for: error))\n"
        // A usage error's full message ends "  See 'proximityctl regions add --help' for more
        // information." (but a root called with no arguments, whose full message is its help).
        if status == .validationFailure {
            let help = full.split(separator: "\n").lazy.compactMap { line -> Substring? in
                guard let start = line.range(of: "See '"), let end = line.range(of: "' for more information.") else { return nil }
                return line[start.upperBound..<end.lowerBound]
            }.first
            text += "See '\(help.map(String.init) ?? "\(name) --help")'.\n"
        }
        FileHandle.standardError.write(Data(text.utf8))
        Foundation.exit(status.rawValue)
    }
}
