import Foundation
import ProximityTesting
import Testing

/// The files in `dbus/` as a distribution installs them, checked with the tools that read them.
@Suite("packaging: the systemd unit and the D-Bus activation file")
struct PackagingTests {
    static let dbusDirectory = repositoryRoot.appendingPathComponent("dbus")

    @Test("the unit passes systemd-analyze verify and its sandbox rates SAFE")
    func unit() async throws {
        let text = try String(contentsOf: Self.dbusDirectory.appendingPathComponent("proximityd.service"), encoding: .utf8)
        #expect(text.contains("\nType=dbus\n") && text.contains("\nBusName=org.proximityd\n"))
        // verify checks that ExecStart's binary exists: point it at the one just built.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-unit-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let unit = directory.appendingPathComponent("proximityd.service")
        try text.replacingOccurrences(of: "ExecStart=/usr/bin/proximityd ", with: "ExecStart=\(BuiltProducts.path("proximityd")) ")
            .write(to: unit, atomically: true, encoding: .utf8)
        let verify = try await runCommand("systemd-analyze", ["verify", "--man=no", unit.path], timeout: .seconds(60))
        #expect(verify.status == 0, "\(verify)")
        #expect(verify.stderr.trimmed.isEmpty && verify.stdout.trimmed.isEmpty, "\(verify)")
        let security = try await runCommand("systemd-analyze", ["security", "--offline=yes", "--no-pager", unit.path], timeout: .seconds(60))
        #expect(security.status == 0, "\(security)")
        let verdict = security.stdout.split(separator: "\n").last { $0.contains("Overall exposure level") }.map(String.init) ?? ""
        #expect(verdict.contains("SAFE"), "\(security.stdout)")
    }

    @Test("the activation file hands org.proximityd to the unit's alias")
    func activation() throws {
        let unit = try String(contentsOf: Self.dbusDirectory.appendingPathComponent("proximityd.service"), encoding: .utf8)
        let activation = try String(contentsOf: Self.dbusDirectory.appendingPathComponent("org.proximityd.service"), encoding: .utf8)
        func value(_ key: String, in text: String) -> String? {
            text.split(separator: "\n").first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
        }
        #expect(activation.contains("[D-BUS Service]"))
        #expect(value("Name", in: activation) == "org.proximityd")
        let alias = try #require(value("SystemdService", in: activation))
        #expect(value("Alias", in: unit) == alias, "SystemdService=\(alias) must be an alias of proximityd.service")
        #expect(value("BusName", in: unit) == value("Name", in: activation))
    }
}
