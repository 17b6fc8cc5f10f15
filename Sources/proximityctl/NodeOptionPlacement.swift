import ArgumentParser

/// Lets the node's options (``NodeOptions``: `--bus`, `--system`, `--session`, `--bus-name`, and
/// `-H`/`--host`) come before the subcommand, as with busctl and systemctl:
/// `proximityctl --bus ADDRESS alerts list` is read as `proximityctl alerts list --bus ADDRESS`.
///
/// ArgumentParser gives a root command's options to the root only, and the root here has none: so
/// the options found before (or between) the subcommand names are moved just after them, before any
/// argument of the subcommand, and the subcommand's own `--help` stays the one place that lists them.
enum NodeOptionPlacement {
    /// The options that take a value (`--bus X`, `--bus=X`, `-H X`, `-HX`).
    static let valued: Set<String> = ["--bus", "--bus-name", "--host", "-H"]
    /// The flags.
    static let flags: Set<String> = ["--system", "--session"]

    /// `arguments` (without the program's name) with the node's options that come before the
    /// subcommand path of `root` moved right after it. Anything else is left in place; so is
    /// everything from the first argument that is neither a node option nor a subcommand name.
    static func place(_ arguments: [String], root: any ParsableCommand.Type) -> [String] {
        var path: [String] = []
        var moved: [String] = []
        var command = root
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            if argument == "--" { break }
            if flags.contains(argument) {
                moved.append(argument)
                index += 1
            } else if valued.contains(argument) {
                moved.append(argument)
                if index + 1 < arguments.endIndex {
                    moved.append(arguments[index + 1])
                }
                index += 2
            } else if valued.contains(where: { argument.hasPrefix($0 + "=") }) || (argument.hasPrefix("-H") && argument.count > 2) {
                moved.append(argument)
                index += 1
            } else if !argument.hasPrefix("-"), let subcommand = subcommand(argument, of: command) {
                path.append(argument)
                command = subcommand
                index += 1
            } else {
                break
            }
        }
        guard !moved.isEmpty else { return arguments }
        return path + moved + arguments[min(index, arguments.endIndex)...]
    }

    /// The subcommand of `command` that `name` names (its name or an alias).
    static func subcommand(_ name: String, of command: any ParsableCommand.Type) -> (any ParsableCommand.Type)? {
        command.configuration.subcommands.first {
            ($0.configuration.commandName ?? $0._commandName) == name || $0.configuration.aliases.contains(name)
        }
    }
}
