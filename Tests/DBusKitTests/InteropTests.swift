import DBusKit
import Foundation
import ProximityTesting
import Testing

/// DBusKit's exported objects, seen by clients nobody here wrote: busctl, gdbus, dbus-send.
@Suite("Interop with busctl, gdbus and dbus-send")
struct InteropTests {
    func withFixture(_ body: (PrivateBus, BusName) async throws -> Void) async throws {
        try await withBusPair { bus, server, _ in
            try await exportErrorFixture(server)
            _ = try await server.export([DBusInterface("org.proximityd.Echo1", methods: [
                DBusMethod("Echo", inputs: [DBusArgument("value", .variant)], outputs: [DBusArgument("value", .variant)]) { $0.arguments },
                DBusMethod("Device", outputs: [DBusArgument("props", .dictionary(key: .string, value: .variant))]) { _ in
                    [.vardict(["RSSI": .int16(-70), "UUIDs": .strings(["b89491c9-43dd-4d75-bf16-dff381aed967"]),
                               "ManufacturerData": .dictionary(key: .uint16, value: .variant,
                                                                        [.init(.uint16(76), .variant(.bytes([2, 21])))])])]
                },
            ])], at: "/test/errors")
            #expect(try await server.requestName("org.proximityd.Interop") == .primaryOwner)
            try await body(bus, "org.proximityd.Interop")
        }
    }

    @Test("busctl introspect, get-property, set-property, call")
    func busctl() async throws {
        try await withFixture { bus, name in
            let address = "--address=\(bus.address)"
            let introspect = try await runCommand("busctl", [address, "introspect", name.rawValue, "/test/errors", testInterface.rawValue])
            #expect(introspect.status == 0, "\(introspect)")
            #expect(introspect.stdout.contains(".Add"))
            #expect(introspect.stdout.contains(".Level"))
            #expect(introspect.stdout.range(of: #"\.Fixed\s+property\s+s\s+"x"\s+const"#, options: .regularExpression) != nil,
                    "\(introspect.stdout)")

            let add = try await runCommand("busctl", [address, "call", name.rawValue, "/test/errors", testInterface.rawValue, "Add", "ii", "2", "40"])
            #expect(add.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "i 42", "\(add)")

            let set = try await runCommand("busctl", [address, "set-property", name.rawValue, "/test/errors", testInterface.rawValue, "Level", "q", "9"])
            #expect(set.status == 0, "\(set)")
            let get = try await runCommand("busctl", [address, "get-property", name.rawValue, "/test/errors", testInterface.rawValue, "Level"])
            #expect(get.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "q 9")

            // busctl's --json cannot print dicts with non-string keys (a{qv}), so the plain form.
            let device = try await runCommand("busctl", [address, "call", name.rawValue, "/test/errors", "org.proximityd.Echo1", "Device"])
            #expect(device.stdout.contains(#""ManufacturerData" a{qv} 1 76 ay 2 2 21"#), "\(device)")
            #expect(device.stdout.contains(#""RSSI" n -70"#), "\(device)")
            let status = try await runCommand("busctl", [address, "--json=short", "get-property", name.rawValue, "/test/errors",
                                                         testInterface.rawValue, "Fixed", "Level"])
            let lines = status.stdout.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
            }
            #expect(lines.map { "\($0["type"] ?? "")" } == ["s", "q"], "\(status)")

            let echo = try await runCommand("busctl", [address, "call", name.rawValue, "/test/errors", "org.proximityd.Echo1", "Echo",
                                                       "v", "a{sv}", "2", "a", "ay", "3", "1", "2", "3", "b", "as", "0"])
            #expect(echo.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == #"v a{sv} 2 "a" ay 3 1 2 3 "b" as 0"#, "\(echo)")
        }
    }

    @Test("busctl sees the standard error names")
    func busctlErrors() async throws {
        try await withFixture { bus, name in
            let address = "--address=\(bus.address)"
            let wrong = try await runCommand("busctl", [address, "call", name.rawValue, "/test/errors", testInterface.rawValue, "Add", "s", "x"])
            #expect(wrong.status != 0)
            #expect(wrong.stderr.contains("Invalid arguments 's' to call org.proximityd.Test1.Add(), expecting 'ii'."), "\(wrong)")
            let unknown = try await runCommand("busctl", [address, "call", name.rawValue, "/test/errors", testInterface.rawValue, "Nope"])
            #expect(unknown.stderr.contains("Unknown method 'Nope'"), "\(unknown)")
            let readOnly = try await runCommand("busctl", [address, "set-property", name.rawValue, "/test/errors", testInterface.rawValue, "Fixed", "s", "y"])
            #expect(readOnly.stderr.contains("is not writable"), "\(readOnly)")
        }
    }

    @Test("dbus-send and gdbus call and introspect")
    func dbusSendAndGdbus() async throws {
        try await withFixture { bus, name in
            let send = try await runCommand("dbus-send", ["--bus=\(bus.address)", "--print-reply", "--dest=\(name)", "/test/errors",
                                                          "\(testInterface).Add", "int32:2", "int32:40"])
            #expect(send.status == 0, "\(send)")
            #expect(send.stdout.contains("int32 42"))

            let sendError = try await runCommand("dbus-send", ["--bus=\(bus.address)", "--print-reply", "--dest=\(name)", "/test/errors",
                                                               "\(testInterface).Refuse"])
            #expect(sendError.stderr.contains("org.proximityd.Error.NotPermitted"), "\(sendError)")

            let call = try await runCommand("gdbus", ["call", "--address", bus.address, "--dest", name.rawValue, "--object-path",
                                                      "/test/errors", "--method", "\(testInterface).Add", "2", "40"])
            #expect(call.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(42,)", "\(call)")

            let introspect = try await runCommand("gdbus", ["introspect", "--address", bus.address, "--dest", name.rawValue,
                                                            "--object-path", "/test/errors"])
            #expect(introspect.stdout.contains("interface org.proximityd.Test1"), "\(introspect)")
            #expect(introspect.stdout.contains("Add(in  i a,"), "\(introspect)")
        }
    }
}
