import ArgumentParser
import Foundation
import ProximityNode

/// `proximityd check-config [FILE]`: reads a config file as `run` would, and says whether it may be
/// used, without starting anything.
struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check a config file without running the node.",
        discussion: """
            Reads the file as `proximityd run --config FILE` and a reload would, and reports every \
            problem, one line each on standard error: FILE:LINE:COLUMN: message. A valid file \
            prints FILE: ok (N regions, M alerts, K rules) on standard output.

            Exit status: 0 when the file is valid; 65 (EX_DATAERR) when it is not; 66 (EX_NOINPUT) \
            when it cannot be read (missing, not allowed, a directory), with one line \
            FILE: cannot read: reason.

            Examples:
              $ proximityd check-config
                Checks /etc/proximityd/proximityd.yaml.
              $ proximityd check-config desk.yaml && sudo systemctl reload proximityd
                Reloads the node only with a valid file.
            """
    )

    @Argument(help: ArgumentHelp("The config file to check.", valueName: "file"))
    var file: String = ConfigFile.defaultPath

    /// sysexits(3): the file's content is wrong.
    static let dataError: Int32 = 65
    /// sysexits(3): the file cannot be read.
    static let noInput: Int32 = 66

    func run() throws {
        let bytes: [UInt8]
        do {
            bytes = try ConfigFile.contents(ofFile: file)
        } catch {
            Self.fail(error.problems, status: Self.noInput)
        }
        let config: ConfigFile
        do {
            config = try ConfigFile.parse(bytes, path: file)
        } catch {
            Self.fail(error.problems, status: Self.dataError)
        }
        func count(_ n: Int, _ thing: String) -> String { "\(n) \(thing)\(n == 1 ? "" : "s")" }
        print("\(file): ok (\(count(config.regions.count, "region")), \(count(config.alerts.count, "alert")), " +
              "\(count(config.rules.count, "rule")))")
    }

    /// Prints each line on standard error and exits with `status`.
    private static func fail(_ lines: [String], status: Int32) -> Never {
        FileHandle.standardError.write(Data(lines.map { "\($0)\n" }.joined().utf8))
        Foundation.exit(status)
    }
}
