import Foundation
import ProximityTesting
import Testing

/// The files in `dbus/` as a distribution installs them, checked with the tools that read them.
@Suite("packaging: the systemd units and the D-Bus activation file")
struct PackagingTests {
    static let dbusDirectory = repositoryRoot.appendingPathComponent("dbus")

    /// `unit` (in dbus/) with ExecStart's binary the one just built (verify checks that it exists),
    /// through `systemd-analyze verify`; returns its `security` exposure, 0 (safe) to 10.
    static func analyze(_ unit: String, binary: String) async throws -> Double? {
        let text = try String(contentsOf: dbusDirectory.appendingPathComponent(unit), encoding: .utf8)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("proximityd-unit-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(unit)
        try text.replacingOccurrences(of: "ExecStart=/usr/bin/\(binary) ", with: "ExecStart=\(BuiltProducts.path(binary)) ")
            .write(to: path, atomically: true, encoding: .utf8)
        let verify = try await runCommand("systemd-analyze", ["verify", "--man=no", path.path], timeout: .seconds(60))
        #expect(verify.status == 0, "\(verify)")
        #expect(verify.stderr.trimmed.isEmpty && verify.stdout.trimmed.isEmpty, "\(verify)")
        let security = try await runCommand("systemd-analyze", ["security", "--offline=yes", "--no-pager", path.path], timeout: .seconds(60))
        #expect(security.status == 0, "\(security)")
        let verdict = security.stdout.split(separator: "\n").last { $0.contains("Overall exposure level") }.map(String.init) ?? ""
        // "→ Overall exposure level for proximityd.service: 1.5 OK 🙂"
        return verdict.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) }
    }

    @Test("the node's unit passes systemd-analyze verify, and its sandbox exposure is 1.5 at most (OK; the network is open for MQTT)")
    func unit() async throws {
        let text = try String(contentsOf: Self.dbusDirectory.appendingPathComponent("proximityd.service"), encoding: .utf8)
        #expect(text.contains("\nType=dbus\n") && text.contains("\nBusName=org.proximityd\n"))
        #expect(text.contains("\nRestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n") && !text.contains("\nPrivateNetwork=yes"))
        let exposure = try await Self.analyze("proximityd.service", binary: "proximityd")
        #expect(exposure.map { $0 <= 1.5 } == true, "exposure \(String(describing: exposure))")
    }

    @Test("the fleet service's unit passes systemd-analyze verify, and its sandbox exposure is 1.5 at most")
    func fleetUnit() async throws {
        let exposure = try await Self.analyze("proximity-fleet.service", binary: "proximity-fleet")
        #expect(exposure.map { $0 <= 1.5 } == true, "exposure \(String(describing: exposure))")
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
