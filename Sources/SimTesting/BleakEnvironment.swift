import Foundation
import ProximityTesting

/// Where bleak lives: `$BLEAK_PYTHON`, or the virtual environment `.venv-tests` at the package
/// root, created with `python3 -m venv` and `pip install -r tests/python/requirements.txt` when
/// it is missing (once per test run).
public actor BleakEnvironment {
    public static let shared = BleakEnvironment()
    nonisolated public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    nonisolated public static let scripts = root.appendingPathComponent("tests/python")
    nonisolated public static let venv = root.appendingPathComponent(".venv-tests")

    private var checked = false
    private var found: String?

    public func python() async -> String? {
        if checked { return found }
        checked = true
        found = await locate()
        return found
    }

    private func locate() async -> String? {
        if let given = ProcessInfo.processInfo.environment["BLEAK_PYTHON"], !given.isEmpty { return given }
        let python = Self.venv.appendingPathComponent("bin/python").path
        if await hasBleak(python) { return python }
        guard await run("python3", ["-m", "venv", Self.venv.path]) else {
            print("bleak tests skipped: cannot create \(Self.venv.path) with `python3 -m venv`")
            return nil
        }
        guard await run(Self.venv.appendingPathComponent("bin/pip").path,
                        ["install", "--quiet", "-r", Self.scripts.appendingPathComponent("requirements.txt").path]),
              await hasBleak(python) else {
            print("bleak tests skipped: cannot install bleak into \(Self.venv.path) with pip (is PyPI reachable?)")
            return nil
        }
        return python
    }

    private func hasBleak(_ python: String) async -> Bool {
        guard FileManager.default.isExecutableFile(atPath: python) else { return false }
        return await run(python, ["-c", "import bleak"])
    }

    private func run(_ executable: String, _ arguments: [String]) async -> Bool {
        (try? await runCommand(executable, arguments, timeout: .seconds(300)))?.status == 0
    }

    /// Runs `script` of tests/python with bleak's Python against the bus `bus` (as its system
    /// bus), and decodes the JSON object of its last line (`{"error": …}` when there is none).
    nonisolated public func run(_ script: String, _ arguments: [String], bus: String,
                                timeout: Duration = .seconds(60)) async throws -> (CommandResult, [String: Any]) {
        guard let python = await python() else { throw TestKitError("bleak is not available (scripts/setup.sh creates .venv-tests)") }
        let result = try await runCommand(python, [Self.scripts.appendingPathComponent(script).path] + arguments,
                                          environment: ["DBUS_SYSTEM_BUS_ADDRESS": bus], timeout: timeout)
        let line = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        let json = (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? ["error": "\(result)"]
        return (result, json)
    }
}
